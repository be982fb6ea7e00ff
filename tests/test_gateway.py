"""The gateway over real sockets: exact accounting, tokens, caps, faults, Unix sockets, key hygiene."""

from __future__ import annotations

import gc
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
from fake_provider import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeProvider,
    Reply,
    anthropic_message,
    fake_provider,
    point_clients_at,
)
from fake_provider import openai_completion as completion

from runner.errors import GatewayError
from runner.gateway.model import ClientSettings
from runner.gateway.server import Caps, Gateway

__all__ = ["fake_provider"]  # the imported fixture is used by name

KEY = "sk-live-UNIQUE-MARKER-d41d8cd98f00b204"
SETTINGS = ClientSettings(read_timeout=0.5, max_attempts=2)  # short: a hung provider costs 2 × 0.5 s
CHAT = {"model": "whatever-the-agent-says", "messages": [{"role": "user", "content": "Who lacks MFA?"}]}


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def provider_env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY)


@pytest.fixture
def gateway(provider_env: FakeProvider, sleeps: list[float]) -> Iterator[Gateway]:
    with Gateway("openai/gpt-4.1", settings=SETTINGS, sleep=sleeps.append) as gw:
        yield gw


@pytest.fixture
def http(gateway: Gateway) -> Iterator[httpx.Client]:
    host, port = gateway.listen_tcp()
    with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as client:
        yield client


def post(http: httpx.Client, token: str | None, body: Any = CHAT) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return http.post("/v1/chat/completions", json=body, headers=headers)


def test_token_accounting_is_exact(gateway: Gateway, http: httpx.Client, provider_env: FakeProvider) -> None:
    usages = [(1234, 56, 1000), (2048, 512, 0), (7, 1, 7)]
    provider_env.push(
        *[Reply(body=completion(prompt_tokens=i, completion_tokens=o, cached_tokens=c)) for i, o, c in usages]
    )
    provider_env.push(Reply(body=completion(model="gpt-fake-2026-02-02")))
    token = gateway.issue_token("t1/e0")
    other = gateway.issue_token("t2/e0")
    for _ in range(4):
        assert post(http, token).status_code == 200
    assert post(http, other).status_code == 200
    usage = gateway.revoke("t1/e0")
    assert (usage.requests, usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (
        4,
        1234 + 2048 + 7 + 11,
        56 + 512 + 1 + 7,
        1007,
    )
    assert usage.model_ids == [OPENAI_MODEL, "gpt-fake-2026-02-02"]
    assert usage.latency_s > 0 and usage.errors == [] and usage.refused == 0
    assert gateway.usage("t2/e0").requests == 1
    # the agent does not choose the model: the gateway forwards to the candidate
    assert {seen.body["model"] for seen in provider_env.seen} == {"gpt-4.1"}


def test_response_is_the_providers_bytes(gateway: Gateway, http: httpx.Client, provider_env: FakeProvider) -> None:
    body = completion(
        "SELECT is fine",
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "run_sql", "arguments": "{}"}}],
    )
    provider_env.push(Reply(body=body))
    tools = [{"type": "function", "function": {"name": "run_sql", "parameters": {"type": "object"}}}]
    resp = post(http, gateway.issue_token("s"), {**CHAT, "tools": tools, "tool_choice": "auto"})
    assert resp.json() == body
    assert provider_env.seen[-1].body["tools"] == tools and provider_env.seen[-1].body["tool_choice"] == "auto"


def test_tokens_identify_one_sample(
    gateway: Gateway, provider_env: FakeProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    token_a = gateway.issue_token("A")
    token_b = gateway.issue_token("B")
    sock_b = gateway.listen_unix(tmp_path / "b.sock", sample_id="B")
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock_b)), base_url="http://gateway") as b_side:
        assert post(b_side, token_a).status_code == 401  # A's token inside B's container: foreign
        assert post(b_side, token_b).status_code == 200
        assert post(b_side, "made-up-token").status_code == 401
        assert post(b_side, None).status_code == 401
        assert b_side.post("/v1/chat/completions", json=CHAT, headers={"authorization": token_b}).status_code == 401
    assert gateway.usage("A").requests == 0 and gateway.usage("B").requests == 1

    host, port = gateway.listen_tcp()
    with httpx.Client(base_url=f"http://{host}:{port}") as shared:
        assert post(shared, token_a).status_code == 200
        gateway.revoke("A")
        refused = post(shared, token_a)
        assert refused.status_code == 401 and refused.json()["error"]["type"] == "authentication_error"
    assert gateway.usage("A").requests == 1
    reasons = [
        r.msg.get("reason") for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "token_refused"
    ]
    assert reasons == ["foreign", "unknown", "missing", "missing", "revoked"]
    assert token_a not in caplog.text and token_b not in caplog.text


