"""Where the gateway listens: uvicorn servers on Unix sockets and loopback TCP, on one uvloop event loop thread.

Each listener is its own ``uvicorn.Server`` over a socket we bind ourselves (so a Unix socket gets its mode,
and a bound port is known at once), all on one asyncio loop in a daemon thread. A listener may be bound to one
sample: its ASGI scope then names that sample, and the app accepts only that sample's token there.

uvicorn runs its ``h11`` protocol, whose framing is strict (one valid ``Content-Length`` or chunked coding, a
``Host`` header); the limits on the request head are checked before the app runs, and the app refuses large
bodies itself. Keep-alive connections stay open for :data:`KEEP_ALIVE_S`, as agents reuse one connection for
their whole run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
import uvloop
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from runner import log
from runner.serving import MAX_HEAD_BYTES, head_problem

_log = log.get(__name__)

KEEP_ALIVE_S = 300
"""An idle keep-alive connection is closed after this."""
BACKLOG = 128  # a burst of agent connections must not be refused (EAGAIN on Unix sockets)
_STOP_TIMEOUT_S = 10.0

T = TypeVar("T")


class _UpgradeNotices(logging.Filter):
    """Drops uvicorn's notices about a WebSocket upgrade it passes to the app as a plain request (``ws="none"``):
    the app refuses and logs it itself, and "install a WebSocket library" is not the advice here."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not message.startswith(("Unsupported upgrade request", "No supported WebSocket library"))


logging.getLogger("uvicorn.error").addFilter(_UpgradeNotices())


class _Bound:
    """The app, with the listener's sample in every request's scope, behind the limits on the request head.

    h11 bounds only the part of a head it has not yet parsed, so a head that arrives in one read is checked here.
    """

    def __init__(self, app: ASGIApp, sample_id: str | None, key: str) -> None:
        self.app, self.sample_id, self.key = app, sample_id, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = head_problem(scope)
            if problem is not None:
                status, message = problem
                await JSONResponse(
                    {"error": {"message": message, "type": "invalid_request_error", "code": None, "param": None}},
                    status_code=status,
                    headers={"connection": "close", "x-should-retry": "false"},
                )(scope, receive, send)
                return
        scope[self.key] = self.sample_id
        await self.app(scope, receive, send)


class Listener:
    """One serving socket."""

    def __init__(
        self,
        server: uvicorn.Server,
        done: concurrent.futures.Future[None],
        sample_id: str | None,
        address: str,
        unix_path: Path | None,
    ) -> None:
        self.server, self.done, self.sample_id = server, done, sample_id
        self.address, self.unix_path = address, unix_path

    def stop(self) -> None:
        """Ask the server to stop (it closes its socket within a tick) and remove a Unix socket file now."""
        self.server.should_exit = True
        if self.unix_path is not None:
            self.unix_path.unlink(missing_ok=True)


class EventLoopThread:
    """An asyncio loop in a daemon thread, and the uvicorn servers on it.

    The loop is uvloop's (libuv), as uvicorn's own default where it is installed: ``bench/gateway.py`` measured a
    third less gateway CPU per stream event than asyncio's pure-Python loop (docs/gateway.md, Speed).
    """

    def __init__(self) -> None:
        self.loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="gateway-loop", daemon=True)
        self._thread.start()
        self._listeners: list[Listener] = []
        self._stopping: list[Listener] = []  # bound listeners asked to stop, not yet waited for
        self._lock = threading.Lock()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = _STOP_TIMEOUT_S) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def serve(
        self, app: ASGIApp, sock: socket.socket, *, sample_id: str | None, bound_key: str, unix_path: Path | None = None
    ) -> Listener:
        """Serve ``app`` on the bound, listening ``sock``."""
        config = uvicorn.Config(
            _Bound(app, sample_id, bound_key),
            http="h11",
            # A WebSocket upgrade arrives as a plain request, which the app refuses in its API's shape (426):
            # with a WebSocket library installed, uvicorn would answer a bare 403 instead, and Codex retries that.
            ws="none",
            lifespan="off",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            date_header=False,
            timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=2,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            backlog=BACKLOG,
        )
        server = uvicorn.Server(config)
        done = asyncio.run_coroutine_threadsafe(server.serve(sockets=[sock]), self.loop)
        address = str(unix_path) if unix_path is not None else "{}:{}".format(*sock.getsockname()[:2])
        listener = Listener(server, done, sample_id, address, unix_path)
        with self._lock:
            self._listeners.append(listener)
        _log.info("gateway_listening", address=address, sample=sample_id)
        return listener

    def stop_bound(self, sample_id: str) -> None:
        """Stop the listeners bound to ``sample_id`` without waiting for them (:meth:`close_listeners` does)."""
        with self._lock:
            bound = [x for x in self._listeners if x.sample_id == sample_id]
            self._listeners = [x for x in self._listeners if x.sample_id != sample_id]
            # Finished servers are forgotten here, so a long run does not keep one entry per sample.
            self._stopping = [x for x in self._stopping if not x.done.done()] + bound
        for listener in bound:
            listener.stop()

    def close_listeners(self) -> None:
        """Stop every listener and wait for all of them, those stopped earlier included."""
        with self._lock:
            listeners, self._listeners = self._listeners, []
            stopping, self._stopping = self._stopping, []
        for listener in listeners:
            listener.stop()
        for listener in listeners + stopping:
            try:
                listener.done.result(_STOP_TIMEOUT_S)
            except Exception:  # a server that failed to stop cleanly must not stop the others
                _log.warning("gateway_listener_stop_failed", address=listener.address, exc_info=True)

    def stop(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self.loop.close()
