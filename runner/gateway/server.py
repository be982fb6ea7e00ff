"""The host-side model gateway: chat-completions in, the candidate model out, every token counted.

Agents reach ``POST /v1/chat/completions`` with a per-sample bearer token (never a provider key). The
gateway forwards the request to the configured candidate with the host's key, translating to Anthropic
Messages when the candidate is ``anthropic/*``, and counts requests, tokens, latency, provider errors and
returned model ids per sample. Those counts are the run record's accounting: the agent cannot fake them.

It listens on Unix sockets (bind-mounted into network-less containers, reached through a loopback forwarder
inside) and/or on loopback TCP. A listener may be bound to one sample: then only that sample's token is
accepted there, so a token that leaked to another container is refused as foreign.

``socketserver`` with a thread per connection (agents are few and keep their connection alive, so a thread
is made once per agent, not per step). Requests are parsed by ``httptools``, the binding of Node's llhttp that
uvicorn uses: a maintained, strict parser that is also cheap. The standard library's ``http.server`` parses
headers with the ``email`` package, which was a large share of the gateway's CPU per request; and that CPU is
the latency the gateway adds once the host is busy (``bench/gateway.py`` measures it). The handler adds the
checks a gateway facing hostile agents needs (one ``Content-Length``, no chunked bodies, a size limit checked
before the body is read, ``http.server``'s limits on the head) and writes each reply in one ``send``. The
provider hop goes through ``http.client`` (:mod:`runner.gateway.connections`). Nothing is logged per
successful request; a refused token, a cap refusal or a provider failure is.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import secrets
import socket
import socketserver
import threading
import time
from http import HTTPStatus
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import httptools
from pydantic import BaseModel, ConfigDict, Field

from runner import log
from runner.errors import GatewayError
from runner.gateway.anthropic_translate import TranslationError
from runner.gateway.providers import (
    ClientSettings,
    ProviderClient,
    ProviderError,
    ProviderErrorRecord,
    client_for,
    parse_model,
)

_log = log.get(__name__)

_CHAT_PATH = "/v1/chat/completions"
_PASS_THROUGH_STATUSES = {400, 413, 422}  # the provider blames the request content: the agent should know


class Caps(BaseModel):
    """Optional per-sample limits. Off (None) for official runs; accounting happens either way."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    max_requests: int | None = None
    """Refuse further requests once this many were forwarded for the sample."""
    max_tokens: int | None = None
    """Refuse further requests once input plus output tokens reach this. A reply may overshoot it once."""