def test_revoke_closes_the_samples_socket(gateway: Gateway, tmp_path: Path) -> None:
    gateway.issue_token("S")
    sock = gateway.listen_unix(tmp_path / "s.sock", sample_id="S")
    assert sock.is_socket()
    gateway.revoke("S")
    assert not sock.exists()
    gateway.revoke("S")  # idempotent


def test_one_live_token_per_sample(gateway: Gateway) -> None:
    gateway.issue_token("S")
    with pytest.raises(GatewayError, match="live"):
        gateway.issue_token("S")
    gateway.revoke("S")
    gateway.issue_token("S")  # a re-run of the sample starts fresh
    assert gateway.usage("S").requests == 0


def test_unix_socket_serves(gateway: Gateway, tmp_path: Path) -> None:
    path = gateway.listen_unix(tmp_path / "gw.sock")
    assert path.stat().st_mode & 0o777 == 0o666
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://gateway") as client:
        assert client.get("/healthz").json() == {"ok": True}
        token = gateway.issue_token("u")
        for _ in range(3):  # keep-alive: the same connection serves every request
            assert post(client, token).json()["model"] == OPENAI_MODEL
        listing = client.get("/v1/models", headers={"authorization": f"Bearer {token}"}).json()
        assert listing["data"][0]["id"] == "gpt-4.1" and client.get("/v1/models").status_code == 401
    assert gateway.usage("u").requests == 3
    with pytest.raises(GatewayError, match="Unix socket"):
        gateway.listen_unix(tmp_path / ("x" * 120) / "gw.sock")


def test_what_the_process_held_at_start_is_out_of_the_collectors_walk(gateway: Gateway) -> None:
    # A full collection over the runner's start-up objects stalls every stream; frozen, they are never walked.
    walked = gc.get_objects()
    assert gc.get_freeze_count() > 10_000
    assert not any(o is Gateway or o is httpx.AsyncClient for o in walked)


def test_loopback_only(gateway: Gateway) -> None:
    with pytest.raises(GatewayError, match="loopback"):
        gateway.listen_tcp("0.0.0.0")


def test_caps_refuse_clearly(provider_env: FakeProvider) -> None:
    with Gateway("openai/gpt-4.1", caps=Caps(max_requests=2)) as gw:
        host, port = gw.listen_tcp()
        with httpx.Client(base_url=f"http://{host}:{port}") as http:
            token = gw.issue_token("c")
            assert [post(http, token).status_code for _ in range(2)] == [200, 200]
            refused = post(http, token)
        assert refused.status_code == 429 and refused.headers["x-should-retry"] == "false"
        assert refused.json()["error"]["code"] == "ispm_cap_exceeded"
        assert "2 of 2" in refused.json()["error"]["message"]
        assert (gw.usage("c").requests, gw.usage("c").refused, len(provider_env.seen)) == (2, 1, 2)
    with Gateway("openai/gpt-4.1", caps=Caps(max_tokens=30)) as gw:
        host, port = gw.listen_tcp()
        with httpx.Client(base_url=f"http://{host}:{port}") as http:
            token = gw.issue_token("c")
            codes = [post(http, token).status_code for _ in range(3)]  # 18 tokens each: the second overshoots
        assert codes == [200, 200, 429] and gw.usage("c").input_tokens + gw.usage("c").output_tokens == 36


