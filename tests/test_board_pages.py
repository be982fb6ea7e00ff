"""Pages are rendered once per change, not per request: many requests share one render, a publish shows after
the next check and a cancel here on the very next request, and a run's progress does not re-render the
leaderboard.

The board's real app in process (Starlette over ASGI) on a real SQLite database; the published run is the
session's gold calibration run, copied.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from board_fixtures import board_in_process
from sqlalchemy import update
from starlette.testclient import TestClient

from runner.board.app import create_app
from runner.board.db import Submission, Token, utcnow
from runner.board.pagecache import PageCache
from runner.board.tokens import create_token
from runner.record.model import RunRecord

RECHECK_S = PageCache().recheck_s


@pytest.fixture()
def board(tmp_path: Path) -> Iterator[tuple[Any, TestClient]]:
    ctx = board_in_process(tmp_path / "data", candidates=["openai/cand"])
    with TestClient(create_app(ctx)) as client:
        yield ctx, client
    ctx.engine.dispose()


def _renders(client: TestClient) -> int:
    cache: PageCache = client.app.state.page_cache  # type: ignore[attr-defined]
    return cache.renders


def _add(ctx: Any, state: str, *, run_dir: Path | None = None, run_id: str | None = None) -> int:
    now = utcnow()
    with ctx.sessions() as session, session.begin():
        token = Token(submitter="t", token_sha256=os.urandom(32).hex(), created_at=now, open_limit=9)
        session.add(token)
        session.flush()
        sub = Submission(
            token_id=token.id, display_name=f"in {state}", candidate="openai/cand", links=[], state=state,
            upload_sha256="0" * 64, upload_bytes=0, image_id="", image_tag="", worker=None, run_id=run_id,
            run_dir=None if run_dir is None else str(run_dir), samples_done=0, samples_planned=0,
            created_at=now, updated_at=now, published_at=now if state == "published" else None,
        )  # fmt: skip
        session.add(sub)
        session.flush()
        return int(sub.id)


def test_many_requests_to_the_leaderboard_share_one_render(board: tuple[Any, TestClient]) -> None:
    _, client = board
    pages = {client.get("/leaderboard").text for _ in range(20)}
    assert (len(pages), _renders(client)) == (1, 1)


def test_a_publish_shows_at_the_next_check_and_renders_once(
    board: tuple[Any, TestClient], gold_run: Path, tmp_path: Path
) -> None:
    ctx, client = board
    client.get("/leaderboard")
    run_dir = shutil.copytree(gold_run, tmp_path / "published-run")
    run_id = RunRecord.model_validate_json((run_dir / "record.json").read_text()).run_id
    _add(ctx, "published", run_dir=run_dir, run_id=run_id)
    time.sleep(RECHECK_S + 0.1)
    deadline = time.monotonic() + 10
    while f"/runs/{run_id}" not in client.get("/leaderboard").text:  # the old page is served while the check runs
        assert time.monotonic() < deadline, "the publish never showed"
        time.sleep(0.05)
    shown = [client.get("/leaderboard").text for _ in range(5)]
    assert all(f"/runs/{run_id}" in page for page in shown)
    assert _renders(client) == 2


def test_a_cancel_through_the_api_shows_on_the_very_next_request(board: tuple[Any, TestClient]) -> None:
    ctx, client = board
    secret, sub_id = _owned(ctx, "owner", "queued")
    assert 'id="not-published"' not in client.get("/leaderboard").text
    cancelled = client.delete(f"/api/v1/submissions/{sub_id}", headers={"authorization": f"Bearer {secret}"})
    assert cancelled.status_code == 200
    assert f'<a href="/submissions/{sub_id}">{sub_id}</a>' in client.get("/leaderboard").text


def test_a_runs_progress_does_not_render_the_leaderboard_again(board: tuple[Any, TestClient]) -> None:
    ctx, client = board
    sub_id = _add(ctx, "running")
    client.get("/leaderboard")
    for done in range(1, 4):
        with ctx.sessions() as session, session.begin():
            session.execute(
                update(Submission).where(Submission.id == sub_id).values(samples_done=done, updated_at=utcnow())
            )
        time.sleep(RECHECK_S + 0.1)
        client.get("/leaderboard")
    assert _renders(client) == 1


def test_a_page_is_gzipped_for_a_client_that_accepts_it(board: tuple[Any, TestClient]) -> None:
    _, client = board
    plain = client.get("/leaderboard", headers={"accept-encoding": "identity"})
    zipped = client.get("/leaderboard", headers={"accept-encoding": "gzip"})
    assert (plain.headers.get("content-encoding"), zipped.headers["content-encoding"]) == (None, "gzip")
    assert zipped.text == plain.text  # the client decodes it


def _owned(ctx: Any, submitter: str, state: str) -> tuple[str, int]:
    """A new token of ``submitter`` and a submission of it in ``state``: the token's secret and the submission."""
    with ctx.sessions() as session:
        secret = create_token(session, submitter, open_limit=2)
    with ctx.sessions() as session, session.begin():
        token_id = session.query(Token.id).filter(Token.submitter == submitter).scalar()
    sub_id = _add(ctx, state)
    with ctx.sessions() as session, session.begin():
        session.execute(update(Submission).where(Submission.id == sub_id).values(token_id=token_id))
    return secret, sub_id


