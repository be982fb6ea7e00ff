"""The HTTP server: routes each request, takes its answer from the script, the responder or the canned default,
and writes it.

Why ``http.server`` threads rather than uvicorn+starlette: the fake must misbehave at the byte level (drop a
connection unanswered, end a chunked body without its last chunk, add chunk extensions, close a kept-alive
connection silently), which an ASGI server does not let an app do. Each event is one chunk written with
``sendall`` on an unbuffered socket with Nagle off, so every event is flushed as it is produced.
"""

from __future__ import annotations

import itertools
import json
import queue
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

from anthropic.types import ModelInfo
from openai.types import Model

from . import chat, gemini, messages, responses
from .script import (
    ANTHROPIC_MODEL,
    GEMINI_MODEL,
    OPENAI_MODEL,
    Reply,
    Reported,
    Scripted,
    Seen,
    TokenCount,
    Turn,
    Usage,
    anthropic_message,
    openai_completion,
    usage_from_wire,
)
from .wire import Answering, Event, Rendered, dump

Route = Literal["chat", "responses", "messages", "count_tokens", "gemini", "models", "other"]
Responder = Callable[[Seen], Scripted | None]
CREATED = 1767225600  # 2026-01-01T00:00:00Z: answers say they were created then, so they compare exactly
GENERATION: tuple[Route, ...] = ("chat", "responses", "messages", "gemini", "other")
ENDPOINTS: tuple[tuple[str, Route], ...] = (
    ("/chat/completions", "chat"),
    ("/responses", "responses"),
    ("/messages/count_tokens", "count_tokens"),
    ("/messages", "messages"),
    (":generateContent", "gemini"),
    (":streamGenerateContent", "gemini"),
)


def route(method: str, target: str) -> Route:
    """Which endpoint a request is for, by the end of its path (so any prefix and query work)."""
    path = urlsplit(target).path.rstrip("/")
    if method == "GET":
        return "models" if path.endswith("/models") else "other"
    for suffix, name in ENDPOINTS:
        if path.endswith(suffix):
            return name
    return "other"


