"""The gateway's HTTP on a raw socket: framing (pipelining, HTTP/1.0, 100-continue, chunked bodies), malformed
requests, half-sent requests and bodies that stop arriving; each refused clearly, the gateway carrying on."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from gateway_stage import CHAT, staged

from runner.gateway.server import Gateway


def raw_exchange(address: tuple[str, int], data: bytes, *, wait: float = 2.0) -> bytes:
    """Send ``data`` on a fresh TCP connection and read until the gateway closes it (or ``wait`` passes)."""
    with socket.create_connection(address, timeout=wait) as sock:
        sock.sendall(data)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except TimeoutError:
            pass
    return received


def request_bytes(token: str, body: bytes = b"", *, version: str = "HTTP/1.1", extra: str = "") -> bytes:
    head = f"POST /v1/chat/completions {version}\r\nHost: g\r\nAuthorization: Bearer {token}\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


BODY = json.dumps(CHAT).encode()


@dataclass(frozen=True)
class RawGateway:
    """A gateway's TCP address for raw exchanges, and a way to a fresh sample's token."""

    gateway: Gateway
    """The gateway."""
    address: tuple[str, int]
    """Its TCP listener."""


@pytest.fixture(scope="module")
def raw() -> Iterator[RawGateway]:
    with staged() as stage:
        yield RawGateway(stage.gateway, stage.gateway.listen_tcp())


@dataclass(frozen=True)
class Framing:
    """Raw HTTP exchanges: pipelined, HTTP/1.0, ``Expect: 100-continue`` and a chunked body."""

    pipelined: bytes
    """Two pipelined requests on one connection, the second asking to close."""
    http_1_0: bytes
    """An HTTP/1.0 request without keep-alive."""
    continued: tuple[bytes, bytes]
    """The reply to a head asking ``Expect: 100-continue``, then to its body."""
    chunked: bytes
    """A chunked request's reply."""
    requests: int
    """The sample's request count after all."""


@pytest.fixture(scope="module")
def framing(raw: RawGateway) -> Framing:
    token = raw.gateway.issue_token("raw")
    pipelined = raw_exchange(
        raw.address, request_bytes(token, BODY) + request_bytes(token, BODY, extra="Connection: close\r\n")
    )
    http_1_0 = raw_exchange(raw.address, request_bytes(token, BODY, version="HTTP/1.0"))
    with socket.create_connection(raw.address, timeout=2) as sock:
        head = request_bytes(token, BODY, extra="Expect: 100-continue\r\n").split(b"\r\n\r\n")[0] + b"\r\n\r\n"
        sock.sendall(head)
        interim = sock.recv(65536)
        sock.sendall(BODY)
        continued = (interim, sock.recv(65536))
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n" % token.encode()
    chunked += b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(BODY), BODY)
    return Framing(
        pipelined, http_1_0, continued, raw_exchange(raw.address, chunked), raw.gateway.usage("raw").requests
    )


def test_two_pipelined_requests_get_two_whole_replies(framing: Framing) -> None:
    assert (framing.pipelined.count(b"HTTP/1.1 200 OK\r\n"), framing.pipelined.rstrip()[-1:]) == (2, b"}")


def test_a_request_asking_to_close_gets_a_reply_saying_so(framing: Framing) -> None:
    assert b"connection: close" in framing.pipelined.split(b"HTTP/1.1 200 OK")[2].lower()


def test_an_http_1_0_request_is_answered(framing: Framing) -> None:
    assert framing.http_1_0.startswith(b"HTTP/1.1 200 OK")


def test_expect_100_continue_is_answered_before_the_body_is_sent(framing: Framing) -> None:
    assert framing.continued[0] == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_the_body_sent_after_100_continue_is_answered(framing: Framing) -> None:
    assert framing.continued[1].startswith(b"HTTP/1.1 200 OK")


def test_a_chunked_body_is_read(framing: Framing) -> None:
    assert framing.chunked.startswith(b"HTTP/1.1 200 OK")


def test_every_framed_request_is_counted(framing: Framing) -> None:
    assert framing.requests == 5


AUTH = b"Host: g\r\nAuthorization: Bearer %s\r\n"
MALFORMED = [
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        400,
        b"Invalid HTTP request",
        id="two-lengths",
    ),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\n" + AUTH + b"Content-Length: 99999999999\r\n\r\n",
        413,
        b"too large",
        id="huge-length",
    ),
    pytest.param(b"GARBAGE\r\n\r\n", 400, b"Invalid HTTP request", id="garbage"),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nno colon here\r\n\r\n",
        400,
        b"Invalid HTTP request",
        id="header-without-colon",
    ),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length : 2\r\n\r\n{}",
        400,
        b"Invalid HTTP request",
        id="space-before-colon",
    ),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, b"Invalid HTTP request", id="no-host"
    ),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
        431,
        b"too large",
        id="huge-header",
    ),
    pytest.param(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\n" + b"X: y\r\n" * 101 + b"\r\n",
        431,
        b"too many",
        id="many-headers",
    ),
    pytest.param(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: g\r\n\r\n", 414, b"too long", id="long-target"),
    pytest.param(
        b"DELETE /v1/chat/completions HTTP/1.1\r\nHost: g\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
        405,
        b"POST /v1/messages",
        id="delete",
    ),
]


