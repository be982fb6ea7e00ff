"""A real HTTP server on loopback that plays an LLM provider from a script.

It speaks OpenAI chat-completions (``POST /v1/chat/completions``) and Anthropic Messages (``POST
/v1/messages``). Each request takes the next scripted :class:`Reply`; when the script is empty it answers with
a canned success in the protocol of the path, so it also serves benchmarks. Every request is recorded.

Use the ``fake_provider`` fixture (import it into your test module), or ``with FakeProvider() as fake:``.
Point clients at it with ``OPENAI_BASE_URL=fake.openai_base`` / ``ANTHROPIC_BASE_URL=fake.anthropic_base``.
"""

from __future__ import annotations

import json
import queue
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

OPENAI_MODEL = "gpt-fake-2026-01-01"
ANTHROPIC_MODEL = "claude-fake-20260101"


@dataclass
class Reply:
    """One scripted answer. ``body`` is JSON-encoded unless it is bytes or str."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to wait before answering."""
    hang: bool = False
    """Hold the connection without answering until the fake closes (tests a read timeout)."""
    malformed: bool = False
    """Answer 200 with a body that is not JSON."""
    drop: bool = False
    """Close the connection without answering (tests a reset)."""
    chunked: bool = False
    """Send the body with chunked transfer coding instead of a Content-Length."""
    close: bool = False
    """Answer with ``Connection: close``, then close the connection."""
    hangup: bool = False
    """Close the connection after answering without saying so first (as an idle keep-alive timeout does)."""


@dataclass
class Seen:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    peer: Any = None
    """The client's address: equal for requests that came over one kept-alive connection."""


def openai_completion(
    content: str | None = "ok",
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    cached_tokens: int = 0,
    model: str = OPENAI_MODEL,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat-completions response body with the given usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }


def anthropic_message(
    content: list[dict[str, Any]] | None = None,
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
    cache_read: int = 0,
    stop_reason: str = "end_turn",
    model: str = ANTHROPIC_MODEL,
) -> dict[str, Any]:
    """A Messages response body; ``content`` defaults to one text block."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content if content is not None else [{"type": "text", "text": "ok"}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
        },
    }


class FakeProvider:
    """The server. ``push`` scripts replies; ``seen`` lists requests received, in order."""

    def __init__(self, delay: float = 0.0, *, tls: tuple[str, str] | None = None) -> None:
        """Start serving on 127.0.0.1 at a free port; canned replies wait ``delay`` seconds (benchmarks).

        ``tls`` (certificate file, key file) serves HTTPS instead; :attr:`url` still says ``http://``.
        """
        self.delay = delay
        self._script: queue.SimpleQueue[Reply] = queue.SimpleQueue()
        self._release = threading.Event()
        self.seen: list[Seen] = []
        self._seen_lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
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

    def push(self, *replies: Reply) -> None:
        """Append replies to the script."""
        for reply in replies:
            self._script.put(reply)

    def close(self) -> None:
        """Release hung connections and stop serving."""
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeProvider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, path: str) -> Reply:
        try:
            return self._script.get_nowait()
        except queue.Empty:
            body = anthropic_message() if path.endswith("/messages") else openai_completion()
            return Reply(body=body, delay=self.delay)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeProvider

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        with self.fake._seen_lock:
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.fake.seen.append(Seen("POST", self.path, headers, body, self.client_address))
        reply = self.fake._next(self.path)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.hang:
            self.fake._release.wait(30)
            self.close_connection = True
            return
        if reply.drop:
            self.close_connection = True
            return
        if reply.malformed:
            data = b'{"id": "chatcmpl-broken", "choices": [ {"mess'
        elif isinstance(reply.body, bytes):
            data = reply.body
        elif isinstance(reply.body, str):
            data = reply.body.encode()
        else:
            data = json.dumps(reply.body if reply.body is not None else {}).encode()
        head = [f"HTTP/1.1 {reply.status} Scripted", "Content-Type: application/json"]
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


@pytest.fixture
def fake_provider() -> Iterator[FakeProvider]:
    """A running :class:`FakeProvider`, closed after the test."""
    with FakeProvider() as fake:
        yield fake


def point_clients_at(
    monkeypatch: pytest.MonkeyPatch, fake: FakeProvider, openai_key: str, anthropic_key: str
) -> FakeProvider:
    """Set the providers' usual variables so that both clients reach ``fake`` with these keys; returns ``fake``."""
    monkeypatch.setenv("OPENAI_API_KEY", openai_key)
    monkeypatch.setenv("OPENAI_BASE_URL", fake.openai_base)
    monkeypatch.setenv("ANTHROPIC_API_KEY", anthropic_key)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.anthropic_base)
    return fake


class Sleeps(list[float]):
    """Stands in for time.sleep between provider retries: records the waits and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
