"""Provider clients on a real loopback server: retries, typed errors, redaction, Anthropic translation.

Preflight is in test_preflight.py; the wire (connection reuse, pool limits, proxies, TLS) in test_providers_wire.py.

Where several claims are about one exchange, a module-scoped fixture plays it once and each claim is its own test.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

import pytest
from fake_provider import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeProvider,
    Reply,
    Seen,
    Sleeps,
    anthropic_message,
    fake_provider,
)
from provider_stage import FAST, KEY, chat, completion_body, env, failure, provider

from runner.errors import GatewayError
from runner.gateway.model import ClientSettings, ProviderResult
from runner.gateway.protocols import TranslationError
from runner.gateway.protocols import chat_messages as tr
from runner.gateway.providers import (
    PROVIDERS,
    AnthropicClient,
    MissingCredential,
    OpenAIClient,
    ProviderError,
    UnknownProvider,
    client_for,
    parse_model,
)

__all__ = ["env", "fake_provider"]  # the imported fixtures are used by name


def _schema() -> dict[str, Any]:
    return {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]}


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
def test_an_unknown_provider_is_refused_with_the_form_a_reference_takes(ref: str) -> None:
    with pytest.raises(UnknownProvider, match="provider/model"):
        parse_model(ref)


def test_an_unknown_provider_is_a_gateway_error() -> None:
    assert issubclass(UnknownProvider, GatewayError)


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


def missing_credential(monkeypatch: pytest.MonkeyPatch, ref: str) -> MissingCredential:
    """What ``client_for(ref)`` raises with no provider variable set."""
    for spec in PROVIDERS.values():
        for name in (spec.key_env, spec.base_env):
            if name:
                monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredential) as info:
        client_for(ref)
    return info.value


@pytest.mark.parametrize(("ref", "var"), MISSING)
def test_a_missing_credential_says_which_variable_to_set(monkeypatch: pytest.MonkeyPatch, ref: str, var: str) -> None:
    assert var in str(missing_credential(monkeypatch, ref))


@pytest.mark.parametrize(("ref", "var"), MISSING)
def test_a_missing_credential_carries_the_variable(monkeypatch: pytest.MonkeyPatch, ref: str, var: str) -> None:
    assert missing_credential(monkeypatch, ref).env_var == var


#: Each OpenAI-compatible provider but OpenAI, and the auth headers its request must carry.
COMPATIBLE = {
    "azure": {"authorization": None, "api-key": f"{KEY}-azure"},
    **{
        name: {"authorization": f"Bearer {KEY}-{name}", "api-key": None}
        for name in ("openrouter", "together", "groq", "google", "vllm", "ollama")
    },
}


def test_the_compatible_provider_table_names_every_chat_provider_but_openai() -> None:
    assert set(COMPATIBLE) == {name for name, spec in PROVIDERS.items() if spec.wire == "chat" and name != "openai"}


def sent_by(name: str, env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> Seen:
    """The request provider ``name``'s client sends, its key and base URL set to the fake."""
    spec = PROVIDERS[name]
    if spec.key_env:
        monkeypatch.setenv(spec.key_env, f"{KEY}-{name}")
    monkeypatch.setenv(spec.base_env, env.openai_base)
    client, model = client_for(f"{name}/some/model", FAST)
    client.chat(model, chat())
    return env.seen[-1]