def _published_copy(ctx: Any, gold_run: Path, tmp_path: Path) -> tuple[str, Path]:
    run_dir = shutil.copytree(gold_run, tmp_path / "published-run")
    run_id = RunRecord.model_validate_json((run_dir / "record.json").read_text()).run_id
    _add(ctx, "published", run_dir=run_dir, run_id=run_id)
    return run_id, run_dir


def test_a_sample_page_shows_a_models_bidi_and_control_characters_instead_of_applying_them(
    board: tuple[Any, TestClient], gold_run: Path, tmp_path: Path
) -> None:
    ctx, client = board
    run_id, run_dir = _published_copy(ctx, gold_run, tmp_path)
    page = sorted((run_dir / "samples").glob("*.html"))[0]
    # What the renderer writes for a model's reply that holds an override and a bell: escaped, yet applied.
    page.write_text(page.read_text().replace("</body>", "<p>\u202etxt.exe\u202c and \x07</p></body>"))
    served = [client.get(f"/runs/{run_id}/samples/{page.name}") for _ in range(3)]
    assert {r.status_code for r in served} == {200}
    text = served[0].text
    assert "<p>\u27e8U+202E\u27e9txt.exe\u27e8U+202C\u27e9 and \u27e8U+0007\u27e9</p>" in text
    assert not {"\u202e", "\u202c", "\x07"} & set(text)
    assert client.app.state.board.files.renders == 1  # type: ignore[attr-defined]


def test_a_search_of_the_task_list_is_rendered_once_per_query(board: tuple[Any, TestClient]) -> None:
    _, client = board
    pages = {client.get("/tasks", params={"q": "leaver"}).text for _ in range(5)}
    client.get("/tasks", params={"q": "joiner"})
    assert len(pages) == 1
    assert client.app.state.board.searches.renders == 2  # type: ignore[attr-defined]


def test_the_leaderboard_and_the_task_pages_read_each_published_record_once_by_one_rule(
    board: tuple[Any, TestClient], gold_run: Path, tmp_path: Path
) -> None:
    from runner.site.model import PublishedRun

    ctx, client = board
    run_id, run_dir = _published_copy(ctx, gold_run, tmp_path)
    for path in ("/leaderboard", "/tasks", "/tasks/ispm-001", "/tasks?q=ispm"):
        assert client.get(path).status_code == 200
    entry = PublishedRun.model_validate_json(
        (ctx.config.data_dir / "published" / f"{run_dir.name}.entry.json").read_text()
    )
    record = RunRecord.model_validate_json((run_dir / "record.json").read_text())
    assert (entry.record.run_id, entry.record.samples, entry.tasks.keys()) == (
        run_id,
        [],
        {t.task_id for t in record.scores.tasks} if record.scores else set(),
    )
    assert entry.record.scores is not None and (entry.record.scores.tasks, entry.record.scores.breakdowns) == ([], {})


@pytest.mark.parametrize(("path", "location"), [("/tasks/%C2%80%2F", "/tasks/%C2%80"), ("/tasks/%1F%2F", "/tasks/%1F")])
def test_a_trailing_slash_redirect_names_its_path_percent_encoded(
    board: tuple[Any, TestClient], path: str, location: str
) -> None:
    # The fuzzer's find: a decoded control or non-ASCII character went raw into the location header (a 500, or a
    # header no client can follow).
    _, client = board
    response = client.get(path, follow_redirects=False)
    assert (response.status_code, response.headers["location"]) == (308, location)


def test_a_submissions_api_status_is_rendered_once_until_its_row_moves_and_a_cancel_shows_at_once(
    board: tuple[Any, TestClient],
) -> None:
    ctx, client = board
    secret, sub_id = _owned(ctx, "poller", "running")
    keyed: PageCache = client.app.state.board.keyed  # type: ignore[attr-defined]
    before = keyed.renders
    polled = [client.get(f"/api/v1/submissions/{sub_id}") for _ in range(20)]
    assert {(r.status_code, r.headers["content-type"]) for r in polled} == {(200, "application/json")}
    assert {r.json()["samples_done"] for r in polled} == {0} and keyed.renders == before + 1
    # The board's worker (another process) moves the row: the next check renders it again.
    with ctx.sessions() as session, session.begin():
        session.execute(update(Submission).where(Submission.id == sub_id).values(samples_done=3, updated_at=utcnow()))
    time.sleep(RECHECK_S + 0.1)
    deadline = time.monotonic() + 5  # served as it was while its row is checked, then as it is
    while (shown := client.get(f"/api/v1/submissions/{sub_id}").json())["samples_done"] != 3:
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)
    assert keyed.renders == before + 2
    # A cancel through this process shows on the very next request.
    cancelled = client.delete(f"/api/v1/submissions/{sub_id}", headers={"authorization": f"Bearer {secret}"})
    assert cancelled.status_code == 200
    assert client.get(f"/api/v1/submissions/{sub_id}").json()["state"] == "cancelled"
    assert client.get("/api/v1/submissions/424242").status_code == 404
