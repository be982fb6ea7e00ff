"""Provider clients on a real loopback server: retries, typed errors, redaction, Anthropic translation."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fake_provider import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeProvider,
    Reply,
    Sleeps,
    anthropic_message,
    fake_provider,
    openai_completion,
    point_clients_at,
)

from runner.errors import GatewayError
from runner.gateway.preflight import PreflightError, preflight
from runner.gateway.protocols import TranslationError
from runner.gateway.protocols import chat_messages as tr
from runner.gateway.providers import (
    PROVIDERS,
    AnthropicClient,
    BadEndpoint,
    ClientSettings,
    MissingCredential,
    OpenAIClient,
    ProviderError,
    UnknownProvider,
    client_for,
    parse_model,
)

__all__ = ["fake_provider"]  # the imported fixture is used by name

KEY = "sk-test-MARKER-7f3a9c1e5b"
FAST = ClientSettings(read_timeout=2.0, max_attempts=3)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY + "-anthropic")


def chat(content: str = "hi") -> dict[str, Any]:
    return {"model": "ignored", "messages": [{"role": "user", "content": content}]}


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("openai/gpt-4.1", ("openai", "gpt-4.1")),
        ("anthropic/claude-sonnet-4-6", ("anthropic", "claude-sonnet-4-6")),
        ("openai/meta-llama/Llama-3-8B", ("openai", "meta-llama/Llama-3-8B")),
    ],
)
def test_parse_model(ref: str, expected: tuple[str, str]) -> None:
    assert parse_model(ref) == expected


@pytest.mark.parametrize("ref", ["gpt-4.1", "mistral/large", "openai/", "/gpt"])
def test_unknown_provider(ref: str) -> None:
    with pytest.raises(UnknownProvider, match="provider/model") as info:
        parse_model(ref)
    assert isinstance(info.value, GatewayError)


# Every provider and the variable it names when nothing is set: its key, or its base URL where it has no default.
MISSING = [
    ("openai/x", "OPENAI_API_KEY"),
    ("anthropic/y", "ANTHROPIC_API_KEY"),
    ("openrouter/meta-llama/llama-3.3-70b-instruct", "OPENROUTER_API_KEY"),
    ("together/Qwen/Qwen3-235B", "TOGETHER_API_KEY"),
    ("groq/llama-3.3-70b-versatile", "GROQ_API_KEY"),
    ("google/gemini-2.5-pro", "GEMINI_API_KEY"),
    ("azure/my-deployment", "AZURE_OPENAI_API_KEY"),
    ("vllm/meta-llama/Llama-3-8B", "VLLM_BASE_URL"),
]


@pytest.mark.parametrize(("ref", "var"), MISSING)
def test_missing_credential_names_the_variable(monkeypatch: pytest.MonkeyPatch, ref: str, var: str) -> None:
    for spec in PROVIDERS.values():
        for name in (spec.key_env, spec.base_env):
            if name:
                monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredential, match=var) as info:
        client_for(ref)
    assert info.value.env_var == var


def test_each_provider_sends_its_key_its_way(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """The OpenAI-compatible providers reach their own base URL with their own key and header."""
    sent = {}
    for name, spec in PROVIDERS.items():
        if spec.wire != "chat" or name == "openai":
            continue
        if spec.key_env:
            monkeypatch.setenv(spec.key_env, f"{KEY}-{name}")
        monkeypatch.setenv(spec.base_env, env.openai_base)
        client, model = client_for(f"{name}/some/model", FAST)
        client.chat(model, chat())
        sent[name] = (
            env.seen[-1].path,
            env.seen[-1].body["model"],
            {h: env.seen[-1].headers.get(h) for h in ("authorization", "api-key")},
        )
    assert sent["azure"] == ("/v1/chat/completions", "some/model", {"authorization": None, "api-key": f"{KEY}-azure"})
    for name in ("openrouter", "together", "groq", "google", "vllm", "ollama"):
        assert sent[name] == (
            "/v1/chat/completions",
            "some/model",
            {"authorization": f"Bearer {KEY}-{name}", "api-key": None},
        )
    monkeypatch.delenv("OLLAMA_API_KEY")  # a local server without a key: no auth header at all
    client, model = client_for("ollama/llama3", FAST)
    client.chat(model, chat())
    assert "authorization" not in env.seen[-1].headers


def test_openai_success_normalizes_usage_and_sends_the_key(env: FakeProvider) -> None:
    client = OpenAIClient(FAST)
    env.push(Reply(body={**_oa(prompt=120, completion=30, cached=64)}))
    result = client.chat("gpt-4.1", chat())
    assert (result.input_tokens, result.output_tokens, result.cached_tokens) == (120, 30, 64)
    assert result.returned_model == OPENAI_MODEL and result.attempts == 1 and result.latency_s > 0
    assert result.completion is result.body and json.loads(result.raw) == result.body
    seen = env.seen[0]
    assert seen.path == "/v1/chat/completions" and seen.body["model"] == "gpt-4.1"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client)


def test_429_honours_retry_after(env: FakeProvider) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps)
    env.push(Reply(429, {"error": "slow down"}, headers={"Retry-After": "0.7"}), Reply(body=_oa()))
    result = client.chat("m", chat())
    assert result.attempts == 2 and len(env.seen) == 2
    assert sleeps == [0.7]


def test_retry_after_is_capped(env: FakeProvider) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST.model_copy(update={"retry_after_cap": 0.25}), sleep=sleeps)
    env.push(Reply(429, {}, headers={"Retry-After": "3600"}), Reply(body=_oa()))
    client.chat("m", chat())
    assert sleeps == [0.25]


def test_500_then_success(env: FakeProvider) -> None:
    sleeps = Sleeps()
    env.push(Reply(500, {"error": "boom"}), Reply(body=_oa()))
    result = OpenAIClient(FAST, sleep=sleeps).chat("m", chat())
    assert result.attempts == 2 and len(sleeps) == 1


def test_5xx_exhausts_retries_into_a_typed_error(env: FakeProvider) -> None:
    sleeps = Sleeps()
    env.push(*[Reply(503, {"error": "down"})] * 3)
    with pytest.raises(ProviderError) as info:
        OpenAIClient(FAST, sleep=sleeps).chat("m", chat())
    err = info.value
    assert (err.kind, err.status, err.retryable, err.attempts) == ("http_status", 503, True, 3)
    assert len(env.seen) == 3 and len(sleeps) == 2
    assert err.record().attempts == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_no_retry_on_other_4xx(env: FakeProvider, status: int) -> None:
    sleeps = Sleeps()
    env.push(Reply(status, {"error": {"message": "nope"}}), Reply(body=_oa()))
    with pytest.raises(ProviderError) as info:
        OpenAIClient(FAST, sleep=sleeps).chat("m", chat())
    assert (info.value.status, info.value.retryable, info.value.attempts) == (status, False, 1)
    assert len(env.seen) == 1 and sleeps == []


def test_hung_connection_times_out_and_retries(env: FakeProvider) -> None:
    sleeps = Sleeps()
    settings = ClientSettings(read_timeout=0.15, max_attempts=2)
    env.push(Reply(hang=True), Reply(hang=True))
    with pytest.raises(ProviderError) as info:
        OpenAIClient(settings, sleep=sleeps).chat("m", chat())
    assert (info.value.kind, info.value.status, info.value.attempts) == ("timeout", None, 2)
    assert len(env.seen) == 2


def test_dropped_connection_is_retried(env: FakeProvider) -> None:
    env.push(Reply(drop=True), Reply(body=_oa()))
    assert OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()).attempts == 2


def test_unreachable_endpoint_is_a_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderError) as info:
        OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat())
    assert (info.value.kind, info.value.attempts) == ("connection", 3)


def test_malformed_json_is_retried_a_bounded_number_of_times(env: FakeProvider) -> None:
    env.push(*[Reply(malformed=True)] * 3)
    with pytest.raises(ProviderError) as info:
        OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat())
    assert (info.value.kind, info.value.status, info.value.attempts) == ("malformed", 200, 3)
    env.push(Reply(malformed=True), Reply(body="[1, 2]"), Reply(body=_oa()))
    assert OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()).attempts == 3


def test_key_echoed_by_provider_is_redacted(env: FakeProvider) -> None:
    env.push(Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    with pytest.raises(ProviderError) as info:
        OpenAIClient(FAST).chat("m", chat())
    err = info.value
    assert "Incorrect API key" in str(err)
    for text in (str(err), repr(err), err.message, err.record().model_dump_json()):
        assert KEY not in text
    env.push(Reply(body={**_oa(), "note": f"echo {KEY}"}))
    result = OpenAIClient(FAST).chat("m", chat())
    assert KEY.encode() not in result.raw and KEY not in json.dumps(result.body)


def test_anthropic_tool_round_trip(env: FakeProvider) -> None:
    tools = [
        {
            "type": "function",
            "function": {"name": "run_sql", "description": "Run SQL", "parameters": _schema()},
        }
    ]
    env.push(
        Reply(
            body=anthropic_message(
                [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "run_sql", "input": {"sql": "SELECT 1"}},
                ],
                input_tokens=40,
                output_tokens=9,
                cache_read=25,
                stop_reason="tool_use",
            )
        )
    )
    client = AnthropicClient(FAST)
    first = client.chat(
        "claude-sonnet-4-6",
        {
            "messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Who?"}],
            "tools": tools,
        },
    )
    seen = env.seen[-1]
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY + "-anthropic" and seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.body["system"] == "Be terse." and seen.body["max_tokens"] == tr.DEFAULT_MAX_TOKENS
    assert seen.body["tools"] == [{"name": "run_sql", "description": "Run SQL", "input_schema": _schema()}]
    assert first.completion is not None
    choice = first.completion["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Let me look."
    call = choice["message"]["tool_calls"][0]
    assert call["id"] == "toolu_1" and json.loads(call["function"]["arguments"]) == {"sql": "SELECT 1"}
    assert (first.input_tokens, first.output_tokens, first.cached_tokens) == (65, 9, 25)
    assert first.completion["usage"]["prompt_tokens"] == 65 and first.returned_model == ANTHROPIC_MODEL

    env.push(Reply(body=anthropic_message([{"type": "text", "text": "Nobody."}])))
    history = [
        {"role": "user", "content": "Who?"},
        choice["message"],
        {"role": "tool", "tool_call_id": "toolu_1", "content": "1"},
    ]
    second = client.chat("claude-sonnet-4-6", {"messages": history, "tools": tools})
    assert env.seen[-1].body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Who?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "run_sql", "input": {"sql": "SELECT 1"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"}]},
    ]
    assert second.completion is not None
    assert second.completion["choices"][0]["message"] == {"role": "assistant", "content": "Nobody."}


# Translation as data: (chat-completions request fragment, expected Messages request fragment).
REQUESTS: list[tuple[dict[str, Any], dict[str, Any]]] = [
    ({"stop": "END", "max_tokens": 50}, {"stop_sequences": ["END"], "max_tokens": 50}),
    ({"max_completion_tokens": 70, "temperature": 0.0}, {"max_tokens": 70, "temperature": 0.0}),
    (
        {"tool_choice": "required", "tools": [{"type": "function", "function": {"name": "f"}}]},
        {"tool_choice": {"type": "any"}},
    ),
    (
        {
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "parallel_tool_calls": False,
            "tools": [{"type": "function", "function": {"name": "f"}}],
        },
        {"tool_choice": {"type": "tool", "name": "f", "disable_parallel_tool_use": True}},
    ),
]


@pytest.mark.parametrize(("fragment", "expected"), REQUESTS)
def test_request_translation_table(fragment: dict[str, Any], expected: dict[str, Any]) -> None:
    out = tr.chat_to_messages_request({"messages": [{"role": "user", "content": "q"}], **fragment}, "m")
    assert {k: out[k] for k in expected} == expected


def test_tool_results_merge_into_one_user_turn_first() -> None:
    out = tr.chat_to_messages_request(
        {
            "messages": [
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "2"}]},
                {"role": "user", "content": "and?"},
            ]
        },
        "m",
    )
    (turn,) = out["messages"]
    assert [b["type"] for b in turn["content"]] == ["tool_result", "tool_result", "text"]
    assert turn["content"][1]["content"] == "2"


@pytest.mark.parametrize(
    "request_body",
    [
        {"messages": [{"role": "user", "content": "q"}], "n": 2},
        {"messages": [{"role": "narrator", "content": "q"}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{oops"}}]}]},
    ],
)
def test_untranslatable_requests_raise(request_body: dict[str, Any]) -> None:
    with pytest.raises(TranslationError):
        tr.chat_to_messages_request(request_body, "m")


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
    ],
)
def test_stop_reasons(stop_reason: str, finish: str) -> None:
    body = tr.messages_to_chat_response(anthropic_message(stop_reason=stop_reason))
    assert body["choices"][0]["finish_reason"] == finish


def _oa(prompt: int = 11, completion: int = 7, cached: int = 0) -> dict[str, Any]:
    return openai_completion(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached)


def _schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}


def test_preflight_records_returned_ids(env: FakeProvider) -> None:
    env.push(Reply(body=openai_completion(model="gpt-4.1-2025-04-14")))  # anthropic: the canned reply
    resolved = preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6", "openai/gpt-4.1"])
    assert [(r.alias, r.requested_model, r.returned_model) for r in resolved] == [
        ("openai/gpt-4.1", "gpt-4.1", "gpt-4.1-2025-04-14"),
        ("anthropic/claude-sonnet-4-6", "claude-sonnet-4-6", ANTHROPIC_MODEL),
        ("openai/gpt-4.1", "gpt-4.1", "gpt-4.1-2025-04-14"),
    ]
    assert len(env.seen) == 2 and resolved[1].base_url == env.anthropic_base
    assert KEY not in "".join(r.model_dump_json() for r in resolved)


def test_preflight_static_problems_come_first(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(PreflightError) as info:
        preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6", "gemini/pro"])
    assert len(info.value.problems) == 2
    assert "ANTHROPIC_API_KEY" in info.value.problems[0] and "'gemini/pro'" in info.value.problems[1]
    assert env.seen == []  # nothing spent before the configuration is whole


def test_preflight_explains_endpoint_failures(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{s.getsockname()[1]}")
    env.push(Reply(401, {"error": f"bad key {KEY}"}))
    with pytest.raises(PreflightError) as info:
        preflight(["openai/gpt-4.1", "anthropic/claude-sonnet-4-6"], ClientSettings(max_attempts=1))
    rejected, unreachable = info.value.problems
    assert "rejected the key in OPENAI_API_KEY" in rejected
    assert "cannot reach http://127.0.0.1:" in unreachable
    assert KEY not in str(info.value)


# -- the wire: http.client framing, connection reuse, pool limits, TLS, and the httpx fallback --------------


@pytest.mark.parametrize(
    "first",
    [Reply(body=_oa(prompt=3)), Reply(body=_oa(prompt=3), chunked=True)],
    ids=["content-length", "chunked"],
)
def test_keep_alive_reuses_one_connection(env: FakeProvider, first: Reply) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps)
    env.push(first, Reply(body=_oa(prompt=5)))
    results = [client.chat("m", chat()) for _ in range(3)]
    assert [r.input_tokens for r in results] == [3, 5, 11] and [r.attempts for r in results] == [1, 1, 1]
    assert len({seen.peer for seen in env.seen}) == 1 and sleeps == []
    assert json.loads(results[0].raw) == results[0].body


@pytest.mark.parametrize("ending", ["close", "hangup"])
def test_a_closed_connection_is_replaced_without_a_retry(env: FakeProvider, ending: str) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps)
    env.push(Reply(body=_oa(prompt=3), **{ending: True}), Reply(body=_oa(prompt=5)))
    assert client.chat("m", chat()).input_tokens == 3
    time.sleep(0.1)  # the fake's FIN reaches us: the idle connection is readable, so it is not reused
    second = client.chat("m", chat())
    assert (second.input_tokens, second.attempts, sleeps) == (5, 1, [])
    assert len({seen.peer for seen in env.seen}) == 2


def test_pool_limit_waits_then_times_out(env: FakeProvider) -> None:
    settings = ClientSettings(max_connections=1, pool_timeout=0.05, max_attempts=2, read_timeout=5)
    client = OpenAIClient(settings, sleep=Sleeps())
    env.push(Reply(body=_oa(prompt=9), delay=0.5))
    slow = threading.Thread(target=client.chat, args=("m", chat()))
    slow.start()
    while not env.seen:  # the only connection is busy with the slow call
        time.sleep(0.005)
    with pytest.raises(ProviderError) as info:
        client.chat("m", chat())
    slow.join()
    assert (info.value.kind, info.value.retryable, info.value.attempts) == ("timeout", True, 2)
    assert "PoolTimeout" in info.value.message
    assert client.chat("m", chat()).attempts == 1  # the slot came back


def test_unparseable_endpoint_or_key_fails_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\r\nx-injected: 1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    with pytest.raises(BadEndpoint) as info:
        OpenAIClient(FAST)
    assert KEY not in str(info.value) and "OPENAI_API_KEY" in str(info.value)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", "ftp://127.0.0.1/v1")
    with pytest.raises(BadEndpoint, match="OPENAI_BASE_URL"):
        OpenAIClient(FAST)


def test_a_transport_can_be_given(env: FakeProvider) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST, sleep=sleeps, transport=httpx.HTTPTransport(retries=0))
    env.push(Reply(429, {}, headers={"Retry-After": "0.3"}), Reply(body=_oa(prompt=4)), Reply(404, {"error": "x"}))
    result = client.chat("m", chat())
    assert (result.input_tokens, result.attempts, sleeps) == (4, 2, [0.3])
    with pytest.raises(ProviderError) as info:
        client.chat("m", chat())
    assert (info.value.status, info.value.retryable, info.value.attempts) == (404, False, 1)


def test_a_proxy_in_the_environment_is_used(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "")
    with pytest.raises(ProviderError) as info:
        OpenAIClient(ClientSettings(max_attempts=1)).chat("m", chat())
    assert info.value.kind == "connection" and env.seen == []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    assert OpenAIClient(FAST).chat("m", chat()).attempts == 1


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_verifies_the_certificate_and_the_host_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    request = "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost -addext subjectAltName=DNS:localhost"
    subprocess.run(
        ["openssl", *request.split(), "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True
    )
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with FakeProvider(tls=(str(cert), str(key))) as fake:
        port = fake.url.rsplit(":", 1)[1]
        settings = ClientSettings(read_timeout=2.0, max_attempts=2)
        monkeypatch.setenv("OPENAI_BASE_URL", f"https://localhost:{port}/v1")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        with pytest.raises(ProviderError) as info:  # self-signed: not in certifi's bundle
            OpenAIClient(settings, sleep=Sleeps()).chat("m", chat())
        assert (info.value.kind, info.value.attempts) == ("connection", 2)
        assert "CERTIFICATE_VERIFY_FAILED" in info.value.message and KEY not in str(info.value)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # trusted, as httpx would take it
        assert OpenAIClient(settings, sleep=Sleeps()).chat("m", chat()).input_tokens == 11
        monkeypatch.setenv("OPENAI_BASE_URL", f"https://127.0.0.1:{port}/v1")  # trusted, but not for this name
        with pytest.raises(ProviderError) as info:
            OpenAIClient(settings, sleep=Sleeps()).chat("m", chat())
        assert info.value.kind == "connection" and "CERTIFICATE_VERIFY_FAILED" in info.value.message
        assert len(fake.seen) == 1 and fake.seen[0].headers["authorization"] == f"Bearer {KEY}"
