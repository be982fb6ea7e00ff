"""The board's API refuses bad input with a clear 4xx, and nothing is stored or run.

One real board process on loopback (SQLite) with a small upload cap. Each archive is built here as
``docker save`` would write it, then spoiled in one way.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from board_fixtures import (
    CONTRACT_LABELS,
    ISPM,
    BoardProcess,
    browser,
    synthetic_image,
    synthetic_save,
    tar_bytes,
)
from sqlalchemy import create_engine, text

from runner.board.errors import BoardError
from runner.board.serve import cancel_as_admin

__all__ = ["browser"]  # a fixture, imported for pytest
CAP = 64 * 1024


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    settings = {
        "board_id": "test-board-http",
        "judges": ["ref#1", "ref#2"],
        "candidates": ["openai/cand"],
        "max_upload_bytes": CAP,
        "open_submissions_per_token": 1,
    }
    with BoardProcess(tmp_path_factory.mktemp("board-http"), settings) as process:
        yield process


@pytest.fixture(scope="module")
def token(board: BoardProcess) -> str:
    return board.token("mallory")


def _post(board: BoardProcess, token: str | None, body: bytes, **params: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token is not None else {}
    query = {"name": "agent", "candidate": "openai/cand", **params}
    return httpx.post(board.url + "/api/v1/submissions", params=query, content=body, headers=headers, timeout=60)


def _nothing_stored(board: BoardProcess) -> None:
    assert httpx.get(board.url + "/api/v1/submissions/1", timeout=10).status_code == 404
    uploads = board.folder / "data" / "uploads"
    assert sorted(uploads.glob("*")) == []


GOOD = tar_bytes(synthetic_save(synthetic_image(CONTRACT_LABELS)))


@pytest.mark.parametrize(
    ("case", "body", "status", "message"),
    [
        (
            "not a tar",
            b"\x00not a tar at all" * 100,
            422,
            "not a docker save archive: not an uncompressed tar (invalid header)",
        ),
        (
            "no manifest",
            tar_bytes({"hello.txt": b"hi"}),
            422,
            "not a docker save archive: it has neither manifest.json nor index.json",
        ),
        (
            "two images",
            tar_bytes(synthetic_save(synthetic_image(CONTRACT_LABELS), synthetic_image(CONTRACT_LABELS, b"other"))),
            422,
            "the archive holds 2 images; submit exactly one",
        ),
        (
            "no label",
            tar_bytes(synthetic_save(synthetic_image({"other": "x"}))),
            422,
            'the image has no contract label: build it with LABEL ispm.agent.contract="ispm.agent/v1"',
        ),
        (
            "traversal",
            tar_bytes({**synthetic_save(synthetic_image(CONTRACT_LABELS)), "../../etc/cron.d/evil": b"x"}),
            422,
            "refused: the member name '../../etc/cron.d/evil' leaves the archive",
        ),
        (
            "absolute",
            tar_bytes({**synthetic_save(synthetic_image(CONTRACT_LABELS)), "/etc/passwd": b"x"}),
            422,
            "refused: the member name '/etc/passwd' leaves the archive",
        ),
        (
            "link out",
            tar_bytes(synthetic_save(synthetic_image(CONTRACT_LABELS)), links={"layers/evil": "../../etc/shadow"}),
            422,
            "refused: 'layers/evil' links outside the archive ('../../etc/shadow')",
        ),
        ("over the cap", GOOD + b"\x00" * CAP, 413, f"the upload is over the board's cap of {CAP} bytes"),
        ("empty", b"", 400, "the upload is empty: send the `docker save` stream of the agent image"),
    ],
)
def test_a_bad_archive_is_refused_before_anything_runs(
    board: BoardProcess, token: str, case: str, body: bytes, status: int, message: str
) -> None:
    response = _post(board, token, body)
    assert (response.status_code, response.json()) == (status, {"error": message}), case
    _nothing_stored(board)


def test_a_candidate_the_board_does_not_serve_is_refused(board: BoardProcess, token: str) -> None:
    response = _post(board, token, GOOD, candidate="openai/other")
    assert response.status_code == 400
    assert response.json() == {
        "error": "this board does not serve the candidate 'openai/other'; it serves ['openai/cand']"
    }
    _nothing_stored(board)


def test_a_link_that_is_not_http_is_refused(board: BoardProcess, token: str) -> None:
    response = _post(board, token, GOOD, link="javascript:alert(1)")
    assert (response.status_code, response.json()) == (
        422,
        {"error": "a link must be an http or https URL: 'javascript:alert(1)'"},
    )


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "no bearer token: send Authorization: Bearer $ISPM_BOARD_TOKEN"),
        ("ispm_not-a-token-of-this-board", "this token was not issued by this board"),
    ],
)
def test_a_bad_token_is_refused(board: BoardProcess, header: str | None, message: str) -> None:
    response = _post(board, header, GOOD)
    assert (response.status_code, response.json()) == (401, {"error": message})
    _nothing_stored(board)


def test_a_foreign_token_is_refused(board: BoardProcess, tmp_path: Path) -> None:
    other = BoardProcess(
        tmp_path / "other", {"board_id": "other", "judges": ["ref#1", "ref#2"], "candidates": ["openai/cand"]}
    )
    response = _post(board, other.token("alice"), GOOD)
    assert (response.status_code, response.json()) == (401, {"error": "this token was not issued by this board"})


def test_an_expired_token_is_refused(board: BoardProcess) -> None:
    expired = board.token("bob", "--valid-days", "1")
    engine = create_engine(f"sqlite:///{board.folder / 'data' / 'board.sqlite'}")
    with engine.begin() as db:
        db.execute(text("UPDATE tokens SET expires_at = '2026-01-01 00:00:00.000000' WHERE submitter = 'bob'"))
    engine.dispose()
    response = _post(board, expired, GOOD)
    assert response.status_code == 401
    assert response.json()["error"].startswith("this token expired at ")


def _store(board: BoardProcess, submitter: str, name: str, state: str) -> int:
    """A submission row written straight to the board's SQLite, held by a worker that is not there under a lease
    that never runs out (nothing runs it)."""
    engine = create_engine(f"sqlite:///{board.folder / 'data' / 'board.sqlite'}")
    try:
        with engine.begin() as db:
            (token_id,) = db.execute(text("SELECT id FROM tokens WHERE submitter = :s"), {"s": submitter}).one()
            db.execute(
                text(
                    "INSERT INTO submissions (token_id, display_name, candidate, links, state, upload_sha256,"
                    " upload_bytes, image_id, image_tag, samples_done, samples_planned, created_at, updated_at, worker,"
                    " lease_until)"
                    " VALUES (:t, :n, 'openai/cand', '[]', :s, '', 0, '', '', 0, 0, '2026-01-01', '2026-01-01',"
                    " 'elsewhere', '2999-01-01 00:00:00.000000')"
                ),
                {"t": token_id, "n": name, "s": state},
            )
            (row_id,) = db.execute(text("SELECT max(id) FROM submissions")).one()
            return int(row_id)
    finally:
        engine.dispose()


def test_a_token_at_its_open_limit_is_refused(board: BoardProcess) -> None:
    secret = board.token("carol")
    _store(board, "carol", "closed one", "cancelled")  # a closed submission does not count
    _store(board, "carol", "open one", "queued")
    response = _post(board, secret, GOOD)
    assert (response.status_code, response.json()) == (
        429,
        {"error": "this token already has 1 open submissions (limit 1)"},
    )


def test_an_open_submissions_status_page_refreshes_itself(board: BoardProcess) -> None:
    board.token("frank")
    open_id = _store(board, "frank", "still open", "queued")
    page = httpx.get(f"{board.url}/submissions/{open_id}", timeout=10).text
    assert '<meta http-equiv="refresh" content="5">' in page
    assert '<dd id="state">queued</dd>' in page
    closed_id = _store(board, "frank", "closed", "failed")
    assert "http-equiv" not in httpx.get(f"{board.url}/submissions/{closed_id}", timeout=10).text


def test_only_its_own_token_cancels_a_submission_until_it_is_being_published(board: BoardProcess) -> None:
    owner, other = board.token("grace"), board.token("heidi")
    queued = _store(board, "grace", "to cancel", "queued")
    running = _store(board, "grace", "running", "running")
    auditing = _store(board, "grace", "auditing", "auditing")
    url = f"{board.url}/api/v1/submissions"

    def delete(sub_id: int, token: str) -> httpx.Response:
        return httpx.delete(f"{url}/{sub_id}", headers={"authorization": f"Bearer {token}"}, timeout=10)

    refused = delete(queued, other)
    assert (refused.status_code, refused.json()) == (403, {"error": "this submission was made with another token"})
    for sub_id in (queued, running):
        done = delete(sub_id, owner)
        assert done.status_code == 200
        assert (done.json()["state"], done.json()["reason"]) == ("cancelled", "cancelled by the submitter")
    again = delete(queued, owner)
    assert (again.status_code, again.json()) == (
        409,
        {"error": f"submission {queued} is cancelled; only one not yet auditing can be cancelled"},
    )
    late = delete(auditing, owner)
    assert (late.status_code, late.json()) == (
        409,
        {"error": f"submission {auditing} is auditing; only one not yet auditing can be cancelled"},
    )


def test_the_admin_cancels_any_submission_with_a_reason(board: BoardProcess) -> None:
    board.token("ivan")
    running = _store(board, "ivan", "misbehaves", "running")
    done = subprocess.run(
        [ISPM, "board", "cancel", str(board.config), str(running), "--reason", "it mines coins"],
        capture_output=True, text=True, env=board.env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reason = "cancelled by the board's admin: it mines coins"
    assert done.stdout.strip() == f"submission {running}: cancelled ({reason})"
    shown = httpx.get(f"{board.url}/api/v1/submissions/{running}", timeout=10).json()
    assert (shown["state"], shown["reason"]) == ("cancelled", reason)
    with pytest.raises(BoardError) as refused:
        cancel_as_admin(board.config, running)
    assert (refused.value.status, str(refused.value)) == (
        409,
        f"submission {running} is cancelled; only one not yet auditing can be cancelled",
    )


def test_the_public_key_is_served_as_pem(board: BoardProcess) -> None:
    response = httpx.get(board.url + "/api/v1/key", timeout=10)
    assert response.status_code == 200
    assert response.text.startswith("-----BEGIN PUBLIC KEY-----\n")
    assert response.text == (board.folder / "data" / "board.pub").read_text()


def _text_now(browser: Any, element_id: str) -> str | None:
    """The element's text, or ``None`` while the page is being replaced by its own refresh."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.common.by import By

    try:
        return str(browser.find_element(By.ID, element_id).text)
    except (NoSuchElementException, StaleElementReferenceException):
        return None


