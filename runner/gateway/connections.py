"""Keep-alive connections to one provider origin, on the standard library's :mod:`http.client`.

``http.client`` writes requests and parses responses (status line, headers, ``Content-Length``, chunked
transfer coding, interim ``100 Continue``, ``Connection: close``) and ``ssl`` does TLS with certificate and
hostname verification. This module only pools: one request per connection at a time, an idle connection
reused unless the server closed it (it is readable while idle, as httpcore and urllib3 also check) or it idled
past ``keepalive_expiry``, at most ``max_connections`` open, explicit connect / write / read / pool timeouts.
Certificates are checked against ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else certifi's bundle, as
httpx does. No proxies and no redirects: :class:`~runner.gateway.providers.ProviderClient` uses httpx when a
proxy environment variable applies.

Why not httpx or urllib3 on this hop: the gateway forwards every agent step through it, and per call httpx
costs about 300 µs of CPU and urllib3 about 130 µs, against about 70 µs here (``bench/gateway.py``).

Failures are :class:`Timeout` or :class:`Broken`, named after the httpx exception they correspond to
(``ConnectTimeout``, ``ReadTimeout``, ``ConnectError``, ``RemoteProtocolError``, ...), so the provider client
classifies both wires alike. Any other exception is re-raised as a bare ``RuntimeError``: the frames of
``http.client`` hold the request headers, so the original traceback, rendered with locals, would show the key.
"""

from __future__ import annotations

import http.client
import os
import select
import ssl
import threading
import time
from typing import NamedTuple
from urllib.parse import urlsplit


class Timeout(Exception):
    """A phase of the call ran out of time; ``name`` says which (``ConnectTimeout``, ``ReadTimeout``...)."""

    def __init__(self, name: str, detail: str = "") -> None:
        self.name = name
        super().__init__(detail or name)


class Broken(Exception):
    """The connection failed or the reply was not HTTP/1.x; ``name`` says how (``ConnectError``...)."""

    def __init__(self, name: str, detail: str) -> None:
        self.name = name
        super().__init__(detail)


