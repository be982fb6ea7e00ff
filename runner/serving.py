"""Limits for an HTTP server that faces hostile clients, shared by the gateway and the board (both uvicorn's h11).

- **Head size** (:func:`head_problem`): as ``http.server``, a request target over 64 KiB is a 414, and over 100
  header lines or 64 KiB of headers a 431. h11 bounds only the part of a head it has not yet parsed, so a head
  that arrives in one read is checked once the app is called.
- **Head time and body rate** (:func:`guarded_h11`): uvicorn has neither. A connection must deliver each request
  head within ``head_s`` of its first byte (of the connection's start, for the first request), and a body must
  keep ``min_body_bytes_per_s`` on average after a grace period. Past either the client gets a 408 and the
  connection is closed. Time the server itself stops reading (flow control: the app is busy) is not held against
  the client. Idle keep-alive connections are uvicorn's own ``timeout_keep_alive``.
- **Idle and crowding connections** (:func:`guarded_h11`): a new connection that sends no byte within
  ``first_byte_s`` is closed without an answer, and one client address holds at most ``per_address``
  connections at once (a connection past it is closed as it opens), except the addresses of trusted proxies,
  whose clients are counted by their forwarded address instead (:class:`ClientLimits`, requests under way).

uvicorn offers no public hook for any of these: the guard subclasses its ``H11Protocol`` and reads, besides the
asyncio transport, four of its attributes (``conn``, the h11 connection; ``flow.read_paused``;
``cycle.response_started``; ``loop``). Only the exact uvicorn pin keeps that sound: ``tests/test_serving.py``
proves the guard against the pinned version and fails, saying so, on any other.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, ClassVar, Final

import h11
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from runner import log

MAX_HEAD_BYTES: Final = 64 * 1024
"""All request headers together; Claude Code's heads are a few KiB."""
MAX_LINE_BYTES: Final = 64 * 1024
"""The request target, as ``http.server`` allows."""
MAX_HEADERS: Final = 100
"""Header lines, as ``http.server`` allows."""
OVER_CAP_LOG_S: Final = 10.0
"""A client address over its connection cap is logged at most once in this many seconds."""
TICK_S: Final = 0.5
"""How often a connection with a head or body under way checks its deadline."""

_log = log.get(__name__)


def head_problem(scope: Scope) -> tuple[int, str] | None:
    """As ``http.server``: a request target over 64 KiB is 414; over 100 headers, or a head over the limit, 431."""
    headers = scope["headers"]
    if len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") > MAX_LINE_BYTES:
        return 414, "the request target is too long"
    if len(headers) > MAX_HEADERS:
        return 431, "too many request headers"
    if sum(len(name) + len(value) for name, value in headers) > MAX_HEAD_BYTES:
        return 431, "the request headers are too large"
    return None


def timeout_reply(message: str) -> bytes:
    """A whole 408 response that closes the connection, JSON as the board's and the gateway's errors are."""
    body = json.dumps({"error": message}).encode()
    head = "HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return head.encode() + f"content-length: {len(body)}\r\n\r\n".encode() + body