class FakeProvider:
    """The server. ``push`` scripts answers; ``seen`` lists requests received and ``reported`` what was answered."""

    def __init__(
        self,
        delay: float = 0.0,
        *,
        tls: tuple[str, str] | None = None,
        responder: Responder | None = None,
        remember: bool = True,
    ) -> None:
        """Start serving on 127.0.0.1 at a free port; canned answers wait ``delay`` seconds (benchmarks).

        ``tls`` (certificate file, key file) serves HTTPS instead; :attr:`url` still says ``http://``.
        ``responder`` is asked for an answer when the script has none (see :attr:`responder`).
        ``remember=False`` keeps :attr:`seen` and :attr:`reported` empty, for a bench: a log of every request grows
        the heap, and each full garbage collection of it pauses every stream the fake serves.
        """
        self.delay = delay
        self.remember = remember
        self.responder = responder
        """``(Seen) -> Turn | Reply | TokenCount | None``, asked when the script holds nothing for a request (agents
        make side requests a test does not script one by one); None from it means the canned answer."""
        self.models = [OPENAI_MODEL, ANTHROPIC_MODEL]
        """The ids ``GET /v1/models`` lists."""
        self.seen: list[Seen] = []
        self.reported: list[Reported] = []
        """One entry per answered request, in the order answers began: what the fake put on the wire."""
        self._script: dict[str | None, queue.SimpleQueue[Scripted]] = {None: queue.SimpleQueue()}
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._release = threading.Event()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.01,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base(self) -> str:
        """The value for ``OPENAI_BASE_URL``."""
        return self.url + "/v1"

    @property
    def anthropic_base(self) -> str:
        """The value for ``ANTHROPIC_BASE_URL``."""
        return self.url

    @property
    def gemini_base(self) -> str:
        """The value for ``GEMINI_BASE_URL``: Google's OpenAI-compatible endpoint, whose parent serves Gemini's own
        API (``/v1beta/models/{model}:generateContent``)."""
        return self.url + "/v1beta/openai"

    def push(self, *answers: Scripted, path: str | None = None) -> None:
        """Append answers to the script. Without ``path`` they answer the generation endpoints (chat, responses,
        messages, any other POST) in order; with one (``"/v1/messages/count_tokens"``, ``"/v1/models"``, …) they
        answer only requests to that path, before the unscoped ones."""
        with self._lock:
            line = self._script.setdefault(path, queue.SimpleQueue())
        for answer in answers:
            line.put(answer)

    def close(self) -> None:
        """Release hung connections and stop serving."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _answer(self, seen: Seen, endpoint: Route) -> Scripted:
        """The scripted answer for this request, the responder's, or the canned one."""
        lines = [self._script.get(urlsplit(seen.path).path)]
        if endpoint in GENERATION:
            lines.append(self._script[None])
        for line in lines:
            if line is not None:
                try:
                    return line.get_nowait()
                except queue.Empty:
                    pass
        if self.responder is not None and (answer := self.responder(seen)) is not None:
            return answer
        if endpoint == "chat" and not seen.stream:  # today's canned bodies, byte for byte
            return Reply(body=openai_completion(), delay=self.delay)
        if endpoint == "messages" and not seen.stream:
            return Reply(body=anthropic_message(), delay=self.delay)
        if endpoint == "count_tokens":
            return TokenCount()
        return Turn(usage=Usage(13, 5) if endpoint == "messages" else Usage(11, 7), delay=self.delay)

    def _report(self, entry: Reported) -> Reported:
        if self.remember:
            with self._lock:
                self.reported.append(entry)
        return entry


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # socketserver's 5 resets a burst of 16 callers connecting at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client resets a kept-alive connection (as clients do when they close); report the rest."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each event leaves at once
    fake: FakeProvider

    def do_GET(self) -> None:
        self._serve(None)

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        self._serve(body)

    def _serve(self, body: Any) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        seen = Seen(self.command, self.path, headers, body, self.client_address)
        if self.fake.remember:
            with self.fake._lock:
                self.fake.seen.append(seen)
        number = next(self.fake._numbers)
        endpoint = route(self.command, self.path)
        answer = self.fake._answer(seen, endpoint)
        if isinstance(answer, Reply | Turn) and answer.delay:
            time.sleep(answer.delay)
        try:
            if isinstance(answer, Reply):
                self._send_reply(answer, seen, endpoint)
            elif endpoint == "models":
                self._send_models(seen)
            elif endpoint == "count_tokens":
                count = answer.input_tokens if isinstance(answer, TokenCount) else answer.usage.input_tokens
                self.fake._report(Reported(self.path, False, 200, token_count=count, complete=True))
                self._write_json(200, messages.token_count(count), _request_id(endpoint, number))
            elif isinstance(answer, Turn) and self.command == "POST":
                self._send_turn(answer, seen, endpoint, number)
            else:  # a GET the fake has no route for, or a token count scripted for a generation request
                refusal = {"error": {"message": f"fake: cannot answer {self.command} {self.path} with {answer!r}"}}
                self._send_reply(Reply(404 if self.command == "GET" else 500, refusal), seen, endpoint)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send_turn(self, turn: Turn, seen: Seen, endpoint: Route, number: int) -> None:
        protocol = endpoint if endpoint in ("responses", "messages", "gemini") else "chat"
        default_model = {"messages": ANTHROPIC_MODEL, "gemini": GEMINI_MODEL}.get(protocol, OPENAI_MODEL)
        request = seen.body if isinstance(seen.body, dict) else {}
        answering = Answering(number, turn.model or default_model, request, CREATED)
        rendered: Rendered
        if protocol == "gemini":
            rendered = gemini.events(answering, turn) if seen.stream else gemini.body(answering, turn)
        elif protocol == "messages":
            rendered = messages.events(answering, turn) if seen.stream else messages.message(answering, turn)
        elif protocol == "responses":
            rendered = responses.events(answering, turn) if seen.stream else responses.body(answering, turn)
        else:
            rendered = chat.chunks(answering, turn) if seen.stream else chat.completion(answering, turn)
        headers = {**_request_id(endpoint, number), **turn.headers}
        if rendered.events is None:
            assert rendered.body is not None and rendered.wire_usage is not None
            self.fake._report(
                Reported(
                    self.path,
                    False,
                    200,
                    rendered.model,
                    rendered.wire_usage,
                    usage_from_wire(protocol, rendered.wire_usage),
                    complete=True,
                )
            )
            self._write_json(200, rendered.body, headers)
            return
        entry = self.fake._report(Reported(self.path, True, 200, rendered.model))
        head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream; charset=utf-8", "Cache-Control: no-cache"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append("Transfer-Encoding: chunked")
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode())
        events = rendered.events
        first_event_at = time.monotonic()
        for index in range(len(events) + 1):
            if turn.error is not None and index == turn.error.after:
                if protocol == "messages":
                    failure = messages.error_event(turn.error)
                elif protocol == "gemini":
                    failure = gemini.error_event(turn.error)
                elif protocol == "responses":
                    failure = responses.error_event(turn.error, index)
                else:
                    failure = chat.error_event(turn.error)
                self.wfile.write(_chunk(failure) + b"0\r\n\r\n")
                return
            if turn.cut_after is not None and index == turn.cut_after:
                self.close_connection = True  # closes without the last chunk: the body is incomplete
                return
            if index == len(events):
                break
            if index and turn.delay_between:  # on the provider's own clock: a slow reader does not slow it down
                time.sleep(max(0.0, first_event_at + index * turn.delay_between - time.monotonic()))
            event = events[index]
            if event.wire_usage is not None:
                entry.wire_usage = event.wire_usage
                entry.usage = usage_from_wire(protocol, event.wire_usage)
            entry.complete = index == len(events) - 1
            self.wfile.write(_chunk(event))
        self.wfile.write(b"0\r\n\r\n")

    def _send_models(self, seen: Seen) -> None:
        if "anthropic-version" in seen.headers:  # Anthropic's client lists models on the same path
            data = [
                dump(
                    ModelInfo.model_validate(
                        {
                            "type": "model",
                            "id": m,
                            "display_name": m,
                            "created_at": "2026-01-01T00:00:00Z",
                            "lifecycle": "active",
                        }
                    )
                )
                for m in self.fake.models
            ]
            body: dict[str, Any] = {
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        else:
            body = {
                "object": "list",
                "data": [
                    dump(Model.model_validate({"id": m, "object": "model", "created": CREATED, "owned_by": "fake"}))
                    for m in self.fake.models
                ],
            }
        self.fake._report(Reported(self.path, False, 200, complete=True))
        self._write_json(200, body, {})

    def _write_json(self, status: int, body: Any, headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        head = [f"HTTP/1.1 {status} OK", "Content-Type: application/json", f"Content-Length: {len(data)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)

    def _send_reply(self, reply: Reply, seen: Seen, endpoint: Route) -> None:
        if reply.hang:
            self.fake._release.wait(30)
            self.close_connection = True
            return
        if reply.drop:
            self.close_connection = True
            return
        entry = Reported(self.path, seen.stream, 200 if reply.malformed else reply.status, complete=True)
        if isinstance(reply.body, dict) and not reply.malformed:
            entry.model = reply.body.get("model") if isinstance(reply.body.get("model"), str) else None
            wire_usage = reply.body.get("usage")
            if reply.status == 200 and isinstance(wire_usage, dict):
                protocol = endpoint if endpoint in ("responses", "messages") else "chat"
                entry.wire_usage = wire_usage
                try:
                    entry.usage = usage_from_wire(protocol, wire_usage)
                except (KeyError, TypeError, ValueError):
                    entry.usage = None
        self.fake._report(entry)
        if reply.malformed:
            data = b'{"id": "chatcmpl-broken", "choices": [ {"mess'
        elif isinstance(reply.body, bytes):
            data = reply.body
        elif isinstance(reply.body, str):
            data = reply.body.encode()
        else:
            data = json.dumps(reply.body if reply.body is not None else {}).encode()
        head = [f"HTTP/1.1 {reply.status} Scripted"]
        if not any(k.lower() == "content-type" for k in reply.headers):
            head.append("Content-Type: application/json")
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        if reply.chunked:
            head.append("Transfer-Encoding: chunked")
            data = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in (data[:10], data[10:]) if p) + b"0\r\n\r\n"
        else:
            head.append(f"Content-Length: {len(data)}")
        if reply.close:
            head.append("Connection: close")
        self.close_connection = reply.close or reply.hangup
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _chunk(event: Event) -> bytes:
    data = event.encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


def _request_id(endpoint: Route, number: int) -> dict[str, str]:
    name = "request-id" if endpoint in ("messages", "count_tokens") else "x-request-id"
    return {name: f"req_fake{number}"}
