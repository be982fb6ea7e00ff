"""Tokens under the admin's hand: validity must be positive, a revoked token is refused from the next request,
and the list shows owner, state, expiry and last use, never a secret.

The CLI in process (click's runner) on a board's config; the revocation test against a real board process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from board_fixtures import BoardProcess
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from runner.cli import main


@pytest.fixture()
def config(tmp_path: Path) -> Path:
    path = tmp_path / "board.yaml"
    settings = {"board_id": "tokens", "data_dir": str(tmp_path / "data"), "judges": ["ref#1", "ref#2"]}
    path.write_text(yaml.safe_dump({**settings, "candidates": ["openai/cand"]}), encoding="utf-8")
    return path


def _ispm(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("days", ["0", "-1", "nan", "inf", "1e400", "36501"])
def test_a_token_valid_for_no_time_or_past_any_date_is_refused_without_a_traceback(config: Path, days: str) -> None:
    shown = {"1e400": "inf"}.get(days, days)
    assert _ispm("board", "token", "create", str(config), "alice", "--valid-days", days) == (
        1,
        "",
        f"Error: a token's validity must be over 0 and at most 36500 days, not {shown} "
        "(leave --valid-days out for a token that never expires)\n",
    )
    assert _ispm("board", "token", "list", str(config))[1] == "ID  SUBMITTER  STATE  EXPIRES  LAST USED\n"


def test_the_list_shows_owner_state_expiry_and_last_use_and_never_a_secret(config: Path) -> None:
    secrets = [_ispm("board", "token", "create", str(config), name)[1].strip() for name in ("alice", "bob", "carol")]
    engine = create_engine(f"sqlite:///{config.parent / 'data' / 'board.sqlite'}")
    with engine.begin() as db:
        db.execute(
            text(
                "UPDATE tokens SET expires_at = '2999-01-01 00:00:00.000000',"
                " last_used_at = '2026-06-01 12:30:00.000000' WHERE submitter = 'alice'"
            )
        )
        db.execute(text("UPDATE tokens SET expires_at = '2026-01-01 00:00:00.000000' WHERE submitter = 'carol'"))
    engine.dispose()
    assert _ispm("board", "token", "revoke", str(config), "2") == (0, "token 2 (bob): revoked\n", "")
    code, listed, _ = _ispm("board", "token", "list", str(config))
    assert (code, listed) == (
        0,
        "ID  SUBMITTER  STATE    EXPIRES               LAST USED\n"
        "1   alice      active   2999-01-01 00:00:00Z  2026-06-01 12:30:00Z\n"
        "2   bob        revoked  never                 never\n"
        "3   carol      expired  2026-01-01 00:00:00Z  never\n",
    )
    as_json = _ispm("board", "token", "list", str(config), "--json")[1]
    assert not [s for s in secrets if s in listed + as_json or s.removeprefix("ispm_") in listed + as_json]


def test_revoking_a_token_twice_or_one_that_is_not_there_says_so(config: Path) -> None:
    _ispm("board", "token", "create", str(config), "alice")
    _ispm("board", "token", "revoke", str(config), "1")
    assert _ispm("board", "token", "revoke", str(config), "1") == (
        1,
        "",
        "Error: token 1 (alice) was revoked already\n",
    )
    assert _ispm("board", "token", "revoke", str(config), "7") == (1, "", "Error: no token 7\n")


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    settings = {"board_id": "tokens-live", "judges": ["ref#1", "ref#2"], "candidates": ["openai/cand"]}
    with BoardProcess(tmp_path_factory.mktemp("board-tokens"), settings) as process:
        yield process


def test_a_revoked_token_is_refused_from_the_next_request_and_its_last_use_is_listed(board: BoardProcess) -> None:
    secret = board.token("dave")

    def cancel_nothing() -> httpx.Response:  # authenticates, then finds no such submission
        return httpx.delete(
            f"{board.url}/api/v1/submissions/424242", headers={"authorization": f"Bearer {secret}"}, timeout=10
        )

    before = cancel_nothing()
    assert (before.status_code, before.json()) == (404, {"error": "no submission 424242"})
    (row,) = [line for line in _ispm("board", "token", "list", str(board.config))[1].splitlines() if "dave" in line]
    assert row.split()[2:4] == ["active", "never"] and not row.endswith("never")
    assert _ispm("board", "token", "revoke", str(board.config), row.split()[0])[0] == 0
    after = cancel_nothing()
    assert after.status_code == 401
    assert after.json()["error"].startswith("this token was revoked at ")
