"""Slow and vanishing clients get bounded answers: a late head or a trickling body is a 408 and a closed
connection, a client that goes away mid-upload is one INFO line, and the board keeps answering meanwhile.

A real board process on loopback with short limits (a 1 s first-byte deadline, a 2 s head deadline, 1 KiB/s
after a 1 s grace), and raw sockets playing the clients.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from board_fixtures import BoardProcess

HEAD_S = 2.0
FIRST_BYTE_S = 1.0


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    yield from _board(tmp_path_factory)


@pytest.fixture
def quiet_board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    """A board of the test's own, for counting log lines: on the module's, an upload an earlier test timed out is
    logged as gone when the board next wakes for another request."""
    yield from _board(tmp_path_factory)


def _board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BoardProcess]:
    folder = tmp_path_factory.mktemp("board-slow")
    settings = {
        "board_id": "slow",
        "judges": ["ref#1", "ref#2"],
        "candidates": ["openai/cand"],
        "head_timeout_s": HEAD_S,
        "min_body_bytes_per_s": 1024,
        "body_grace_s": 1,
        "first_byte_timeout_s": FIRST_BYTE_S,
        "open_submissions_per_token": 100,  # uploads under way count: 25 slow ones on one token are let in
    }
    with BoardProcess(folder, settings, env={"ISPM_LOG_FILE": str(folder / "ispm.jsonl")}) as process:
        yield process


@pytest.fixture(scope="module")
def token(board: BoardProcess) -> str:
    return board.token("slowpoke")


def _connect(board: BoardProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", board.port), timeout=10)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _upload_head(token: str, length: int) -> bytes:
    return (
        f"POST /api/v1/submissions?name=slow&candidate=openai/cand HTTP/1.1\r\nHost: board\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def _events(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def test_a_head_that_does_not_arrive_in_time_is_a_408_and_the_connection_closes(board: BoardProcess) -> None:
    started = time.monotonic()  # before connecting: the board's clock starts when it accepts
    with _connect(board) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: bo")
        answer = _answer(sock)
        waited = time.monotonic() - started
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(body) == {"error": f"the request head did not arrive within {HEAD_S:g} s"}
    assert HEAD_S <= waited < HEAD_S + 5


def test_a_connection_that_sends_nothing_is_closed_unanswered_within_the_first_byte_deadline(
    board: BoardProcess,
) -> None:
    started = time.monotonic()  # before connecting: the board's clock starts when it accepts
    with _connect(board) as sock:
        answer = _answer(sock)
        waited = time.monotonic() - started
    assert answer == b""
    assert FIRST_BYTE_S <= waited < FIRST_BYTE_S + 3


def test_a_trickling_body_is_a_408_and_the_connection_closes(board: BoardProcess, token: str) -> None:
    with _connect(board) as sock:
        sock.sendall(_upload_head(token, 1_000_000))
        sock.settimeout(0.5)
        answer = b""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                sock.sendall(b"x" * 10)
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(body) == {"error": "the request body came slower than 1024 bytes/s"}


def test_a_client_that_goes_away_mid_upload_is_one_info_line_and_no_traceback(quiet_board: BoardProcess) -> None:
    board, token = quiet_board, quiet_board.token("vanishing")
    log = board.folder / "ispm.jsonl"
    before = len(_events(log)) if log.exists() else 0
    with _connect(board) as sock:
        sock.sendall(_upload_head(token, 1_000_000) + b"x" * 50_000)
        time.sleep(0.5)
    deadline = time.monotonic() + 10
    while not [e for e in _events(log)[before:] if e["event"] == "board.client_disconnected"]:
        assert time.monotonic() < deadline, "no board.client_disconnected line"
        time.sleep(0.2)
    time.sleep(0.5)  # a second line for the same client would come right after the first
    gone = [e for e in _events(log)[before:] if e["event"] == "board.client_disconnected"]
    assert [(e["level"], e["path"]) for e in gone] == [("info", "/api/v1/submissions")]
    assert "Traceback" not in log.read_text() + board.log.read_text()


def test_the_leaderboard_answers_in_under_a_second_while_50_slow_clients_hang_on(
    board: BoardProcess, token: str
) -> None:
    slow = [_connect(board) for _ in range(50)]
    try:
        for n, sock in enumerate(slow):
            sock.sendall(b"GET / HTTP/1.1\r\nHo" if n % 2 else _upload_head(token, 1_000_000) + b"x")
        with httpx.Client(base_url=board.url, timeout=10) as client:
            waits = []
            for _ in range(5):
                started = time.monotonic()
                assert client.get("/leaderboard").status_code == 200
                waits.append(time.monotonic() - started)
                time.sleep(0.2)
        assert max(waits) < 1.0, waits
        for sock in slow:
            sock.settimeout(15)
            assert _answer(sock).startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    finally:
        for sock in slow:
            sock.close()


def test_a_head_with_too_many_header_lines_is_a_431_as_at_the_gateway(board: BoardProcess) -> None:
    with _connect(board) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: board\r\n" + b"X: y\r\n" * 101 + b"\r\n")
        answer = _answer(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 431 Request Header Fields Too Large"
    assert json.loads(body) == {"error": "too many request headers"}