class SampleUsage(BaseModel):
    """What one sample consumed, as counted by the gateway."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    sample_id: str
    """The sample the token was issued for."""
    requests: int = 0
    """Requests forwarded to the provider (the agent's steps), failed ones included."""
    input_tokens: int = 0
    """Prompt tokens over all successful requests, cached ones included."""
    output_tokens: int = 0
    """Completion tokens over all successful requests."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its cache."""
    latency_s: float = 0.0
    """Total seconds spent waiting on the provider, retries included."""
    errors: list[ProviderErrorRecord] = Field(default_factory=list)
    """Provider calls that failed after retries, in order."""
    model_ids: list[str] = Field(default_factory=list)
    """Distinct model ids the provider returned, in the order first seen."""
    refused: int = 0
    """Requests refused by a cap (not forwarded, not in ``requests``)."""
    in_flight: int = 0
    """Forwarded requests not yet answered when this copy was taken; 0 once the figures are final."""


class Reply(NamedTuple):
    """An HTTP reply: status, JSON body bytes, extra headers."""

    status: int
    body: bytes
    headers: dict[str, str]


def _error(status: int, kind: str, message: str, **extra: Any) -> Reply:
    # OpenAI's error shape, so agents built on OpenAI SDKs surface the message. x-should-retry tells those
    # SDKs not to retry on their own: the gateway already retried, and a cap refusal will not change.
    body = {"error": {"message": message, "type": kind, "code": kind, "param": None, **extra}}
    return Reply(status, json.dumps(body).encode(), {"x-should-retry": "false"})


def _digest(token: str) -> bytes:
    # Tokens are looked up by digest: the table never holds a usable token, and lookup timing reveals nothing.
    return hashlib.sha256(token.encode()).digest()


class Gateway:
    """Forwards agents' chat-completions requests to one candidate model and accounts for them per sample.

    Thread-safe. Use as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        candidate: str,
        *,
        caps: Caps | None = None,
        client: ProviderClient | None = None,
        settings: ClientSettings | None = None,
        max_body_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        """Configure the gateway for ``candidate`` (``provider/model``).

        ``client`` overrides the client built from the host environment (its model name is still taken from
        ``candidate``).

        Raises:
            UnknownProvider, MissingCredential, BadEndpoint: as :func:`providers.client_for` does.
        """
        if client is None:
            client, self.model = client_for(candidate, settings)
        else:
            self.model = parse_model(candidate)[1]
        self.candidate = candidate
        self.client = client
        self.caps = caps or Caps()
        self.max_body_bytes = max_body_bytes
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified whenever a forwarded request ends
        self._tokens: dict[bytes, str] = {}
        self._revoked: dict[bytes, str] = {}
        self._live: dict[str, bytes] = {}
        self._usage: dict[str, SampleUsage] = {}
        self._servers: list[_Server] = []

    # -- tokens and accounting -------------------------------------------------------------------------------

    def issue_token(self, sample_id: str) -> str:
        """A fresh bearer token for ``sample_id``, starting a fresh :class:`SampleUsage`.

        Raises:
            GatewayError: the sample already holds a live token (revoke it first).
        """
        token = secrets.token_urlsafe(32)
        with self._lock:
            if sample_id in self._live:
                raise GatewayError(f"sample {sample_id!r} already holds a live gateway token")
            self._live[sample_id] = _digest(token)
            self._tokens[_digest(token)] = sample_id
            self._usage[sample_id] = SampleUsage(sample_id=sample_id)
        _log.info("token_issued", sample=sample_id)
        return token

    def revoke(self, sample_id: str, *, settle: float = 5.0) -> SampleUsage:
        """Refuse the sample's token from now on, close listeners bound to it, and return its usage.

        Requests already forwarded still finish and are counted (the provider bills them): this waits up to
        ``settle`` seconds for them. If some are still running, the returned ``in_flight`` says so and a
        later :meth:`usage` has the final figures. Idempotent. Raises ``KeyError`` for an unknown sample.
        """
        with self._lock:
            usage = self._usage[sample_id]
            digest = self._live.pop(sample_id, None)
            if digest is not None:
                del self._tokens[digest]
                self._revoked[digest] = sample_id
            bound = [s for s in self._servers if s.sample_id == sample_id]
            self._servers = [s for s in self._servers if s.sample_id != sample_id]
        for server in bound:
            server.stop()
        with self._settled:
            self._settled.wait_for(lambda: usage.in_flight == 0, timeout=settle)
        if digest is not None:
            _log.info("token_revoked", sample=sample_id, in_flight=usage.in_flight)
        return self.usage(sample_id)

    def usage(self, sample_id: str) -> SampleUsage:
        """A copy of the sample's usage so far. Raises ``KeyError`` for an unknown sample."""
        with self._lock:
            return self._usage[sample_id].model_copy(deep=True)

    # -- listening -------------------------------------------------------------------------------------------

    def listen_unix(self, path: str | os.PathLike[str], *, sample_id: str | None = None, mode: int = 0o666) -> Path:
        """Serve on a Unix socket at ``path`` (replacing a stale socket file) and return the path.

        ``mode`` defaults to world-writable because the container's non-root user must connect; the bearer
        token is the access control, and the sandbox keeps the socket in a per-sample directory.
        ``sample_id`` binds the listener to one sample (see the module docs); it closes when that sample is
        revoked.

        Raises:
            GatewayError: the socket cannot be bound there.
        """
        sock_path = Path(path)
        if sock_path.is_socket():
            sock_path.unlink()
        try:
            server = _UnixServer(str(sock_path), self, sample_id)
        except OSError as exc:  # path too long (108 bytes), missing directory, a non-socket file in the way
            raise GatewayError(f"cannot listen on Unix socket {sock_path}: {exc}") from exc
        os.chmod(sock_path, mode)
        self._start(server)
        return sock_path

    def listen_tcp(self, host: str = "127.0.0.1", port: int = 0, *, sample_id: str | None = None) -> tuple[str, int]:
        """Serve on ``host:port`` (port 0 picks a free one) and return the bound address.

        Raises:
            GatewayError: ``host`` is not a loopback address. The gateway spends the host's keys; it never
                listens where the network can reach it.
        """
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise GatewayError(f"the gateway listens on loopback only, not on {host!r}")
        server = _TCPServer((host, port), self, sample_id)
        self._start(server)
        bound_host, bound_port = server.server_address[:2]
        return str(bound_host), int(bound_port)

    def _start(self, server: _Server) -> None:
        with self._lock:
            self._servers.append(server)
        # The poll interval bounds how long stop() waits for the loop; 50 idle wake-ups a second cost nothing.
        loop = threading.Thread(target=server.serve_forever, args=(0.02,), name="gateway-listener", daemon=True)
        loop.start()
        _log.info("gateway_listening", address=str(server.server_address), sample=server.sample_id)

    def close(self) -> None:
        """Stop every listener and close the provider client's connections."""
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            server.stop()
        self.client.close()

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, authorization: str | None, body: bytes, bound: str | None) -> Reply:
        """Answer one HTTP request; ``bound`` is the sample the listener is bound to, if any."""
        route = path.split("?", 1)[0]
        if method == "GET" and route == "/healthz":
            return Reply(200, b'{"ok": true}', {})
        if route != _CHAT_PATH:
            return _error(404, "not_found", f"no route {method} {route}; use POST {_CHAT_PATH}")
        sample_id = self._authenticate(authorization, bound, route)
        if sample_id is None:
            return _error(401, "authentication_error", "missing, unknown, revoked or foreign gateway token")
        if method != "POST":
            return _error(405, "invalid_request_error", f"use POST {_CHAT_PATH}")
        return self._chat(sample_id, body)

    def _authenticate(self, authorization: str | None, bound: str | None, route: str) -> str | None:
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            _log.warning("token_refused", reason="missing", route=route, listener_sample=bound)
            return None
        digest = _digest(token.strip())
        with self._lock:
            sample_id = self._tokens.get(digest)
            revoked_for = self._revoked.get(digest)
        if sample_id is not None and (bound is None or bound == sample_id):
            return sample_id
        # Log a fingerprint, never the token: a confused agent might send anything here, even a real key.
        reason = "foreign" if sample_id is not None else "revoked" if revoked_for is not None else "unknown"
        _log.warning(
            "token_refused",
            reason=reason,
            route=route,
            token_sample=sample_id or revoked_for,
            listener_sample=bound,
            fingerprint=digest.hex()[:12],
        )
        return None

    def _chat(self, sample_id: str, body: bytes) -> Reply:
        try:
            request = json.loads(body)
        except ValueError:
            return _error(400, "invalid_request_error", "the request body is not JSON")
        if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
            return _error(400, "invalid_request_error", "the request needs a 'messages' list")
        if request.get("stream"):
            return _error(400, "invalid_request_error", "stream=true is not supported by the ISPM gateway")
        usage = self._reserve(sample_id)
        if isinstance(usage, Reply):
            return usage
        started = time.perf_counter()
        result = failure = None
        reached = True
        try:
            result = self.client.chat(self.model, request)
        except TranslationError as exc:
            reached = False
            return _error(400, "invalid_request_error", str(exc))
        except ProviderError as exc:
            failure = exc.record()
            _log.warning("provider_failed", sample=sample_id, **failure.model_dump(exclude={"at", "message"}))
            status = 504 if exc.kind == "timeout" else 502
            if exc.status is not None and exc.status in _PASS_THROUGH_STATUSES:
                status = exc.status
            message = f"the candidate model failed: {exc}"
            return _error(status, "provider_error", message, provider_status=exc.status, attempts=exc.attempts)
        finally:
            # In a finally so that even a bug leaves in_flight right, or revoke() would wait for nothing.
            # The usage object reserved above, not a lookup: the sample may have been re-issued meanwhile.
            with self._settled:
                usage.in_flight -= 1
                if reached:
                    usage.latency_s += time.perf_counter() - started
                else:  # a request we could not translate never reached the provider
                    usage.requests -= 1
                if failure is not None:
                    usage.errors.append(failure)
                if result is not None:
                    usage.input_tokens += result.input_tokens
                    usage.output_tokens += result.output_tokens
                    usage.cached_tokens += result.cached_tokens
                    if result.returned_model and result.returned_model not in usage.model_ids:
                        usage.model_ids.append(result.returned_model)
                self._settled.notify_all()
        if result.completion is result.body and result.raw:
            # The client did not translate (OpenAI-compatible): the provider's bytes go back untouched.
            return Reply(200, result.raw, {})
        return Reply(200, json.dumps(result.completion).encode(), {})

    def _reserve(self, sample_id: str) -> SampleUsage | Reply:
        # Check and count under one lock so concurrent requests cannot slip past a cap together.
        caps = self.caps
        with self._lock:
            usage = self._usage[sample_id]
            over = None
            if caps.max_requests is not None and usage.requests >= caps.max_requests:
                over = f"request cap reached: {usage.requests} of {caps.max_requests} requests used"
            elif caps.max_tokens is not None and usage.input_tokens + usage.output_tokens >= caps.max_tokens:
                over = f"token cap reached: {usage.input_tokens + usage.output_tokens} of {caps.max_tokens} used"
            if over is None:
                usage.requests += 1
                usage.in_flight += 1
                return usage
            usage.refused += 1
        _log.warning("cap_refused", sample=sample_id, reason=over)
        return _error(429, "ispm_cap_exceeded", over)