@pytest.mark.parametrize("name", sorted(COMPATIBLE))
def test_each_compatible_provider_is_reached_at_its_own_base_url(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    assert sent_by(name, env, monkeypatch).path == "/v1/chat/completions"


@pytest.mark.parametrize("name", sorted(COMPATIBLE))
def test_each_compatible_provider_is_asked_for_the_model_as_given(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    assert sent_by(name, env, monkeypatch).body["model"] == "some/model"


@pytest.mark.parametrize("name", sorted(COMPATIBLE))
def test_each_compatible_provider_sends_its_key_its_way(
    env: FakeProvider, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    headers = sent_by(name, env, monkeypatch).headers
    assert {h: headers.get(h) for h in ("authorization", "api-key")} == COMPATIBLE[name]


def test_a_local_server_without_a_key_gets_no_auth_header(env: FakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", env.openai_base)
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    client, model = client_for("ollama/llama3", FAST)
    client.chat(model, chat())
    assert "authorization" not in env.seen[-1].headers


# --- a plain OpenAI call -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenAICall:
    """One successful OpenAI call."""

    result: ProviderResult
    """What the client returned."""
    seen: Seen
    """What the provider received."""
    client_repr: str
    """The client's repr."""


@pytest.fixture(scope="module")
def openai_call() -> OpenAICall:
    with provider(Reply(body=completion_body(prompt=120, completion=30, cached=64))) as fake:
        client = OpenAIClient(FAST)
        result = client.chat("gpt-4.1", chat())
        return OpenAICall(result, fake.seen[0], repr(client))


def test_openai_usage_is_normalized(openai_call: OpenAICall) -> None:
    result = openai_call.result
    assert result.call.usage is not None
    assert (result.call.usage.input_tokens, result.call.usage.output_tokens, result.call.usage.cached_tokens) == (
        120,
        30,
        64,
    )


def test_openai_result_names_the_model_that_served_it(openai_call: OpenAICall) -> None:
    assert openai_call.result.call.returned_model == OPENAI_MODEL


def test_a_first_time_success_takes_one_attempt(openai_call: OpenAICall) -> None:
    assert openai_call.result.call.attempts == 1


def test_a_call_measures_its_latency(openai_call: OpenAICall) -> None:
    assert openai_call.result.call.latency_s > 0


def test_a_chat_results_completion_is_its_body(openai_call: OpenAICall) -> None:
    assert openai_call.result.completion is openai_call.result.body


def test_a_results_raw_bytes_are_its_body(openai_call: OpenAICall) -> None:
    assert json.loads(openai_call.result.raw) == openai_call.result.body


def test_openai_is_asked_at_its_chat_path(openai_call: OpenAICall) -> None:
    assert openai_call.seen.path == "/v1/chat/completions"


def test_openai_is_asked_for_the_callers_model(openai_call: OpenAICall) -> None:
    assert openai_call.seen.body["model"] == "gpt-4.1"


def test_openai_gets_the_key_as_a_bearer(openai_call: OpenAICall) -> None:
    assert openai_call.seen.headers["authorization"] == f"Bearer {KEY}"


def test_the_client_repr_hides_the_key(openai_call: OpenAICall) -> None:
    assert KEY not in openai_call.client_repr


# --- retries -----------------------------------------------------------------------------------------------


def after_429(env: FakeProvider) -> tuple[ProviderResult, Sleeps]:
    sleeps = Sleeps()
    env.push(Reply(429, {"error": "slow down"}, headers={"Retry-After": "0.7"}), Reply(body=completion_body()))
    return OpenAIClient(FAST, sleep=sleeps).chat("m", chat()), sleeps


def test_a_429_is_retried_once_to_success(env: FakeProvider) -> None:
    assert (after_429(env)[0].call.attempts, len(env.seen)) == (2, 2)


def test_429_honours_retry_after(env: FakeProvider) -> None:
    assert after_429(env)[1] == [0.7]


def test_retry_after_is_capped(env: FakeProvider) -> None:
    sleeps = Sleeps()
    client = OpenAIClient(FAST.model_copy(update={"retry_after_cap": 0.25}), sleep=sleeps)
    env.push(Reply(429, {}, headers={"Retry-After": "3600"}), Reply(body=completion_body()))
    client.chat("m", chat())
    assert sleeps == [0.25]


def after_500(env: FakeProvider) -> tuple[ProviderResult, Sleeps]:
    sleeps = Sleeps()
    env.push(Reply(500, {"error": "boom"}), Reply(body=completion_body()))
    return OpenAIClient(FAST, sleep=sleeps).chat("m", chat()), sleeps


def test_a_500_is_retried_to_success(env: FakeProvider) -> None:
    assert after_500(env)[0].call.attempts == 2


def test_a_500_waits_once_before_its_retry(env: FakeProvider) -> None:
    assert len(after_500(env)[1]) == 1


def exhausted_5xx(env: FakeProvider) -> tuple[ProviderError, Sleeps]:
    sleeps = Sleeps()
    env.push(*[Reply(503, {"error": "down"})] * 3)
    return failure(lambda: OpenAIClient(FAST, sleep=sleeps).chat("m", chat())), sleeps


def test_5xx_exhausts_retries_into_a_typed_error(env: FakeProvider) -> None:
    err, _ = exhausted_5xx(env)
    assert (err.kind, err.status, err.retryable, err.attempts) == ("http_status", 503, True, 3)


def test_5xx_is_tried_max_attempts_times_with_a_wait_between(env: FakeProvider) -> None:
    _, sleeps = exhausted_5xx(env)
    assert (len(env.seen), len(sleeps)) == (3, 2)


def test_a_provider_errors_record_keeps_its_attempts(env: FakeProvider) -> None:
    assert exhausted_5xx(env)[0].record().attempts == 3


def other_4xx(env: FakeProvider, status: int) -> tuple[ProviderError, Sleeps]:
    sleeps = Sleeps()
    env.push(Reply(status, {"error": {"message": "nope"}}), Reply(body=completion_body()))
    return failure(lambda: OpenAIClient(FAST, sleep=sleeps).chat("m", chat())), sleeps


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_final_errors(env: FakeProvider, status: int) -> None:
    err, _ = other_4xx(env, status)
    assert (err.status, err.retryable, err.attempts) == (status, False, 1)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_no_retry_on_other_4xx(env: FakeProvider, status: int) -> None:
    _, sleeps = other_4xx(env, status)
    assert (len(env.seen), sleeps) == (1, [])


def hung(env: FakeProvider) -> ProviderError:
    env.push(Reply(hang=True), Reply(hang=True))
    settings = ClientSettings(read_timeout=0.15, max_attempts=2)
    return failure(lambda: OpenAIClient(settings, sleep=Sleeps()).chat("m", chat()))


def test_a_hung_connection_times_out(env: FakeProvider) -> None:
    err = hung(env)
    assert (err.kind, err.status, err.attempts) == ("timeout", None, 2)


def test_a_hung_connection_is_retried(env: FakeProvider) -> None:
    hung(env)
    assert len(env.seen) == 2


def test_dropped_connection_is_retried(env: FakeProvider) -> None:
    env.push(Reply(drop=True), Reply(body=completion_body()))
    assert OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()).call.attempts == 2


def test_unreachable_endpoint_is_a_connection_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    err = failure(lambda: OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()))
    assert (err.kind, err.attempts) == ("connection", 3)


def test_malformed_json_is_retried_a_bounded_number_of_times(env: FakeProvider) -> None:
    env.push(*[Reply(malformed=True)] * 3)
    err = failure(lambda: OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()))
    assert (err.kind, err.status, err.attempts) == ("malformed", 200, 3)


def test_malformed_json_and_a_non_object_are_retried_to_success(env: FakeProvider) -> None:
    env.push(Reply(malformed=True), Reply(body="[1, 2]"), Reply(body=completion_body()))
    assert OpenAIClient(FAST, sleep=Sleeps()).chat("m", chat()).call.attempts == 3


# --- redaction ---------------------------------------------------------------------------------------------


def echoed_in_an_error(env: FakeProvider) -> ProviderError:
    env.push(Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}))
    return failure(lambda: OpenAIClient(FAST).chat("m", chat()))