@pytest.mark.parametrize(
    ("body", "message"),
    [({"model": "x"}, "messages"), ({"messages": "x"}, "messages"), ([1], "JSON object"), ("not json", "not JSON")],
)
def test_bad_requests_get_400(gateway: Gateway, http: httpx.Client, body: Any, message: str) -> None:
    token = gateway.issue_token("s")
    if isinstance(body, str):
        resp = http.post("/v1/chat/completions", content=body, headers={"authorization": f"Bearer {token}"})
    else:
        resp = post(http, token, body)
    assert resp.status_code == 400 and message in resp.json()["error"]["message"]
    assert gateway.usage("s").requests == 0


def test_provider_faults_end_in_records_not_crashes(
    gateway: Gateway, http: httpx.Client, provider_env: FakeProvider, sleeps: list[float]
) -> None:
    token = gateway.issue_token("f")
    provider_env.push(Reply(429, {"error": "busy"}, headers={"Retry-After": "0.4"}), Reply(body=completion()))
    assert post(http, token).status_code == 200 and sleeps == [0.4]
    provider_env.push(Reply(500, "oops"), Reply(body=completion()))
    assert post(http, token).status_code == 200
    provider_env.push(Reply(hang=True), Reply(hang=True))
    hung = post(http, token)
    assert hung.status_code == 504 and hung.json()["error"]["attempts"] == 2
    provider_env.push(Reply(malformed=True), Reply(malformed=True))
    assert post(http, token).status_code == 502
    provider_env.push(Reply(400, {"error": {"message": "context too long"}}))
    bad = post(http, token)
    assert bad.status_code == 400 and "context too long" in bad.json()["error"]["message"]
    provider_env.push(Reply(404, {"error": "no such model"}))
    assert post(http, token).status_code == 502  # the agent did not pick the model: not its 404
    assert post(http, token).status_code == 200  # and the gateway carries on
    usage = gateway.usage("f")
    assert [(e.kind, e.status, e.attempts) for e in usage.errors] == [
        ("timeout", None, 2),
        ("malformed", 200, 2),
        ("http_status", 400, 1),
        ("http_status", 404, 1),
    ]
    assert usage.requests == 7 and usage.input_tokens == 3 * 11


def test_an_unreachable_provider_is_a_connection_error_not_a_timeout(
    monkeypatch: pytest.MonkeyPatch, sleeps: list[float]
) -> None:
    with socket.socket() as closed:  # a port that was bound and released: nothing listens there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with Gateway("openai/gpt-4.1", settings=SETTINGS, sleep=sleeps.append) as gw:
        host, port = gw.listen_tcp()
        with httpx.Client(base_url=f"http://{host}:{port}", timeout=5) as http:
            resp = post(http, gw.issue_token("u"))
        usage = gw.usage("u")
    assert resp.status_code == 502 and len(sleeps) == 1
    (error,) = usage.errors
    assert (error.kind, error.attempts) == ("connection", 2)
    assert "ClientConnectorError" in error.message