def _malformed_reply(raw: RawGateway, data: bytes) -> bytes:
    token = raw.gateway.issue_token(f"m-{time.monotonic_ns()}")
    return raw_exchange(raw.address, data.replace(b"%s", token.encode()))


@pytest.mark.parametrize(("data", "status", "says"), MALFORMED)
def test_malformed_requests_get_their_status(raw: RawGateway, data: bytes, status: int, says: bytes) -> None:
    assert _malformed_reply(raw, data).startswith(f"HTTP/1.1 {status} ".encode())


@pytest.mark.parametrize(("data", "status", "says"), MALFORMED)
def test_malformed_requests_are_told_what_is_wrong(raw: RawGateway, data: bytes, status: int, says: bytes) -> None:
    assert says in _malformed_reply(raw, data).partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize(("data", "status", "says"), MALFORMED)
def test_the_gateway_answers_after_a_malformed_request(raw: RawGateway, data: bytes, status: int, says: bytes) -> None:
    token = raw.gateway.issue_token(f"after-{time.monotonic_ns()}")
    _malformed_reply(raw, data)
    reply = raw_exchange(raw.address, request_bytes(token, BODY, extra="Connection: close\r\n"))
    assert reply.startswith(b"HTTP/1.1 200 OK")


HALF_SENT = request_bytes("%s", b'{"messages": []}')[:-5]


def test_a_half_sent_request_gets_no_reply(raw: RawGateway) -> None:
    token = raw.gateway.issue_token("half-wait")
    assert raw_exchange(raw.address, HALF_SENT.replace(b"%s", token.encode()), wait=0.3) == b""


def test_a_request_abandoned_mid_body_is_closed_without_a_reply(raw: RawGateway) -> None:
    token = raw.gateway.issue_token("half-gone")
    with socket.create_connection(raw.address, timeout=2) as sock:
        sock.sendall(HALF_SENT.replace(b"%s", token.encode()))
        sock.shutdown(socket.SHUT_WR)  # the client gives up mid-body
        assert sock.recv(65536) == b""


def test_a_half_sent_request_costs_nothing(raw: RawGateway) -> None:
    token = raw.gateway.issue_token("half-cost")
    raw_exchange(raw.address, HALF_SENT.replace(b"%s", token.encode()), wait=0.3)
    assert raw.gateway.usage("half-cost").requests == 0


def test_the_gateway_is_healthy_after_half_sent_requests(raw: RawGateway) -> None:
    token = raw.gateway.issue_token("half-health")
    raw_exchange(raw.address, HALF_SENT.replace(b"%s", token.encode()), wait=0.3)
    health = raw_exchange(raw.address, b"GET /healthz HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n")
    assert health.endswith(b'{"ok":true}')


@dataclass(frozen=True)
class SlowBody:
    """A body that stops arriving, against a 0.5 s limit; then a whole request."""

    reply: bytes
    """The gateway's reply to the slow body."""
    waited: float
    """Seconds until that reply."""
    requests: int
    """The sample's request count after it."""
    next_reply: bytes
    """The reply to a whole request after."""


@pytest.fixture(scope="module")
def slow_body() -> SlowBody:
    with staged(body_read_s=0.5) as stage:
        address = stage.gateway.listen_tcp()
        token = stage.gateway.issue_token("slow")
        started = time.monotonic()
        reply = raw_exchange(address, HALF_SENT.replace(b"%s", token.encode()), wait=5)
        waited = time.monotonic() - started
        requests = stage.gateway.usage("slow").requests
        after = raw_exchange(address, request_bytes(token, BODY, extra="Connection: close\r\n"))
        return SlowBody(reply, waited, requests, after)


def test_a_body_still_arriving_after_the_time_limit_gets_408(slow_body: SlowBody) -> None:
    assert slow_body.reply.startswith(b"HTTP/1.1 408 ")


def test_a_408_closes_the_connection(slow_body: SlowBody) -> None:
    assert b"connection: close" in slow_body.reply.lower()


def test_a_408_says_the_limit(slow_body: SlowBody) -> None:
    assert b"did not arrive within 0.5 s" in slow_body.reply


def test_a_408_comes_no_sooner_than_its_limit(slow_body: SlowBody) -> None:
    assert slow_body.waited >= 0.5


def test_a_body_that_timed_out_costs_nothing(slow_body: SlowBody) -> None:
    assert slow_body.requests == 0


def test_the_gateway_answers_after_a_408(slow_body: SlowBody) -> None:
    assert slow_body.next_reply[:15] == b"HTTP/1.1 200 OK"
