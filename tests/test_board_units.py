"""The board's parts without a server: tokens, the signed statement, the official spec."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runner.board.db import make_engine, migrate, sessions, utcnow
from runner.board.errors import BoardError
from runner.board.tokens import MAX_VALID_DAYS, authenticate, create_token, token_sha256


def test_tokens_are_stored_hashed_and_expire(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'board.sqlite'}")
    migrate(engine)
    with sessions(engine)() as session:
        secret = create_token(session, "ivan", open_limit=2, valid_days=1)
        row = authenticate(session, secret)
        assert (row.submitter, row.token_sha256, row.open_limit) == ("ivan", token_sha256(secret), 2)
        with pytest.raises(BoardError) as expired:
            authenticate(session, secret, now=utcnow() + timedelta(days=1, seconds=1))
        assert expired.value.status == 401 and str(expired.value).startswith("this token expired at ")
    engine.dispose()
    assert secret.encode() not in (tmp_path / "board.sqlite").read_bytes()


@pytest.mark.parametrize("days", [float("inf"), float("nan"), 1e308, MAX_VALID_DAYS + 1, 0, -1])
def test_a_tokens_validity_past_the_bound_is_a_clear_422(tmp_path: Path, days: float) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'board.sqlite'}")
    migrate(engine)
    with sessions(engine)() as session, pytest.raises(BoardError) as refused:
        create_token(session, "ivan", open_limit=2, valid_days=days)
    engine.dispose()
    assert (refused.value.status, str(refused.value)) == (
        422,
        f"a token's validity must be over 0 and at most {MAX_VALID_DAYS} days, not {days:g} "
        "(leave --valid-days out for a token that never expires)",
    )


def test_a_statement_signs_its_exact_canonical_bytes() -> None:
    from runner.record.verify import Statement, StatementDigests, statement_bytes

    statement = Statement(
        board_id="b", key_sha256="k", submission_id=1, bundle_name="r.tar.gz", bundle_sha256="s", run_id="r",
        official=False, candidate="openai/cand", resolved_models={"openai/cand": "m"},
        digests=StatementDigests(world="w", task_set="t", ground_truth="g", rubric_set="u"), images={"i": "sha256:x"},
        runner_version="0.1.0", started_at="2026-12-01T00:00:00Z", ended_at=None, signed_at="2026-12-01T00:00:01Z",
    )  # fmt: skip
    signed = statement_bytes(statement)
    assert signed.endswith(b"}\n") and b" " not in signed.replace(b"0.1.0", b"")
    assert Statement.model_validate_json(signed) == statement
    key = Ed25519PrivateKey.generate()
    key.public_key().verify(key.sign(signed), signed)  # raises when it does not hold


def test_a_real_board_runs_the_v1_spec_and_a_trial_never_official(tmp_path: Path) -> None:
    from runner.board.config import BoardConfig, TrialSetting
    from runner.board.db import Submission
    from runner.board.official import run_spec
    from runner.run.spec import RunError

    sub = Submission(image_tag="ispm-board/submission-1:abc", candidate="openai/cand")
    real = BoardConfig(board_id="b", data_dir=tmp_path, judges=("anthropic/a", "openai/b"), candidates=["openai/cand"])
    spec = run_spec(real, sub)
    assert spec.official and (spec.epochs, spec.concurrency, spec.tasks, spec.calibration) == (5, 2, None, None)
    assert (spec.agent_image, spec.candidate, spec.judges) == (
        sub.image_tag,
        "openai/cand",
        ("anthropic/a", "openai/b"),
    )
    trial = real.model_copy(update={"trial": TrialSetting(tasks=["ispm-001"], epochs=1, calibration="replay")})
    shortened = run_spec(trial, sub)
    assert not shortened.official and (shortened.epochs, shortened.tasks) == (1, ["ispm-001"])
    with pytest.raises(RunError) as refused:
        run_spec(real.model_copy(update={"judges": ("ref#1", "ref#2")}), sub)
    assert refused.value.problems == [
        "the offline reference judge cannot fill an official judge slot; declare two model judges"
    ]