class _GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request head, a minimum body rate, a deadline on a new
    connection's first byte, and a cap on the connections of one client address."""

    head_s: float = 10.0
    min_body_bytes_per_s: float = 1024.0
    body_grace_s: float = 10.0
    first_byte_s: float = 2.0
    per_address: int = 64
    trusted: frozenset[str] = frozenset()
    by_address: ClassVar[Counter[str]]
    """Open connections per client address, for every connection of one server (each server has its own class)."""
    over_cap_logged: ClassVar[dict[str, float]]
    """When each address last had a connection closed over the cap logged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_since: float | None = None
        self._body_since: float | None = None
        self._body_bytes = 0
        self._tick: Any = None
        self._opened = 0.0
        self._silent = True
        self._address: str | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else None
        if address is not None and address not in self.trusted:
            if self.by_address[address] >= self.per_address:
                now = time.monotonic()
                if now - self.over_cap_logged.get(address, -OVER_CAP_LOG_S) >= OVER_CAP_LOG_S:
                    if len(self.over_cap_logged) > 10_000:
                        self.over_cap_logged.clear()
                    self.over_cap_logged[address] = now  # a flood is one line per address per interval, not one each
                    _log.info("http.client_over_cap", client=address, cap=self.per_address)
                transport.close()  # past the cap: nothing is read from it, nothing answered
                return
            self.by_address[address] += 1
            self._address = address
        self._opened = self._head_since = time.monotonic()
        self._schedule()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        if self._address is not None:
            self.by_address[self._address] -= 1
            if self.by_address[self._address] <= 0:
                del self.by_address[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._silent = False
        waiting_head = self.conn.their_state is h11.IDLE
        if waiting_head and self._head_since is None:
            self._head_since = time.monotonic()  # the first byte of a keep-alive connection's next head
        if self.conn.their_state is h11.SEND_BODY:
            self._body_bytes += len(data)
        super().data_received(data)
        state = self.conn.their_state
        if state is not h11.IDLE:
            self._head_since = None
        if state is h11.SEND_BODY and self._body_since is None:
            self._body_since, self._body_bytes = time.monotonic(), 0
        elif state is not h11.SEND_BODY:
            self._body_since = None
        self._schedule()

    def _schedule(self) -> None:
        if self._tick is None and (self._head_since is not None or self._body_since is not None):
            self._tick = self.loop.call_later(TICK_S, self._check)

    def _check(self) -> None:
        self._tick = None
        if self.transport.is_closing():
            return
        now = time.monotonic()
        if self._silent and now - self._opened > self.first_byte_s:
            self.transport.close()  # never said a word: no answer is owed
            return
        if self.flow.read_paused:  # the server stopped reading: the client is not slow, restart its clocks
            self._head_since = now if self._head_since is not None else None
            self._body_since, self._body_bytes = (now, 0) if self._body_since is not None else (None, 0)
        elif self._head_since is not None and now - self._head_since > self.head_s:
            self._time_out(f"the request head did not arrive within {self.head_s:g} s")
            return
        elif self._body_since is not None:
            late = now - self._body_since - self.body_grace_s
            if late > 0 and self._body_bytes < self.min_body_bytes_per_s * late:
                self._time_out(f"the request body came slower than {self.min_body_bytes_per_s:g} bytes/s")
                return
        self._schedule()

    def _time_out(self, message: str) -> None:
        _log.info("http.slow_client", reason=message, client=str(self.client))
        waiting_head = self.conn.their_state is h11.IDLE
        if waiting_head or self.cycle is None or not self.cycle.response_started:
            self.transport.write(timeout_reply(message))  # else the app's own answer is already on its way
        self.transport.close()


def guarded_h11(
    *,
    head_s: float,
    min_body_bytes_per_s: float,
    body_grace_s: float,
    first_byte_s: float,
    per_address: int,
    trusted: frozenset[str] = frozenset(),
) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with these limits (``uvicorn.Config(http=...)``); connections from a
    ``trusted`` address (a proxy's) are not capped by address. One class per server: it counts its connections."""
    limits = {
        "head_s": head_s, "min_body_bytes_per_s": min_body_bytes_per_s, "body_grace_s": body_grace_s,
        "first_byte_s": first_byte_s, "per_address": per_address, "trusted": trusted, "by_address": Counter(),
        "over_cap_logged": {},
    }  # fmt: skip
    return type("GuardedH11", (_GuardedH11,), limits)


class ClientLimits:
    """At most ``max_requests`` requests under way per client address (the forwarded one, behind a trusted proxy:
    uvicorn's proxy headers set the scope's ``client``); past it a 429 that closes the connection."""

    def __init__(self, app: ASGIApp, *, max_requests: int) -> None:
        self.app = app
        self.max_requests = max_requests
        self.under_way: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client") if scope["type"] == "http" else None
        if not client:
            await self.app(scope, receive, send)
            return
        address = str(client[0])
        if self.under_way[address] >= self.max_requests:
            reply = JSONResponse(
                {"error": f"too many requests under way from {address} (at most {self.max_requests})"},
                status_code=429, headers={"connection": "close", "retry-after": "1"},
            )  # fmt: skip
            await reply(scope, receive, send)
            return
        self.under_way[address] += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.under_way[address] -= 1
            if self.under_way[address] <= 0:
                del self.under_way[address]
