"""The board serves a published run's sample pages beside its report, and nothing else under that path.

The board's own app (``create_app``) on a real SQLite database, asked through Starlette's test client; the run is
a real one (``report_runs.mixed``, written by ``start_run``), recorded as published in the database as the worker
would.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from report_runs import HOSTILE_SQL, mixed
from starlette.testclient import TestClient

from runner.board.app import create_app
from runner.board.config import BoardConfig
from runner.board.db import Submission, Token, utcnow
from runner.board.serve import open_board
from runner.record.build import load_record

__all__ = ["mixed"]  # a fixture, imported for pytest


@pytest.fixture(scope="module")
def client(mixed: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, str]]:
    config = BoardConfig(
        board_id="test-trace-board",
        data_dir=tmp_path_factory.mktemp("board"),
        judges=("ref#1", "ref#2"),
        candidates=["openai/cand"],
    )
    ctx = open_board(config)
    run_id = load_record(mixed).run_id
    now = utcnow()
    with ctx.sessions() as session, session.begin():
        token = Token(submitter="s", token_sha256="0" * 64, created_at=now, expires_at=None, open_limit=1)
        session.add(token)
        session.flush()
        for state, rid in (("published", run_id), ("running", "not-yet")):
            session.add(
                Submission(
                    token_id=token.id, display_name="x", candidate="openai/cand", links=[], state=state,
                    upload_sha256="0" * 64, upload_bytes=1, image_id="sha256:" + "0" * 64, image_tag="x:1",
                    run_id=rid, run_dir=str(mixed), created_at=now, updated_at=now,
                )
            )  # fmt: skip
    try:
        with TestClient(create_app(ctx), follow_redirects=False) as test_client:
            yield test_client, run_id
    finally:
        ctx.engine.dispose()


def test_the_run_report_moves_under_the_runs_own_path_so_its_relative_links_resolve(
    client: tuple[TestClient, str],
) -> None:
    http, run_id = client
    moved = http.get(f"/runs/{run_id}")
    assert (moved.status_code, moved.headers["location"]) == (308, f"/runs/{run_id}/")
    report = http.get(f"/runs/{run_id}/")
    assert report.status_code == 200 and 'href="samples/ispm-118.e1.html"' in report.text


def test_the_board_serves_a_published_sample_page_with_agent_text_escaped(client: tuple[TestClient, str]) -> None:
    http, run_id = client
    page = http.get(f"/runs/{run_id}/samples/ispm-118.e1.html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page.text and HOSTILE_SQL not in page.text


@pytest.mark.parametrize(
    "name",
    ["..%2Freport.html", "ispm-118.e1.html.tmp", "ispm-999.e1.html", ".ispm-118.e1.html", "..%2F..%2Fjournal.jsonl"],
)
def test_a_name_that_is_not_a_sample_page_of_the_run_is_refused(client: tuple[TestClient, str], name: str) -> None:
    http, run_id = client
    assert http.get(f"/runs/{run_id}/samples/{name}").status_code == 404


def test_an_unpublished_runs_sample_pages_are_not_served(client: tuple[TestClient, str]) -> None:
    http, _ = client
    assert http.get("/runs/not-yet/samples/ispm-118.e1.html").status_code == 404
