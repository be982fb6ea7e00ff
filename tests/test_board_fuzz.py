"""Every route of the board answers bad input with a 4xx, never a 5xx, and logs no traceback.

The board's real app (Starlette, in process over ASGI) on a real SQLite database with one token,
fuzzed with Hypothesis: any route, any method it takes, path parameters of any text or size (huge ids included),
odd query strings, tokens and bodies. A bounded number of examples keeps it to a few seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from board_fixtures import board_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Route
from starlette.testclient import TestClient

from runner.board.app import create_app
from runner.board.db import Submission, utcnow
from runner.board.tokens import create_token

RUN_ID = "20261201T000000Z-abcdef"
TEXT = st.text(st.characters(codec="utf-8"), max_size=60)
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TestClient, list[Route], str]]:
    folder = tmp_path_factory.mktemp("board-fuzz")
    ctx = board_in_process(folder, candidates=["openai/cand"])
    with ctx.sessions() as session:
        secret = create_token(session, "fuzzer", open_limit=2)
    # A published run whose files are gone from the data folder: its pages and downloads must still be a 4xx.
    (folder / "gone").mkdir()
    now = utcnow()
    with ctx.sessions() as session, session.begin():
        gone = Submission(
            token_id=1, display_name="published", candidate="openai/cand", links=[], state="published",
            upload_sha256="0" * 64, upload_bytes=0, image_id="", image_tag="", worker=None, run_id=RUN_ID,
            run_dir=str(folder / "gone"), samples_done=1, samples_planned=1, created_at=now, updated_at=now,
            published_at=now,
        )  # fmt: skip
        session.add(gone)
    app = create_app(ctx)
    routes = [r for r in app.routes if isinstance(r, Route)]
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client, routes, secret
    ctx.engine.dispose()


class _Kept(logging.Handler):
    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.WARNING)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def logged() -> Iterator[list[logging.LogRecord]]:
    """Every record at WARNING or above that any logger emits while a test of this module runs."""
    records: list[logging.LogRecord] = []
    handler = _Kept(records)
    logging.getLogger().addHandler(handler)
    try:
        yield records
    finally:
        logging.getLogger().removeHandler(handler)


def _fill(path: str, draw: Any) -> str:
    """``path`` with each ``{param}`` replaced: ids by any non-negative integer (often a real one), run ids and
    downloads often by real ones, other parts by any text."""
    while "{" in path:
        start, end = path.index("{"), path.index("}")
        param = path[start + 1 : end]
        if param.endswith(":int"):
            value = str(draw(st.one_of(st.integers(1, 3), st.integers(min_value=0, max_value=10**40))))
        elif param == "run_id":
            value = quote(draw(st.one_of(st.just(RUN_ID), TEXT.filter(bool))), safe="")
        elif param.startswith("what"):
            value = quote(draw(st.one_of(st.sampled_from(["bundle", "statement", "signature"]), TEXT.filter(bool))))
        else:
            value = quote(draw(TEXT.filter(bool)), safe="")
        path = path[:start] + value + path[end + 1 :]
    return path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_route_answers_bad_input_with_a_5xx_or_logs_a_traceback(
    served: tuple[TestClient, list[Route], str], data: st.DataObject, logged: list[logging.LogRecord]
) -> None:
    client, routes, secret = served
    route = data.draw(st.sampled_from(routes))
    method = data.draw(st.sampled_from(sorted(route.methods or {"GET"})))
    path = _fill(route.path, data.draw)
    query = data.draw(st.lists(st.tuples(st.sampled_from(["name", "candidate", "link", "x"]), TEXT), max_size=4))
    authorization = data.draw(
        st.one_of(st.none(), st.just(f"Bearer {secret}"), HEADER_TEXT.map(lambda t: "Bearer " + t))
    )
    body = data.draw(st.binary(max_size=2048))
    headers = {"authorization": authorization} if authorization is not None else {}
    logged.clear()
    response = client.request(method, path, params=query, headers=headers, content=body)
    assert response.status_code < 500, (method, path, query, response.text[:300])
    assert not [r for r in logged if r.exc_info or "Traceback" in r.getMessage()]


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/api/v1/submissions/99999999999999999999999", "no submission 99999999999999999999999"),
        ("/submissions/99999999999999999999999", "no submission 99999999999999999999999"),
        ("/api/v1/submissions/2147483648", "no submission 2147483648"),
    ],
)
def test_an_id_past_the_databases_range_is_a_404(
    served: tuple[TestClient, list[Route], str], path: str, error: str
) -> None:
    client, _, _ = served
    response = client.get(path)
    assert (response.status_code, response.json()) == (404, {"error": error})


def test_deleting_a_huge_id_is_a_404(served: tuple[TestClient, list[Route], str]) -> None:
    client, _, secret = served
    response = client.delete(
        "/api/v1/submissions/99999999999999999999999", headers={"authorization": f"Bearer {secret}"}
    )
    assert (response.status_code, response.json()) == (404, {"error": "no submission 99999999999999999999999"})


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("agent\x00", "U+0000 (a control character)"),
        ("\x1b[31mred", "U+001B (a control character)"),
        ("two\r\nlines", "U+000D (a control character)"),
        ("abc\u202edcb", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
        ("iso\u2066late", "U+2066 (LEFT-TO-RIGHT ISOLATE)"),
        ("zero\u200bwidth", "U+200B (ZERO WIDTH SPACE)"),
        ("para\u2029graph", "U+2029 (PARAGRAPH SEPARATOR)"),
    ],
)
def test_a_name_with_a_control_or_bidi_character_is_a_422_naming_it(
    served: tuple[TestClient, list[Route], str], name: str, named: str
) -> None:
    client, _, secret = served
    response = client.post(
        "/api/v1/submissions",
        params={"name": name, "candidate": "openai/cand"},
        headers={"authorization": f"Bearer {secret}"},
        content=b"never read",
    )
    assert (response.status_code, response.json()) == (
        422,
        {"error": f"name: {named} is not allowed: no control, bidi or separator characters"},
    )


def test_a_plain_name_in_any_script_is_taken_past_the_name_check(served: tuple[TestClient, list[Route], str]) -> None:
    client, _, secret = served
    response = client.post(
        "/api/v1/submissions",
        params={"name": "Agent Ω — 代理 (v2)", "candidate": "openai/cand"},
        headers={"authorization": f"Bearer {secret}"},
        content=b"not a tar",
    )
    assert response.status_code == 422
    assert response.json()["error"].startswith("not a docker save archive")


@pytest.mark.parametrize(
    ("path", "status", "error"),
    [
        (f"/runs/{RUN_ID}", 404, {"error": "report.html is not on this board"}),
        (f"/runs/{RUN_ID}/bundle", 404, {"error": f"{RUN_ID}.tar.gz is not on this board"}),
        ("/runs/-rf", 404, {"error": "no published run '-rf'"}),
    ],
)
def test_a_published_run_whose_files_are_gone_is_a_404(
    served: tuple[TestClient, list[Route], str], path: str, status: int, error: dict[str, str]
) -> None:
    client, _, _ = served
    response = client.get(path)
    assert (response.status_code, response.json()) == (status, error)


def test_the_leaderboard_still_answers_when_a_published_record_is_gone(
    served: tuple[TestClient, list[Route], str],
) -> None:
    client, _, _ = served
    assert client.get("/leaderboard").status_code == 200