def test_a_providers_error_message_reaches_the_error(env: FakeProvider) -> None:
    assert "Incorrect API key" in str(echoed_in_an_error(env))


def test_key_echoed_in_an_error_is_redacted_everywhere(env: FakeProvider) -> None:
    err = echoed_in_an_error(env)
    assert [t for t in (str(err), repr(err), err.message, err.record().model_dump_json()) if KEY in t] == []


def test_key_echoed_in_a_reply_is_redacted(env: FakeProvider) -> None:
    env.push(Reply(body={**completion_body(), "note": f"echo {KEY}"}))
    result = OpenAIClient(FAST).chat("m", chat())
    assert (KEY.encode() in result.raw, KEY in json.dumps(result.body)) == (False, False)


# --- an Anthropic tool round trip through chat completions -------------------------------------------------

SQL_TOOLS = [
    {
        "type": "function",
        "function": {"name": "run_sql", "description": "Run SQL", "parameters": _schema()},
    }
]


@dataclass(frozen=True)
class AnthropicRoundTrip:
    """A chat request with a system message and a tool, answered with text and a tool use; then the history with
    the tool's result, answered with text."""

    first_seen: Seen
    """The first Messages request the provider received."""
    first: ProviderResult
    """The first result."""
    second_seen: Seen
    """The second Messages request."""
    second: ProviderResult
    """The second result."""