@pytest.mark.browser
def test_the_status_page_refreshes_itself_in_chromium(board: BoardProcess, browser: Any) -> None:
    import time

    from selenium.webdriver.common.by import By

    board.token("judy")
    sub_id = _store(board, "judy", "watched", "queued")
    browser.get(f"{board.url}/submissions/{sub_id}")
    assert browser.find_element(By.ID, "state").text == "queued"
    engine = create_engine(f"sqlite:///{board.folder / 'data' / 'board.sqlite'}")
    with engine.begin() as db:
        db.execute(text("UPDATE submissions SET state = 'failed', reason = 'changed' WHERE id = :i"), {"i": sub_id})
    engine.dispose()
    deadline = time.monotonic() + 15
    while _text_now(browser, "state") != "failed":
        assert time.monotonic() < deadline, "the page did not refresh itself"
        time.sleep(0.25)
    assert browser.find_element(By.ID, "reason").text == "changed"


def test_what_a_load_killed_mid_way_left_is_swept_at_start_and_its_submission_failed(tmp_path: Path) -> None:
    import os
    import socket as sockets
    import time

    settings = {"board_id": "sweep", "judges": ["ref#1", "ref#2"], "candidates": ["openai/cand"], "lease_s": 2}
    process = BoardProcess(tmp_path / "sweep", {**settings, "heartbeat_s": 1})
    with process:
        secret = process.token("kim")
    dead = subprocess.Popen(["true"])
    dead.wait()
    uploads = process.folder / "data" / "uploads"
    host = sockets.gethostname()
    left = uploads / f"{host}-{dead.pid}-0123456789ab"
    live = uploads / f"{host}-{os.getpid()}-0123456789ab"  # this test's own process: alive, so not the board's
    for folder in (left, live):
        folder.mkdir(parents=True)
        (folder / ("ab" * 32)).write_bytes(b"half a layer")
    assert secret
    sub_id = _store(process, "kim", "interrupted", "received")
    engine = create_engine(f"sqlite:///{process.folder / 'data' / 'board.sqlite'}")
    with engine.begin() as db:  # held by the killed board's upload, its lease run out
        db.execute(
            text("UPDATE submissions SET lease_until = '2000-01-01 00:00:00.000000' WHERE id = :i"), {"i": sub_id}
        )
    engine.dispose()
    with process:
        assert not left.exists()
        assert live.is_dir()
        deadline = time.monotonic() + 30
        while (shown := httpx.get(f"{process.url}/api/v1/submissions/{sub_id}", timeout=10).json())[
            "state"
        ] != "failed":
            assert time.monotonic() < deadline, shown
            time.sleep(0.3)
    assert shown["reason"] == "the board stopped while this submission's image was loading: submit it again"


def test_a_path_with_a_trailing_slash_is_redirected_relative_whatever_the_host_header(board: BoardProcess) -> None:
    response = httpx.get(board.url + "/tasks/", headers={"host": "evil.example"}, timeout=10)
    assert (response.status_code, response.headers["location"]) == (308, "/tasks")
    response = httpx.get(board.url + "/leaderboard/", headers={"host": "evil.example"}, timeout=10)
    assert (response.status_code, response.headers["location"]) == (308, "/leaderboard")
    assert httpx.get(board.url + "/no-such-page/", timeout=10).status_code == 404