def test_key_never_leaves_the_host_side(
    gateway: Gateway,
    http: httpx.Client,
    provider_env: FakeProvider,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    token = gateway.issue_token("k")
    captured: list[str] = []
    provider_env.push(
        Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
        Reply(500, f"upstream trace: key={KEY}"),
        Reply(500, f"upstream trace: key={KEY}"),
        Reply(body={**completion(), "system_fingerprint": KEY}),
        Reply(malformed=True),
        Reply(malformed=True),
    )
    for _ in range(4):
        resp = post(http, token)
        captured += [resp.text, json.dumps(dict(resp.headers))]
    captured += [post(http, KEY).text]  # an agent presenting the real key gets nothing for it
    sock = gateway.listen_unix(tmp_path / "g.sock")
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://g") as client:
        captured += [client.get("/v1/chat/completions", headers={"authorization": f"Bearer {token}"}).text]
    usage = gateway.usage("k")
    captured += [usage.model_dump_json(), repr(gateway.upstream.endpoint), repr(usage), repr(gateway.upstream)]
    out, err = capfd.readouterr()
    captured += [caplog.text, out, err, *(repr(r.__dict__) for r in caplog.records)]
    assert any(seen.headers.get("authorization") == f"Bearer {KEY}" for seen in provider_env.seen)  # it was used
    assert "token_refused" in caplog.text and "provider_failed" in caplog.text  # the logs are not empty
    leaks = [text for text in captured if KEY in text]
    assert leaks == []


def test_anthropic_candidate_round_trip(provider_env: FakeProvider) -> None:
    with Gateway("anthropic/claude-sonnet-4-6", settings=SETTINGS) as gw:
        host, port = gw.listen_tcp()
        token = gw.issue_token("a")
        tools = [
            {
                "type": "function",
                "function": {"name": "list_tables", "parameters": {"type": "object", "properties": {}}},
            }
        ]
        provider_env.push(
            Reply(
                body=anthropic_message(
                    [{"type": "tool_use", "id": "toolu_9", "name": "list_tables", "input": {}}],
                    input_tokens=100,
                    output_tokens=20,
                    cache_read=50,
                    stop_reason="tool_use",
                )
            ),
            Reply(body=anthropic_message([{"type": "text", "text": "Done."}], input_tokens=200, output_tokens=10)),
        )
        with httpx.Client(base_url=f"http://{host}:{port}") as http:
            first = post(http, token, {**CHAT, "tools": tools}).json()
            message = first["choices"][0]["message"]
            assert first["choices"][0]["finish_reason"] == "tool_calls" and message["content"] is None
            assert message["tool_calls"][0]["function"] == {"name": "list_tables", "arguments": "{}"}
            assert first["model"] == ANTHROPIC_MODEL and first["usage"]["prompt_tokens"] == 150
            history = [
                *CHAT["messages"],
                message,
                {"role": "tool", "tool_call_id": "toolu_9", "content": "okta_users"},
            ]
            second = post(http, token, {**CHAT, "messages": history, "tools": tools}).json()
        assert second["choices"][0]["message"]["content"] == "Done."
        sent = provider_env.seen[-1].body
        assert sent["model"] == "claude-sonnet-4-6"
        assert sent["messages"][-1] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": "okta_users"}],
        }
        usage = gw.usage("a")
        assert (usage.requests, usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (
            2,
            350,
            30,
            50,
        )
        assert usage.model_ids == [ANTHROPIC_MODEL]


def test_revoke_counts_requests_still_in_flight(provider_env: FakeProvider) -> None:
    provider_env.push(Reply(body=completion(prompt_tokens=500, completion_tokens=50), delay=0.2))
    answered: list[int] = []
    with Gateway("openai/gpt-4.1", settings=ClientSettings(read_timeout=10)) as gw:
        host, port = gw.listen_tcp()
        token = gw.issue_token("late")
        with httpx.Client(base_url=f"http://{host}:{port}") as http:
            agent = threading.Thread(target=lambda: answered.append(post(http, token).status_code))
            agent.start()
            while gw.usage("late").in_flight == 0:  # wait until the request is with the provider
                time.sleep(0.005)
            early = gw.revoke("late", settle=0)
            final = gw.revoke("late")  # idempotent, and waits for the straggler
            agent.join()
    assert (early.in_flight, early.input_tokens) == (1, 0)
    assert (final.in_flight, final.requests, final.input_tokens, final.output_tokens) == (0, 1, 500, 50)
    assert answered == [200] and len(provider_env.seen) == 1  # forwarded before the revoke: still answered


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


def test_http_framing_over_a_raw_socket(gateway: Gateway) -> None:
    address = gateway.listen_tcp()
    token = gateway.issue_token("raw")
    body = json.dumps(CHAT).encode()
    # two pipelined requests on one connection, the second asking to close: two replies, then EOF
    both = raw_exchange(address, request_bytes(token, body) + request_bytes(token, body, extra="Connection: close\r\n"))
    assert both.count(b"HTTP/1.1 200 OK\r\n") == 2 and both.rstrip().endswith(b"}")
    assert b"connection: close" in both.split(b"HTTP/1.1 200 OK")[2].lower()
    # HTTP/1.0 without keep-alive: closed after the reply
    assert raw_exchange(address, request_bytes(token, body, version="HTTP/1.0")).startswith(b"HTTP/1.1 200 OK")
    # Expect: 100-continue is answered before the body is sent
    with socket.create_connection(address, timeout=2) as sock:
        head = request_bytes(token, body, extra="Expect: 100-continue\r\n").split(b"\r\n\r\n")[0] + b"\r\n\r\n"
        sock.sendall(head)
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    # a chunked body is read, and counted against the size limit as it arrives
    chunked = b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n" % token.encode()
    chunked += b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    assert raw_exchange(address, chunked).startswith(b"HTTP/1.1 200 OK")
    assert gateway.usage("raw").requests == 5


AUTH = b"Host: g\r\nAuthorization: Bearer %s\r\n"


@pytest.mark.parametrize(
    ("data", "status", "says"),
    [
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            400,
            b"Invalid HTTP request",
        ),
        (b"POST /v1/chat/completions HTTP/1.1\r\n" + AUTH + b"Content-Length: 99999999999\r\n\r\n", 413, b"too large"),
        (b"GARBAGE\r\n\r\n", 400, b"Invalid HTTP request"),
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nno colon here\r\n\r\n", 400, b"Invalid HTTP request"),
        (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nContent-Length : 2\r\n\r\n{}",
            400,
            b"Invalid HTTP request",
        ),
        (b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, b"Invalid HTTP request"),  # no Host
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\nX: " + b"a" * 70000 + b"\r\n\r\n", 431, b"too large"),
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: g\r\n" + b"X: y\r\n" * 101 + b"\r\n", 431, b"too many"),
        (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\nHost: g\r\n\r\n", 414, b"too long"),
        (
            b"DELETE /v1/chat/completions HTTP/1.1\r\nHost: g\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            405,
            b"POST /v1/messages",
        ),
    ],
)
def test_malformed_requests_are_refused_clearly(gateway: Gateway, data: bytes, status: int, says: bytes) -> None:
    address = gateway.listen_tcp()
    token = gateway.issue_token("m")
    reply = raw_exchange(address, data.replace(b"%s", token.encode()))
    assert reply.startswith(f"HTTP/1.1 {status} ".encode())
    assert says in reply.partition(b"\r\n\r\n")[2]
    # and the gateway carries on
    assert raw_exchange(
        address, request_bytes(token, json.dumps(CHAT).encode(), extra="Connection: close\r\n")
    ).startswith(b"HTTP/1.1 200 OK")


def test_a_half_sent_request_costs_nothing(gateway: Gateway) -> None:
    address = gateway.listen_tcp()
    token = gateway.issue_token("half")
    assert raw_exchange(address, request_bytes(token, b'{"messages": []}')[:-5], wait=0.3) == b""
    with socket.create_connection(address, timeout=2) as sock:
        sock.sendall(request_bytes(token, b'{"messages": []}')[:-5])
        sock.shutdown(socket.SHUT_WR)  # the client gives up mid-body
        assert sock.recv(65536) == b""
    assert gateway.usage("half").requests == 0
    assert raw_exchange(address, b"GET /healthz HTTP/1.1\r\nHost: g\r\nConnection: close\r\n\r\n").endswith(
        b'{"ok":true}'
    )


def test_a_body_still_arriving_after_the_time_limit_gets_408(provider_env: FakeProvider) -> None:
    with Gateway("openai/gpt-4.1", settings=SETTINGS, body_read_s=0.5) as gw:
        address = gw.listen_tcp()
        token = gw.issue_token("slow")
        started = time.monotonic()
        reply = raw_exchange(address, request_bytes(token, b'{"messages": []}')[:-5], wait=5)
        waited = time.monotonic() - started
        assert reply.startswith(b"HTTP/1.1 408 ") and b"connection: close" in reply.lower()
        assert b"did not arrive within 0.5 s" in reply and waited >= 0.5  # not before its limit
        assert gw.usage("slow").requests == 0
        assert (
            raw_exchange(address, request_bytes(token, json.dumps(CHAT).encode(), extra="Connection: close\r\n"))[:15]
            == b"HTTP/1.1 200 OK"
        )


def test_internal_error_tracebacks_never_show_the_key(
    gateway: Gateway, http: httpx.Client, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def bug(self: Any, request: Any, **kwargs: Any) -> Any:  # the request, key included, is in scope
        raise RuntimeError("a bug deep in the wire")

    monkeypatch.setattr(httpx.AsyncClient, "send", bug)
    resp = post(http, gateway.issue_token("bug"))
    assert resp.status_code == 500 and "internal_error" in resp.text
    records = [r for r in caplog.records if r.exc_info]
    assert records, "the internal error is logged with its traceback"
    rendered = io.StringIO()
    for record in records:  # as the console renders them (rich, every frame's locals), but untruncated
        assert record.exc_info is not None
        structlog.dev.RichTracebackFormatter(width=200, locals_max_string=10**6)(rendered, record.exc_info)
    text = rendered.getvalue()
    assert "upstream.py" in text and "a bug deep in the wire" in text
    assert KEY not in text


# What an agent may not make the provider do (runner/gateway/policy.py): (path, request body, refusal fragment).
MESSAGES = {"max_tokens": 10, "messages": [{"role": "user", "content": "q"}]}
OUTSIDE_THE_SANDBOX = [
    (
        "/v1/messages",
        {**MESSAGES, "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
        "web_search_20250305",
    ),
    (
        "/v1/messages",
        {**MESSAGES, "tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]},
        "web_fetch_20250910",
    ),
    ("/v1/messages", {**MESSAGES, "tools": [{"type": "code_execution_20250825", "name": "c"}]}, "code_execution"),
    (
        "/v1/messages",
        {**MESSAGES, "mcp_servers": [{"type": "url", "url": "https://example.org/mcp", "name": "x"}]},
        "mcp_servers",
    ),
    ("/v1/responses", {"input": "q", "tools": [{"type": "web_search"}]}, "'web_search'"),
    (
        "/v1/responses",
        {"input": "q", "tools": [{"type": "mcp", "server_url": "https://example.org", "server_label": "x"}]},
        "'mcp'",
    ),
    (
        "/v1/responses",
        {"input": "q", "tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
        "code_interpreter",
    ),
    ("/v1/responses", {"input": "q", "tools": [{"type": "file_search", "vector_store_ids": ["vs_1"]}]}, "file_search"),
    ("/v1/chat/completions", {**CHAT, "web_search_options": {}}, "web_search_options"),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "web_search"}]}, "'web_search'"),
]
AGENT_RUN_TOOLS = [
    ("/v1/messages", {**MESSAGES, "tools": [{"name": "Bash", "input_schema": {"type": "object"}}]}),
    ("/v1/messages", {**MESSAGES, "tools": [{"type": "bash_20250124", "name": "bash"}]}),
    ("/v1/responses", {"input": "q", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "function", "function": {"name": "f"}}]}),
]