@pytest.fixture(scope="module")
def anthropic_round_trip() -> AnthropicRoundTrip:
    tool_use: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "run_sql", "input": {"sql": "SELECT 1"}},
    ]
    first_reply = anthropic_message(tool_use, input_tokens=40, output_tokens=9, cache_read=25, stop_reason="tool_use")
    second_reply = anthropic_message([{"type": "text", "text": "Nobody."}])
    with provider(Reply(body=first_reply), Reply(body=second_reply)) as fake:
        client = AnthropicClient(FAST)
        system = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Who?"}]
        first = client.chat("claude-sonnet-4-6", {"messages": system, "tools": SQL_TOOLS})
        assert first.completion is not None
        history = [
            {"role": "user", "content": "Who?"},
            first.completion["choices"][0]["message"],
            {"role": "tool", "tool_call_id": "toolu_1", "content": "1"},
        ]
        second = client.chat("claude-sonnet-4-6", {"messages": history, "tools": SQL_TOOLS})
        return AnthropicRoundTrip(fake.seen[0], first, fake.seen[1], second)


def _first_choice(trip: AnthropicRoundTrip) -> Any:
    assert trip.first.completion is not None
    return trip.first.completion["choices"][0]


def test_anthropic_is_asked_at_its_messages_path(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.first_seen.path == "/v1/messages"


def test_anthropic_gets_its_key_and_api_version(anthropic_round_trip: AnthropicRoundTrip) -> None:
    headers = anthropic_round_trip.first_seen.headers
    assert (headers["x-api-key"], headers["anthropic-version"]) == (KEY + "-anthropic", "2023-06-01")


def test_a_system_message_becomes_the_system_text(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.first_seen.body["system"] == "Be terse."


def test_a_request_without_a_limit_gets_the_default_max_tokens(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.first_seen.body["max_tokens"] == tr.DEFAULT_MAX_TOKENS


def test_a_function_tool_becomes_an_anthropic_tool(anthropic_round_trip: AnthropicRoundTrip) -> None:
    tool = {"name": "run_sql", "description": "Run SQL", "input_schema": _schema()}
    assert anthropic_round_trip.first_seen.body["tools"] == [tool]


def test_a_tool_use_finishes_the_choice_with_tool_calls(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert _first_choice(anthropic_round_trip)["finish_reason"] == "tool_calls"


def test_the_text_before_a_tool_use_is_the_content(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert _first_choice(anthropic_round_trip)["message"]["content"] == "Let me look."


def test_a_tool_use_becomes_a_tool_call_with_its_id_and_arguments(anthropic_round_trip: AnthropicRoundTrip) -> None:
    call = _first_choice(anthropic_round_trip)["message"]["tool_calls"][0]
    assert (call["id"], json.loads(call["function"]["arguments"])) == ("toolu_1", {"sql": "SELECT 1"})


def test_anthropic_usage_counts_cache_reads_as_input(anthropic_round_trip: AnthropicRoundTrip) -> None:
    first = anthropic_round_trip.first
    assert first.call.usage is not None
    assert (first.call.usage.input_tokens, first.call.usage.output_tokens, first.call.usage.cached_tokens) == (
        65,
        9,
        25,
    )


def test_the_translated_completion_reports_the_same_prompt_tokens(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.first.completion is not None
    assert anthropic_round_trip.first.completion["usage"]["prompt_tokens"] == 65


def test_anthropic_result_names_the_model_that_served_it(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.first.call.returned_model == ANTHROPIC_MODEL


def test_the_history_reaches_anthropic_as_its_turns(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.second_seen.body["messages"] == [
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


def test_a_text_reply_becomes_an_assistant_message(anthropic_round_trip: AnthropicRoundTrip) -> None:
    assert anthropic_round_trip.second.completion is not None
    message = anthropic_round_trip.second.completion["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Nobody."}


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


TOOL_RESULTS_THEN_TEXT = {
    "messages": [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "2"}]},
        {"role": "user", "content": "and?"},
    ]
}


def test_tool_results_merge_into_one_user_turn_first() -> None:
    (turn,) = tr.chat_to_messages_request(TOOL_RESULTS_THEN_TEXT, "m")["messages"]
    assert [b["type"] for b in turn["content"]] == ["tool_result", "tool_result", "text"]


def test_a_tool_results_text_parts_become_its_text() -> None:
    (turn,) = tr.chat_to_messages_request(TOOL_RESULTS_THEN_TEXT, "m")["messages"]
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
