"""Limits for an HTTP server that faces hostile clients, shared by the gateway and the board (both uvicorn's h11).

- **Head size** (:func:`head_problem`): as ``http.server``, a request target over 64 KiB is a 414, and over 100
  header lines or 64 KiB of headers a 431. h11 bounds only the part of a head it has not yet parsed, so a head
  that arrives in one read is checked once the app is called.
- **Head time and body rate** (:func:`guarded_h11`): uvicorn has neither. A connection must deliver each request
  head within ``head_s`` of its first byte (of the connection's start, for the first request), and a body must
  keep ``min_body_bytes_per_s`` on average after a grace period. Past either the client gets a 408 and the
  connection is closed. Time the server itself stops reading (flow control: the app is busy) is not held against
  the client. Idle keep-alive connections are uvicorn's own ``timeout_keep_alive``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import h11
from starlette.types import Scope
from uvicorn.protocols.http.h11_impl import H11Protocol

from runner import log

MAX_HEAD_BYTES: Final = 64 * 1024
"""All request headers together; Claude Code's heads are a few KiB."""
MAX_LINE_BYTES: Final = 64 * 1024
"""The request target, as ``http.server`` allows."""
MAX_HEADERS: Final = 100
"""Header lines, as ``http.server`` allows."""
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
    """uvicorn's h11 protocol with a deadline on each request head and a minimum body rate."""

    head_s: float = 10.0
    min_body_bytes_per_s: float = 1024.0
    body_grace_s: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_since: float | None = None
        self._body_since: float | None = None
        self._body_bytes = 0
        self._tick: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._head_since = time.monotonic()
        self._schedule()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._tick is not None:
            self._tick.cancel()
            self._tick = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
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


def guarded_h11(*, head_s: float, min_body_bytes_per_s: float, body_grace_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with these limits (``uvicorn.Config(http=...)``)."""
    return type(
        "GuardedH11",
        (_GuardedH11,),
        {"head_s": head_s, "min_body_bytes_per_s": min_body_bytes_per_s, "body_grace_s": body_grace_s},
    )