@pytest.mark.parametrize(("path", "body", "says"), OUTSIDE_THE_SANDBOX)
def test_tools_the_provider_would_run_are_refused(
    gateway: Gateway, http: httpx.Client, provider_env: FakeProvider, path: str, body: Any, says: str
) -> None:
    token = gateway.issue_token("p")
    resp = http.post(path, json=body, headers={"authorization": f"Bearer {token}"})
    assert resp.status_code == 400 and says in resp.text and "outside the sandbox" in resp.text
    assert provider_env.seen == [] and gateway.usage("p").requests == 0


@pytest.mark.parametrize(("path", "body"), AGENT_RUN_TOOLS)
def test_tools_the_agent_runs_are_allowed(
    provider_env: FakeProvider, monkeypatch: pytest.MonkeyPatch, path: str, body: Any
) -> None:
    candidate = "anthropic/claude-sonnet-4-6" if path == "/v1/messages" else "openai/gpt-4.1"
    with Gateway(candidate, settings=SETTINGS) as gw:
        host, port = gw.listen_tcp()
        token = gw.issue_token("a")
        resp = httpx.post(f"http://{host}:{port}{path}", json=body, headers={"x-api-key": token}, timeout=5)
    assert resp.status_code == 200, resp.text
    assert provider_env.seen[-1].body["tools"] == body["tools"]  # passed through as sent
