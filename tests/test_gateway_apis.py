"""The gateway's three agent APIs through the official SDKs, streamed and not, against a scripted provider.

Every pair of agent API (chat completions, Responses, Messages) and candidate provider (OpenAI, Anthropic) is
driven by the real ``openai`` and ``anthropic`` clients; the fake provider renders each scripted turn from the
SDKs' own types, and reports what it put on the wire, so the gateway's accounting is compared with it exactly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fake_provider import (
    FakeProvider,
    Reply,
    StreamError,
    ToolCall,
    Turn,
    Usage,
    fake_provider,
    point_clients_at,
    total_usage,
)

from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway

__all__ = ["fake_provider"]  # the imported fixture is used by name

KEY = "sk-live-APIS-MARKER-5e0b1c2d"
SETTINGS = ClientSettings(read_timeout=2.0, max_attempts=3)
CANDIDATES = {"openai": "openai/gpt-4.1", "anthropic": "anthropic/claude-sonnet-4-6"}
TOOL = {
    "name": "run_sql",
    "description": "Run one SQL query",
    "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}},
}
INVESTIGATION = [
    Turn(
        text="Checking the leavers.",
        tool_calls=[
            ToolCall("run_sql", {"sql": "SELECT id FROM hibob_people WHERE status = 'terminated'"}, id="call_1")
        ],
        usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=1000, reasoning_tokens=12),
    ),
    Turn(text="Two leavers can still sign in.", usage=Usage(input_tokens=1300, output_tokens=25, cached_tokens=0)),
]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, fake_provider: FakeProvider) -> FakeProvider:
    return point_clients_at(monkeypatch, fake_provider, KEY, KEY + "-anthropic")


@pytest.fixture(params=sorted(CANDIDATES))
def gateway(request: pytest.FixtureRequest, env: FakeProvider) -> Iterator[Gateway]:
    sleeps: list[float] = []
    with Gateway(CANDIDATES[request.param], settings=SETTINGS, sleep=sleeps.append) as gw:
        gw.sleeps = sleeps  # type: ignore[attr-defined]  # the waits between retries, for the retry tests
        yield gw


def clients(gw: Gateway, token: str) -> tuple[openai.OpenAI, anthropic.Anthropic]:
    host, port = gw.listen_tcp()
    root = f"http://{host}:{port}"
    return (
        openai.OpenAI(base_url=root + "/v1", api_key=token, max_retries=0),
        anthropic.Anthropic(base_url=root, api_key=token, max_retries=0),
    )


# One step of the investigation in each API, streamed or not: (text, [(tool name, arguments)]) as the SDK parsed it.
def chat_step(client: openai.OpenAI, stream: bool, model: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    request: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "system", "content": "You are an analyst."}, {"role": "user", "content": "Leavers?"}],
        "tools": [{"type": "function", "function": TOOL}],
    }
    if not stream:
        message = client.chat.completions.create(**request).choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]  # type: ignore[union-attr]
        return message.content or "", calls
    with client.chat.completions.stream(**request, stream_options={"include_usage": True}) as events:
        final = events.get_final_completion()
    message = final.choices[0].message
    assert final.usage is not None  # the agent asked for it
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
    return message.content or "", calls


def responses_step(client: openai.OpenAI, stream: bool, model: str) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    request: dict[str, Any] = {
        "model": model,
        "instructions": "You are an analyst.",
        "input": [{"role": "user", "content": "Leavers?"}],
        "tools": [{"type": "function", **TOOL, "strict": False}],
    }
    if stream:
        with client.responses.stream(**request) as events:
            response = events.get_final_response()
    else:
        response = client.responses.create(**request)
    calls = [(item.name, json.loads(item.arguments)) for item in response.output if item.type == "function_call"]
    return response.output_text, calls


def messages_step(
    client: anthropic.Anthropic, stream: bool, model: str
) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    request: dict[str, Any] = {
        "model": model,
        "max_tokens": 1024,
        "system": "You are an analyst.",
        "messages": [{"role": "user", "content": "Leavers?"}],
        "tools": [{"name": TOOL["name"], "description": TOOL["description"], "input_schema": TOOL["parameters"]}],
    }
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)
    text = "".join(b.text for b in message.content if b.type == "text")
    return text, [(b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]  # type: ignore[arg-type]


def step(gw: Gateway, api: str, stream: bool, token: str, model: str = "agent-picked-model") -> tuple[str, list[Any]]:
    oa, an = clients(gw, token)
    if api == "chat":
        return chat_step(oa, stream, model)
    if api == "responses":
        return responses_step(oa, stream, model)
    return messages_step(an, stream, model)


PASSED_THROUGH = {("chat", "openai"), ("responses", "openai"), ("messages", "anthropic")}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_every_api_reaches_every_provider(gateway: Gateway, env: FakeProvider, api: str, stream: bool) -> None:
    env.push(*INVESTIGATION)
    token = gateway.issue_token("s")
    first = step(gateway, api, stream, token, model="claude-opus-5-5")
    second = step(gateway, api, stream, token, model="claude-haiku-4-5")
    assert first == ("Checking the leavers.", [("run_sql", INVESTIGATION[0].tool_calls[0].arguments)])
    assert second == ("Two leavers can still sign in.", [])

    usage = gateway.revoke("s")
    sent = total_usage(env.reported)
    assert (
        (usage.requests, usage.input_tokens, usage.output_tokens, usage.cached_tokens)
        == (
            2,
            sent.input_tokens,
            sent.output_tokens,
            sent.cached_tokens,
        )
        == (2, 2500, 65, 1000)
    )
    # OpenAI states reasoning_tokens, Anthropic thinking_tokens
    assert usage.reasoning_tokens == sent.reasoning_tokens == 12
    provider = gateway.candidate.split("/")[0]
    assert [c.requested_model for c in usage.calls] == ["claude-opus-5-5", "claude-haiku-4-5"]
    assert {seen.body["model"] for seen in env.seen} == {gateway.model}  # the candidate, whatever was asked
    passed = (api, provider) in PASSED_THROUGH
    assert {c.provider_api for c in usage.calls} == {
        api if passed else ("chat" if provider == "openai" else "messages")
    }
    assert all(c.outcome == "ok" and c.stream is stream and c.status == 200 for c in usage.calls)
    assert all((c.ttft_s is not None) is stream for c in usage.calls)
    assert usage.model_ids == [env.reported[0].model] and usage.in_flight == 0 and usage.errors == []


def test_a_chat_stream_without_include_usage_is_still_counted(gateway: Gateway, env: FakeProvider) -> None:
    env.push(Turn(text="ok", usage=Usage(input_tokens=50, output_tokens=5)))
    oa, _ = clients(gateway, gateway.issue_token("u"))
    chunks = list(oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True))
    assert all(chunk.choices for chunk in chunks)  # no usage-only chunk the agent did not ask for
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "ok"
    usage = gateway.revoke("u")
    assert (usage.input_tokens, usage.output_tokens) == (50, 5)
    if gateway.candidate.startswith("openai/"):  # the gateway asked the provider for usage on the agent's behalf
        assert env.seen[-1].body["stream_options"] == {"include_usage": True}


def test_a_stream_cut_by_the_provider_is_counted_and_recorded(gateway: Gateway, env: FakeProvider) -> None:
    env.push(Turn(text="a long answer " * 20, usage=Usage(input_tokens=700, output_tokens=90), cut_after=4))
    _, an = clients(gateway, gateway.issue_token("cut"))
    request: Any = {"model": "m", "max_tokens": 100, "messages": [{"role": "user", "content": "q"}]}
    with pytest.raises((anthropic.APIError, httpx.HTTPError)), an.messages.stream(**request) as events:
        events.get_final_message()
    usage = gateway.revoke("cut")
    (call,) = usage.calls
    assert (call.outcome, call.api, usage.requests, usage.in_flight) == ("stream_cut", "messages", 1, 0)
    assert call.error == "the provider's stream broke: ClientPayloadError"  # aiohttp's own name for the cut
    assert [(e.kind, e.status) for e in usage.errors] == [("stream", 200)]
    if gateway.candidate.startswith("anthropic/"):  # message_start said the input before the cut
        assert (usage.input_tokens, call.input_tokens) == (700, 700)


def test_an_error_event_in_the_stream_reaches_the_agent(env: FakeProvider) -> None:
    env.push(Turn(text="partial answer", error=StreamError(after=3)))  # Anthropic's `event: error`, mid-stream
    with Gateway(CANDIDATES["anthropic"], settings=SETTINGS) as gateway:
        oa, _ = clients(gateway, gateway.issue_token("e"))
        with pytest.raises(openai.APIError, match="Overloaded"):
            list(oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True))
        (call,) = gateway.revoke("e").calls
    assert call.outcome == "stream_cut" and "Overloaded" in (call.error or "")


def test_a_stream_the_agent_abandons_is_counted(gateway: Gateway, env: FakeProvider) -> None:
    env.push(Turn(text="word " * 50, usage=Usage(input_tokens=300, output_tokens=60), delay_between=0.05))
    oa, _ = clients(gateway, gateway.issue_token("gone"))
    stream = oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}], stream=True)
    for chunk in stream:  # the first words, then the agent hangs up
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()
    usage = gateway.revoke("gone", settle=5.0)
    (call,) = usage.calls
    assert (call.outcome, usage.requests, usage.in_flight, usage.errors) == ("agent_disconnected", 1, 0, [])
    assert call.error == "the agent closed the stream before its end" and call.ttft_s is not None


def test_a_429_on_a_stream_is_retried_before_the_first_byte(gateway: Gateway, env: FakeProvider) -> None:
    env.push(Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "0.25"}), Turn(text="fine"))
    assert step(gateway, "messages", True, gateway.issue_token("r"))[0] == "fine"
    (call,) = gateway.revoke("r").calls
    assert (call.outcome, call.attempts) == ("ok", 2) and gateway.sleeps == [0.25]  # type: ignore[attr-defined]


def test_a_failing_provider_gives_the_agent_a_clear_error_in_its_api(gateway: Gateway, env: FakeProvider) -> None:
    env.push(*[Reply(503, {"error": {"message": "down"}}) for _ in range(3)])
    _, an = clients(gateway, gateway.issue_token("f"))
    request: Any = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "q"}]}
    with pytest.raises(anthropic.APIStatusError) as info, an.messages.stream(**request) as events:
        events.get_final_message()
    assert info.value.status_code == 502 and "the candidate model failed" in str(info.value)
    assert info.value.body["error"]["type"] == "api_error"  # type: ignore[index]
    usage = gateway.revoke("f")
    assert [(e.kind, e.status, e.attempts) for e in usage.errors] == [("http_status", 503, 3)]


def test_foreign_and_missing_tokens_get_401_in_each_api(gateway: Gateway, env: FakeProvider) -> None:
    gateway.issue_token("mine")
    oa, an = clients(gateway, "not-a-gateway-token")
    with pytest.raises(openai.AuthenticationError):
        oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
    with pytest.raises(openai.AuthenticationError):
        oa.responses.create(model="m", input="q")
    with pytest.raises(anthropic.AuthenticationError) as info:
        an.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}])
    assert info.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]
    assert env.seen == [] and gateway.usage("mine").requests == 0


def test_the_token_is_accepted_as_x_api_key_and_as_a_bearer(gateway: Gateway, env: FakeProvider) -> None:
    token = gateway.issue_token("k")
    _, an = clients(gateway, token)
    bearer = anthropic.Anthropic(base_url=str(an.base_url), auth_token=token, max_retries=0)
    for client in (an, bearer):
        client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "q"}])
    assert gateway.revoke("k").requests == 2


def test_huge_and_malformed_requests_get_clear_errors_and_the_gateway_stays_up(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # groq speaks chat completions only: a Responses request is translated, and what cannot be translated is refused
    monkeypatch.setenv("GROQ_API_KEY", KEY + "-groq")
    monkeypatch.setenv("GROQ_BASE_URL", env.openai_base)
    with Gateway("groq/llama-3.3-70b", settings=SETTINGS, max_body_bytes=64 * 1024) as gw:
        oa, an = clients(gw, gw.issue_token("h"))
        with pytest.raises(openai.APIStatusError) as info:
            oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 100_000}])
        assert info.value.status_code == 413 and "too large" in str(info.value)
        with pytest.raises(anthropic.BadRequestError, match="messages"):
            an.messages.create(model="m", max_tokens=5, messages="not a list")  # type: ignore[arg-type]
        with pytest.raises(openai.BadRequestError, match="previous_response_id"):
            oa.responses.create(model="m", input="q", previous_response_id="resp_1")
        assert oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}]).choices
        usage = gw.revoke("h")
    assert usage.requests == 1 and [c.outcome for c in usage.calls] == ["refused", "ok"]
    assert len(env.seen) == 1 and env.seen[0].headers["authorization"] == f"Bearer {KEY}-groq"
    assert env.seen[0].body["model"] == "llama-3.3-70b"


def test_count_tokens_and_models(gateway: Gateway, env: FakeProvider) -> None:
    token = gateway.issue_token("c")
    oa, an = clients(gateway, token)
    assert [m.id for m in oa.models.list()] == [gateway.model]
    assert [m.id for m in an.models.list()] == [gateway.model]
    request = {"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "q"}]}
    if gateway.candidate.startswith("anthropic/"):
        assert an.messages.count_tokens(**request).input_tokens == env.reported[-1].token_count  # type: ignore[arg-type]
        assert env.seen[-1].body["model"] == gateway.model
    else:
        with pytest.raises(anthropic.NotFoundError, match="count_tokens needs an Anthropic candidate"):
            an.messages.count_tokens(**request)  # type: ignore[arg-type]
    usage = gateway.revoke("c")
    assert usage.requests == 0  # counting tokens is not a step
    assert [c.api for c in usage.calls] == (["count_tokens"] if gateway.candidate.startswith("anthropic/") else [])
