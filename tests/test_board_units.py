"""The board's parts without a server: quarantine copies, a hostile retag, tokens, and the signed statement."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from runner.board.db import make_engine, migrate, sessions, utcnow
from runner.board.errors import BoardError
from runner.board.quarantine import MANIFEST, MAX_MEMBERS, inspect_archive, load_image, untagged_copy
from runner.board.tokens import authenticate, create_token, token_sha256


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar}  # type: ignore[union-attr]


def _write_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _retagged(source: Path, out: Path, tag: str) -> Path:
    """``source`` with its manifest and ``repositories`` claiming ``tag``, every other member as it was."""
    with tarfile.open(source) as src, tarfile.open(out, "w") as dst:
        for member in src:
            if member.name in (MANIFEST, "repositories"):
                continue
            dst.addfile(member, src.extractfile(member) if member.isfile() else None)
        manifest = json.loads(src.extractfile(MANIFEST).read())  # type: ignore[union-attr]
        manifest[0]["RepoTags"] = [tag]
        repository, _, version = tag.rpartition(":")
        top = manifest[0]["Layers"][-1].split("/")[0]
        for name, data in ((MANIFEST, manifest), ("repositories", {repository: {version: top}})):
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            dst.addfile(info, io.BytesIO(raw))
    return out


def test_the_loaded_copy_has_no_tags_and_every_other_byte_kept(tmp_path: Path) -> None:
    manifest = [{"Config": "c.json", "RepoTags": ["ispm/base:latest"], "Layers": ["l/layer.tar"]}]
    source = _write_tar(
        tmp_path / "in.tar",
        {
            "c.json": b'{"config": {}}',
            "l/layer.tar": b"layer bytes",
            "repositories": b'{"ispm/base": {"latest": "l"}}',
            MANIFEST: json.dumps(manifest).encode(),
        },
    )
    copied = _members(untagged_copy(source, tmp_path / "out.tar"))
    assert sorted(copied) == ["c.json", "l/layer.tar", MANIFEST]
    assert json.loads(copied[MANIFEST]) == [{"Config": "c.json", "RepoTags": None, "Layers": ["l/layer.tar"]}]
    assert (copied["c.json"], copied["l/layer.tar"]) == (b'{"config": {}}', b"layer bytes")


@pytest.mark.docker
def test_a_hostile_archive_cannot_retag_the_boards_images(refs: Any, tmp_path: Path) -> None:
    import docker

    client = docker.from_env()
    try:
        victim = "ispm-test/victim:latest"
        client.images.get(refs["base"].tag).tag("ispm-test/victim", tag="latest")
        saved = tmp_path / "null.tar"
        with saved.open("wb") as out:
            for chunk in client.images.get(refs["agent-null"].tag).save():
                out.write(chunk)
        hostile = _retagged(saved, tmp_path / "hostile.tar", victim)
        with pytest.raises(BoardError):
            inspect_archive(hostile)  # refused for its names (tests/test_board_attacks.py); the copy strips them too
        archive = inspect_archive(saved)  # saved by id: no names
        loaded = load_image(hostile, archive, "ispm-test/quarantined:1")
        assert loaded == refs["agent-null"].id
        assert client.images.get(victim).id == client.images.get(refs["base"].tag).id
        assert client.images.get("ispm-test/quarantined:1").id == loaded
    finally:
        for tag in ("ispm-test/victim:latest", "ispm-test/quarantined:1"):
            with contextlib.suppress(docker.errors.DockerException):
                client.images.remove(tag)
        client.close()


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


def test_an_archive_with_a_flood_of_members_is_refused_at_the_bound(tmp_path: Path) -> None:
    flood = _write_tar(tmp_path / "flood.tar", {f"m/{n}": b"" for n in range(MAX_MEMBERS + 1)})
    with pytest.raises(BoardError) as refused:
        inspect_archive(flood)
    assert (refused.value.status, str(refused.value)) == (422, f"refused: the archive has over {MAX_MEMBERS} members")