class Response(NamedTuple):
    """A complete response; ``headers`` looks names up case-insensitively."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes


class Pool:
    """Keep-alive connections to one origin, shared by threads; at most ``max_connections`` open at once."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        *,
        connect_timeout: float,
        read_timeout: float,
        write_timeout: float,
        pool_timeout: float,
        max_connections: int,
        keepalive_expiry: float = 5.0,
    ) -> None:
        """Prepare connections to ``base_url``'s origin; ``headers`` go with every request.

        Raises:
            ValueError: ``base_url`` is not http(s) with a host and valid port, or ``http.client`` refuses a
                header (a line break, a character outside Latin-1). The message never holds a header value.
        """
        parts = urlsplit(base_url)
        try:
            port = parts.port
        except ValueError:
            port = -1
        if parts.scheme not in ("http", "https") or not parts.hostname or port == -1:
            raise ValueError(f"not an http(s) URL with a host: {base_url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self._headers = {"user-agent": "ispm-gateway", "accept": "application/json", **headers}
        self._ssl: ssl.SSLContext | None = ssl_context() if self.https else None
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.write_timeout = write_timeout
        self.pool_timeout = pool_timeout
        self.max_connections = max_connections
        self.keepalive_expiry = keepalive_expiry
        self._check_headers()
        self._lock = threading.Lock()
        self._freed = threading.Condition(self._lock)
        self._idle: list[tuple[http.client.HTTPConnection, float]] = []  # (connection, idle since)
        self._open = 0  # idle plus in use
        self._closed = False

    def _check_headers(self) -> None:
        """Let ``http.client`` validate the headers now (it buffers them; nothing is sent)."""
        conn = self._new()
        try:
            conn.putrequest("POST", self.prefix or "/")
            for name, value in self._headers.items():
                conn.putheader(name, value)
        except (ValueError, UnicodeError):
            raise ValueError("http.client refuses a request header") from None  # never echo it: it may be a key
        finally:
            conn.close()

    def _new(self) -> http.client.HTTPConnection:
        if self._ssl is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.connect_timeout, context=self._ssl)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.connect_timeout)

    def post(self, path: str, payload: bytes) -> Response:
        """POST ``payload`` to ``path`` (appended to the base URL's path) and read the whole response.

        Raises:
            Timeout, Broken: see the module docs. The connection is dropped; nothing is retried here.
            RuntimeError: the pool was closed, or ``http.client`` failed unexpectedly (see the module docs).
        """
        conn = self._checkout()
        keep = False
        phase = "Connect"
        try:
            if conn.sock is None:
                conn.connect()  # TCP_NODELAY set by http.client; TLS handshake under connect_timeout
            conn.sock.settimeout(self.write_timeout)
            phase = "Write"
            # http.client sends head and body in one write when the body is bytes (no Nagle stall)
            conn.request("POST", self.prefix + path, body=payload, headers=self._headers)
            conn.sock.settimeout(self.read_timeout)
            phase = "Read"
            response = conn.getresponse()
            body = response.read()
            keep = not response.will_close and conn.sock is not None
            return Response(response.status, response.headers, body)
        except TimeoutError:
            raise Timeout(f"{phase}Timeout") from None
        except http.client.HTTPException as exc:  # RemoteDisconnected, IncompleteRead, BadStatusLine, LineTooLong
            raise Broken("RemoteProtocolError" if phase == "Read" else f"{phase}Error", _describe(exc)) from None
        except OSError as exc:  # ssl.SSLError included: a bad certificate is a failed connect, as in httpx
            raise Broken(f"{phase}Error", str(exc)) from None
        except Exception as exc:
            raise RuntimeError(f"http.client failed unexpectedly: {type(exc).__name__}") from None
        finally:
            self._checkin(conn, keep)

    def __repr__(self) -> str:  # never the headers: they hold the key
        return f"Pool({'https' if self.https else 'http'}://{self.host}:{self.port}{self.prefix})"

    def close(self) -> None:
        """Close idle connections now, and busy ones as they finish; later calls raise ``RuntimeError``."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
        for conn, _ in idle:
            conn.close()

    def _checkout(self) -> http.client.HTTPConnection:
        """A pooled connection fit for reuse, or a new unconnected one in a reserved slot."""
        deadline = None
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("cannot send a request: the provider client was closed")
                if self._idle:
                    conn, since = self._idle.pop()
                    break
                if self._open < self.max_connections:
                    self._open += 1
                    return self._new()
                now = time.monotonic()
                deadline = deadline or now + self.pool_timeout
                if now >= deadline or not self._freed.wait(deadline - now):
                    raise Timeout("PoolTimeout", f"no free connection within {self.pool_timeout} s")
        if time.monotonic() - since <= self.keepalive_expiry and not _readable(conn):
            return conn
        conn.close()  # its slot stays ours: the closed connection reconnects on use
        return conn

    def _checkin(self, conn: http.client.HTTPConnection, keep: bool) -> None:
        with self._lock:
            if keep and not self._closed:
                self._idle.append((conn, time.monotonic()))
                keep_it = True
            else:
                self._open -= 1
                keep_it = False
            self._freed.notify()
        if not keep_it:
            conn.close()


def _readable(conn: http.client.HTTPConnection) -> bool:
    """Readable while idle: the peer closed the connection, or sent bytes nobody asked for."""
    if conn.sock is None:
        return True
    poller = select.poll()
    poller.register(conn.sock, select.POLLIN)
    return bool(poller.poll(0))


def _describe(exc: http.client.HTTPException) -> str:
    # IncompleteRead's str() is its byte counts; the partial body itself never goes into a message.
    return f"{type(exc).__name__}: {exc}"[:200]


def ssl_context() -> ssl.SSLContext:
    """A client context verifying certificates and hostnames, with httpx's choice of CA certificates."""
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if not cafile and not capath:
        import certifi  # httpx's own CA bundle, installed with it

        cafile = certifi.where()
    return ssl.create_default_context(cafile=cafile or None, capath=capath or None)