_PHRASES = {status.value: status.phrase for status in HTTPStatus}
_MAX_LINE = 65536  # as http.server: a longer request target is refused (414), a longer header too (431)
_MAX_HEADERS = 100  # as http.server: more header lines are refused (431)
_MAX_HEAD = 4 * _MAX_LINE  # bytes received while the head is still unfinished, so one huge header cannot grow
_RECV = 65536
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
# What llhttp's error reasons (the only detail httptools gives) mean for the answer; anything else is a 400.
_PARSER_REFUSALS = {
    "Invalid HTTP version": (505, "the HTTP version is not supported; use HTTP/1.1"),
    "Content-Length overflow": (413, "the request body is too large"),
    "Duplicate Content-Length": (411, "exactly one valid Content-Length header is required"),
    "Invalid character in Content-Length": (411, "exactly one valid Content-Length header is required"),
    "Empty Content-Length": (411, "exactly one valid Content-Length header is required"),
}


class _Request(NamedTuple):
    """One complete, parsed request waiting for its answer."""

    method: str
    path: str
    authorization: str | None
    body: bytes
    keep_alive: bool


class _Halt(Exception):
    """Raised in a parser callback to stop parsing: what to answer is already queued."""


class _Handler(socketserver.BaseRequestHandler):
    """One connection: HTTP/1.1 keep-alive requests, parsed by ``httptools`` (llhttp), each reply sent in one write.

    llhttp frames the messages (request line, headers, ``Content-Length``, keep-alive, ``Connection: close``,
    HTTP/1.0, pipelining) and refuses malformed ones. The callbacks below add what a gateway facing hostile
    agents needs on top: ``http.server``'s limits on the request target (414) and on header count and size
    (431); only ``GET`` and ``POST`` (501); exactly one ``Content-Length`` on a POST (no chunked bodies: 411),
    checked against the size limit (413) before the body is read; ``100 Continue`` sent only once the body is
    acceptable; JSON error bodies; and replies written in one ``send``. A refused request is answered and the
    connection closed: what follows it cannot be trusted to start a request.
    """

    timeout = 300  # an idle keep-alive connection gives its thread back after this
    server: _Server
    request: socket.socket

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        if isinstance(self.server, _TCPServer):
            # Replies leave in one write anyway; this guards a partial write against a delayed-ACK stall.
            # (Not for Unix sockets: setsockopt(TCP_NODELAY) fails on the Unix sockets this handler also serves.)
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, True)
        self._parser = httptools.HttpRequestParser(self)
        self._ready: list[_Request | Reply] = []  # answered in order after each read; a Reply is a refusal
        self._halted = False  # a callback stopped the parser: the connection ends after the queued answers
        self._continue = False  # the request in progress awaits 100 Continue
        self.on_message_begin()  # the per-request state

    def handle(self) -> None:
        sock = self.request
        while True:
            try:
                data = sock.recv(_RECV)
            except (TimeoutError, ConnectionError):  # idle past the timeout, or the agent reset the connection
                return
            if not data:  # the agent hung up; a request it left unfinished is not forwarded
                return
            self._feed(data)
            ready, self._ready = self._ready, []
            for item in ready:
                if isinstance(item, Reply):
                    return self._write(item, close=True)
                self._write(self._answer(item), close=not item.keep_alive)
                if not item.keep_alive:
                    return
            if self._halted:
                return
            if self._continue:  # after any earlier pipelined request's answer, before reading the body
                self._continue = False
                sock.sendall(_CONTINUE)

    def _feed(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # llhttp hands the rest of the connection to another protocol: answer the request, then close.
            last = self._ready[-1] if self._ready else None
            if isinstance(last, _Request):
                self._ready[-1] = last._replace(keep_alive=False)
            self._halted = True
        except httptools.HttpParserError as exc:
            if not self._halted:  # not stopped by a callback: llhttp refused the bytes
                self._halted = True
                reason = str(exc)
                status, message = _PARSER_REFUSALS.get(reason, (400, f"a malformed request: {reason}"))
                if "Transfer-Encoding" in reason:  # with Content-Length, or not chunked: no trusted framing
                    status, message = 411, "a Content-Length header is required (no Transfer-Encoding)"
                self._ready.append(_error(status, "invalid_request_error", message))
        else:
            if self._in_head:
                self._head_bytes += len(data)
                if self._head_bytes > _MAX_HEAD:
                    self._halted = True
                    self._ready.append(_error(431, "invalid_request_error", "the request headers are too large"))

    def _refuse(self, status: int, message: str) -> NoReturn:
        """Queue a refusal and stop parsing; the connection closes once it is sent."""
        self._ready.append(_error(status, "invalid_request_error", message))
        self._halted = True
        raise _Halt

    # -- httptools callbacks ---------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        self._url = b""
        self._headers: dict[str, str] = {}
        self._header_count = 0
        self._body: list[bytes] = []

    def on_url(self, url: bytes) -> None:  # called once per received piece of the target
        self._url += url
        if len(self._url) > _MAX_LINE:
            self._refuse(414, "the request target is too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > _MAX_HEADERS:
            self._refuse(431, "too many request headers")
        if len(name) + len(value) > _MAX_LINE:
            self._refuse(431, "a request header is too long")
        self._headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser, headers = self._parser, self._headers
        if parser.get_http_version() not in ("1.0", "1.1"):
            self._refuse(505, "the HTTP version is not supported; use HTTP/1.1")
        method = parser.get_method().decode("ascii")
        if method not in ("GET", "POST"):
            self._refuse(501, f"unsupported method {method}; use POST {_CHAT_PATH}")
        length = headers.get("content-length")
        if method == "POST":
            if length is None or "transfer-encoding" in headers:  # no chunked bodies
                self._refuse(411, "a Content-Length header is required")
            if int(length) > self.server.gateway.max_body_bytes:  # llhttp checked it is digits
                self._refuse(413, "the request body is too large")
            if parser.should_upgrade():  # llhttp would skip the body: refuse rather than lose it
                self._refuse(400, "protocol upgrades are not supported")
            expect = headers.get("expect", "").lower() == "100-continue"
            self._continue = expect and parser.get_http_version() == "1.1"
        elif "transfer-encoding" in headers or length not in (None, "0"):
            # A GET with a body: answered without reading the body, then the connection closes.
            self._ready.append(self._request(b"", keep_alive=False))
            self._halted = True
            raise _Halt

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._continue = False  # the body is here: no 100 Continue to send
        self._ready.append(self._request(b"".join(self._body), keep_alive=self._parser.should_keep_alive()))

    def _request(self, body: bytes, *, keep_alive: bool) -> _Request:
        path = self._url.decode("latin-1")
        if path.startswith("//"):  # as http.server: "//x" would otherwise read as a network path
            path = "/" + path.lstrip("/")
        method = self._parser.get_method().decode("ascii")
        return _Request(method, path, self._headers.get("authorization"), body, keep_alive)

    # -- answering -------------------------------------------------------------------------------------------

    def _answer(self, request: _Request) -> Reply:
        gateway = self.server.gateway
        try:
            return gateway.handle(
                request.method, request.path, request.authorization, request.body, self.server.sample_id
            )
        except Exception:  # a bug must cost one request, not the listener thread
            _log.exception("gateway_internal_error", path=request.path)
            return _error(500, "internal_error", "the gateway failed on this request")

    def _write(self, reply: Reply, *, close: bool) -> None:
        """Status line, headers and body in one write."""
        head = [f"HTTP/1.1 {reply.status} {_PHRASES.get(reply.status, '')}", "Content-Type: application/json"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        head.append(f"Content-Length: {len(reply.body)}")
        if close:
            head.append("Connection: close")
        self.request.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + reply.body)


class _Server(socketserver.ThreadingMixIn, socketserver.BaseServer):
    daemon_threads = True
    block_on_close = False  # a hung provider call must not stall shutdown
    request_queue_size = 128  # socketserver's 5 refuses a burst of agent connections (EAGAIN on Unix sockets)
    gateway: Gateway
    sample_id: str | None

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver would print a traceback to stderr, e.g. when an agent hangs up mid-reply.
        _log.warning("gateway_connection_error", sample=self.sample_id, exc_info=True)


class _TCPServer(_Server, socketserver.TCPServer):
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], gateway: Gateway, sample_id: str | None) -> None:
        self.gateway, self.sample_id = gateway, sample_id
        socketserver.TCPServer.__init__(self, address, _Handler)


class _UnixServer(_Server, socketserver.UnixStreamServer):
    def __init__(self, path: str, gateway: Gateway, sample_id: str | None) -> None:
        self.gateway, self.sample_id = gateway, sample_id
        socketserver.UnixStreamServer.__init__(self, path, _Handler)

    def server_close(self) -> None:
        super().server_close()
        Path(str(self.server_address)).unlink(missing_ok=True)
