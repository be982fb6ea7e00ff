"""The slow-client and crowd guard of ``runner.serving`` on the pinned uvicorn, proved against a real server.

uvicorn has no public hook for a head deadline, a body rate, a first-byte deadline or a per-address cap, so the
guard subclasses its private ``H11Protocol``. The first test fails, naming why, as soon as uvicorn is not the
pinned version; the others prove each limit on a real uvicorn server on loopback, played against by raw sockets.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from board_fixtures import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from runner.serving import ClientLimits, guarded_h11

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
HEAD_S, FIRST_BYTE_S, PER_ADDRESS = 1.5, 1.0, 3
PROXY = "127.0.0.3"


def test_uvicorn_is_the_version_the_guard_was_proved_on() -> None:
    pinned = re.search(r'"uvicorn==([^"]+)"', PYPROJECT.read_text(encoding="utf-8"))
    assert pinned is not None, "pyproject.toml no longer pins uvicorn exactly"
    assert uvicorn.__version__ == pinned.group(1), (
        f"uvicorn is {uvicorn.__version__}, not the pinned {pinned.group(1)}: runner/serving.py subclasses uvicorn's "
        "private H11Protocol (conn, flow.read_paused, cycle.response_started, loop); read uvicorn's h11_impl.py "
        "for those, run tests/test_serving.py, then move the pin"
    )


def _app() -> Any:
    release = asyncio.Event()

    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse("hello")

    async def upload(request: Request) -> PlainTextResponse:
        size = sum([len(chunk) async for chunk in request.stream()])
        return PlainTextResponse(str(size))

    async def hold(request: Request) -> PlainTextResponse:
        await asyncio.wait_for(release.wait(), timeout=5)
        return PlainTextResponse("held")

    app = Starlette(routes=[Route("/", hello), Route("/upload", upload, methods=["POST"]), Route("/hold", hold)])
    return ClientLimits(app, max_requests=2)


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    port = free_port()
    protocol = guarded_h11(
        head_s=HEAD_S, min_body_bytes_per_s=1024, body_grace_s=1, first_byte_s=FIRST_BYTE_S,
        per_address=PER_ADDRESS, trusted=frozenset({PROXY}),
    )  # fmt: skip
    config = uvicorn.Config(
        _app(), host="127.0.0.1", port=port, http=protocol, lifespan="off", log_level="warning",
        proxy_headers=True, forwarded_allow_ips=[PROXY],
    )  # fmt: skip
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not served.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield port
    finally:
        served.should_exit = True
        thread.join(timeout=10)


def _connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(10)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def _answer(sock: socket.socket) -> bytes:
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:
        pass
    return received


def _get(port: int, path: str = "/", source: str = "127.0.0.1", headers: str = "") -> bytes:
    with _connect(port, source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n{headers}\r\n".encode())
        return _answer(sock)


def test_a_late_head_is_a_408_and_a_trickling_body_too(server: int) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: t")
        head = _answer(sock).split(b"\r\n\r\n")
    assert head[0].split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout"
    assert json.loads(head[1]) == {"error": f"the request head did not arrive within {HEAD_S:g} s"}
    with _connect(server) as sock:
        sock.sendall(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
        sock.settimeout(0.5)
        answer, deadline = b"", time.monotonic() + 10
        while time.monotonic() < deadline and not answer:
            try:
                sock.sendall(b"x")
                answer = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"the request body came slower than 1024 bytes/s" in answer


def test_a_connection_that_sends_nothing_is_closed_unanswered_at_the_first_byte_deadline(server: int) -> None:
    with _connect(server) as sock:
        started = time.monotonic()
        assert _answer(sock) == b""
        waited = time.monotonic() - started
    assert FIRST_BYTE_S <= waited < FIRST_BYTE_S + 2


def test_one_address_holds_at_most_its_cap_of_connections_and_others_are_served(server: int) -> None:
    held = [_connect(server, "127.0.0.2") for _ in range(PER_ADDRESS)]
    try:
        time.sleep(0.2)
        with _connect(server, "127.0.0.2") as extra:
            assert _answer(extra) == b""  # closed as it opened
        assert _get(server).endswith(b"hello")  # another address is served meanwhile
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert _get(server, source="127.0.0.2").endswith(b"hello")  # the address's own slots came back


def test_a_trusted_proxy_is_not_capped_by_address_but_its_clients_are_by_their_forwarded_address(
    server: int,
) -> None:
    held = [_connect(server, PROXY) for _ in range(PER_ADDRESS + 2)]
    try:
        for sock in held[:3]:
            sock.sendall(b"GET /hold HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n")
        time.sleep(0.5)
        third = _answer(held[2]).split(b"\r\n")[0]
        assert third == b"HTTP/1.1 429 Too Many Requests"
        last = held[-1]  # past the per-address cap, yet a proxy's: served
        last.sendall(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Forwarded-For: 198.51.100.8\r\n\r\n")
        assert _answer(last).endswith(b"hello")
    finally:
        for sock in held:
            sock.close()
