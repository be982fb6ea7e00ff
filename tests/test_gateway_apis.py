"""The gateway's three agent APIs through the official SDKs, streamed and not, against a scripted provider.

Every pair of agent API (chat completions, Responses, Messages) and candidate provider (OpenAI, Anthropic) is
driven by the real ``openai`` and ``anthropic`` clients; the fake provider renders each scripted turn from the
SDKs' own types, and reports what it put on the wire, so the gateway's accounting is compared with it exactly.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fake_provider import (
    FakeProvider,
    Reply,
    Reported,
    Scripted,
    Seen,
    StreamError,
    ToolCall,
    Turn,
    Usage,
    point_clients_at,
    total_usage,
)

from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway, SampleUsage

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
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls or []]
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
    return text, [(b.name, dict(b.input)) for b in message.content if b.type == "tool_use"]


#: Each agent API's step, given both SDK clients.
STEPS: dict[str, Callable[[openai.OpenAI, anthropic.Anthropic, bool, str], tuple[str, list[Any]]]] = {
    "chat": lambda oa, an, stream, model: chat_step(oa, stream, model),
    "responses": lambda oa, an, stream, model: responses_step(oa, stream, model),
    "messages": lambda oa, an, stream, model: messages_step(an, stream, model),
}


def step(gw: Gateway, api: str, stream: bool, token: str, model: str = "agent-picked-model") -> tuple[str, list[Any]]:
    return STEPS[api](*clients(gw, token), stream, model)


# --- two steps of the investigation, each agent API against each candidate provider, streamed and not -------

#: (agent API, candidate provider, the API the provider is spoken to in): passed through where the two match,
#: translated through chat completions otherwise.
ROUTES = [
    ("chat", "openai", "chat"),
    ("responses", "openai", "responses"),
    ("messages", "openai", "chat"),
    ("chat", "anthropic", "messages"),
    ("responses", "anthropic", "messages"),
    ("messages", "anthropic", "messages"),
]


@dataclass(frozen=True)
class Investigation:
    """Two steps of the investigation through one gateway: what the agent read, and what was counted and sent."""

    stream: bool
    """Whether the agent streamed both steps."""
    provider_api: str
    """The API the route should speak to the provider."""
    candidate_model: str
    """The candidate's model name, the one the provider must be asked for."""
    first: tuple[str, list[Any]]
    """The first step's text and tool calls, as the agent's SDK parsed them."""
    second: tuple[str, list[Any]]
    """The second step's, likewise."""
    usage: SampleUsage
    """What the gateway counted for the sample."""
    sent: Usage
    """The usage the fake provider put on the wire, summed."""
    asked_models: set[str]
    """Every model the fake provider was asked for."""
    reported_model: str | None
    """The model the fake provider said served the first step."""


@pytest.fixture(
    scope="module",
    params=[(route, stream) for route in ROUTES for stream in (False, True)],
    ids=lambda p: f"{p[0][0]}-to-{p[0][1]}-{'streamed' if p[1] else 'plain'}",
)
def investigation(request: pytest.FixtureRequest) -> Investigation:
    """Run once per route and streaming: each claim about it is its own test."""
    (api, provider, provider_api), stream = request.param
    with pytest.MonkeyPatch.context() as patch, FakeProvider() as fake:
        point_clients_at(patch, fake, KEY, KEY + "-anthropic")
        fake.push(*INVESTIGATION)
        with Gateway(CANDIDATES[provider], settings=SETTINGS) as gw:
            token = gw.issue_token("s")
            first = step(gw, api, stream, token, model="claude-opus-5-5")
            second = step(gw, api, stream, token, model="claude-haiku-4-5")
            usage = gw.revoke("s")
        return Investigation(
            stream=stream,
            provider_api=provider_api,
            candidate_model=gw.model,
            first=first,
            second=second,
            usage=usage,
            sent=total_usage(fake.reported),
            asked_models={seen.body["model"] for seen in fake.seen},
            reported_model=fake.reported[0].model,
        )


def test_the_agent_reads_the_first_steps_text_and_tool_call(investigation: Investigation) -> None:
    assert investigation.first == ("Checking the leavers.", [("run_sql", INVESTIGATION[0].tool_calls[0].arguments)])


def test_the_agent_reads_the_second_steps_text(investigation: Investigation) -> None:
    assert investigation.second == ("Two leavers can still sign in.", [])


def test_both_steps_count_as_requests(investigation: Investigation) -> None:
    assert investigation.usage.requests == 2


def test_the_input_tokens_counted_are_those_the_provider_reported(investigation: Investigation) -> None:
    assert (investigation.usage.tokens.input_tokens, investigation.sent.input_tokens) == (2500, 2500)


def test_the_output_tokens_counted_are_those_the_provider_reported(investigation: Investigation) -> None:
    assert (investigation.usage.tokens.output_tokens, investigation.sent.output_tokens) == (65, 65)


def test_the_cached_tokens_counted_are_those_the_provider_reported(investigation: Investigation) -> None:
    assert (investigation.usage.tokens.cached_tokens, investigation.sent.cached_tokens) == (1000, 1000)


def test_the_reasoning_tokens_counted_are_those_the_provider_reported(investigation: Investigation) -> None:
    # OpenAI states reasoning_tokens, Anthropic thinking_tokens
    assert (investigation.usage.tokens.reasoning_tokens, investigation.sent.reasoning_tokens) == (12, 12)


def test_each_call_records_the_model_the_agent_asked_for(investigation: Investigation) -> None:
    assert [c.requested_model for c in investigation.usage.calls] == ["claude-opus-5-5", "claude-haiku-4-5"]


def test_the_provider_is_asked_for_the_candidate_whatever_the_agent_asked(investigation: Investigation) -> None:
    assert investigation.asked_models == {investigation.candidate_model}


def test_the_provider_is_spoken_to_in_its_own_api(investigation: Investigation) -> None:
    assert [c.provider_api for c in investigation.usage.calls] == [investigation.provider_api] * 2


def test_every_call_ends_ok(investigation: Investigation) -> None:
    assert [(c.outcome, c.status) for c in investigation.usage.calls] == [("ok", 200)] * 2


def test_every_call_is_recorded_as_streamed_exactly_when_the_agent_streamed(investigation: Investigation) -> None:
    assert [c.stream for c in investigation.usage.calls] == [investigation.stream] * 2


def test_a_call_has_a_time_to_first_token_exactly_when_streamed(investigation: Investigation) -> None:
    assert [c.ttft_s is not None for c in investigation.usage.calls] == [investigation.stream] * 2


def test_the_sample_records_the_model_the_provider_said_served_it(investigation: Investigation) -> None:
    assert investigation.usage.model_ids == [investigation.reported_model]


def test_no_call_is_left_in_flight(investigation: Investigation) -> None:
    assert investigation.usage.in_flight == 0


def test_the_sample_records_no_provider_error(investigation: Investigation) -> None:
    assert investigation.usage.errors == []


# --- one scene per claim group: a gateway, a scripted provider, and one agent's doing, run once per module -------


@dataclass(frozen=True)
class Scene:
    """What one agent did through a gateway to a scripted provider, and what was counted and sent."""

    outcome: Any
    """What the agent's doing returned, or the exception it raised."""
    usage: SampleUsage
    """What the gateway counted for the sample, once revoked."""
    seen: list[Seen]
    """The requests the fake provider received."""
    reported: list[Reported]
    """What the fake provider answered."""
    sleeps: list[float]
    """The waits between the gateway's retries."""
    model: str
    """The candidate's model name."""


GROQ_CANDIDATE = "groq/llama-3.3-70b"  # speaks chat completions only: a Responses request is translated


def play(candidate: str, agent: Callable[[Gateway, str], Any], *script: Scripted, **gateway: Any) -> Scene:
    """Run ``agent`` (given the gateway and a live token) through a gateway for ``candidate`` to a fresh fake
    provider answering ``script``; ``gateway`` holds extra :class:`Gateway` arguments."""
    sleeps: list[float] = []
    with pytest.MonkeyPatch.context() as patch, FakeProvider() as fake:
        point_clients_at(patch, fake, KEY, KEY + "-anthropic")
        patch.setenv("GROQ_API_KEY", KEY + "-groq")
        patch.setenv("GROQ_BASE_URL", fake.openai_base)
        fake.push(*script)
        with Gateway(candidate, settings=SETTINGS, sleep=sleeps.append, **gateway) as gw:
            token = gw.issue_token("s")
            try:
                outcome = agent(gw, token)
            except Exception as exc:  # the agent's error is the outcome some claims are about
                outcome = exc
            usage = gw.revoke("s")
        return Scene(outcome, usage, fake.seen, fake.reported, sleeps, gw.model)


#: A module-scoped fixture run once per candidate provider (its param is the provider name).
PER_PROVIDER = pytest.fixture(scope="module", params=sorted(CANDIDATES))
QUESTION: Any = [{"role": "user", "content": "q"}]  # Any: the SDKs type messages as TypedDicts


# A chat stream whose agent did not ask for usage: still counted.


def _chat_stream_without_usage(gw: Gateway, token: str) -> list[Any]:
    oa, _ = clients(gw, token)
    return list(oa.chat.completions.create(model="m", messages=QUESTION, stream=True))


@PER_PROVIDER
def unasked_usage(request: pytest.FixtureRequest) -> Scene:
    turn = Turn(text="ok", usage=Usage(input_tokens=50, output_tokens=5))
    return play(CANDIDATES[request.param], _chat_stream_without_usage, turn)


def test_a_chat_stream_without_include_usage_gives_no_usage_chunk(unasked_usage: Scene) -> None:
    assert [bool(chunk.choices) for chunk in unasked_usage.outcome] == [True] * len(unasked_usage.outcome)


def test_a_chat_stream_without_include_usage_gives_the_whole_text(unasked_usage: Scene) -> None:
    assert "".join(c.choices[0].delta.content or "" for c in unasked_usage.outcome) == "ok"


def test_a_chat_stream_without_include_usage_is_still_counted(unasked_usage: Scene) -> None:
    assert (unasked_usage.usage.tokens.input_tokens, unasked_usage.usage.tokens.output_tokens) == (50, 5)


@pytest.mark.parametrize("unasked_usage", ["openai"], indirect=True)
def test_the_gateway_asks_a_chat_provider_for_usage_on_the_agents_behalf(unasked_usage: Scene) -> None:
    assert unasked_usage.seen[-1].body["stream_options"] == {"include_usage": True}


# A stream the provider cuts.


def _messages_stream(gw: Gateway, token: str, max_tokens: int = 100) -> Any:
    _, an = clients(gw, token)
    request: Any = {"model": "m", "max_tokens": max_tokens, "messages": QUESTION}
    with an.messages.stream(**request) as events:
        return events.get_final_message()


@PER_PROVIDER
def cut_stream(request: pytest.FixtureRequest) -> Scene:
    turn = Turn(text="a long answer " * 20, usage=Usage(input_tokens=700, output_tokens=90), cut_after=4)
    return play(CANDIDATES[request.param], _messages_stream, turn)


def test_a_stream_cut_by_the_provider_fails_the_agents_read(cut_stream: Scene) -> None:
    assert isinstance(cut_stream.outcome, anthropic.APIError | httpx.HTTPError)


def test_a_stream_cut_by_the_provider_is_recorded_as_cut(cut_stream: Scene) -> None:
    assert [(c.outcome, c.api) for c in cut_stream.usage.calls] == [("stream_cut", "messages")]


def test_a_stream_cut_by_the_provider_still_counts_as_a_request(cut_stream: Scene) -> None:
    assert (cut_stream.usage.requests, cut_stream.usage.in_flight) == (1, 0)


def test_a_stream_cut_by_the_provider_is_explained(cut_stream: Scene) -> None:
    # aiohttp's own name for the cut
    assert [c.error for c in cut_stream.usage.calls] == ["the provider's stream broke: ClientPayloadError"]


def test_a_stream_cut_by_the_provider_is_a_stream_error_of_a_200_reply(cut_stream: Scene) -> None:
    assert [(e.kind, e.status) for e in cut_stream.usage.errors] == [("stream", 200)]


@pytest.mark.parametrize("cut_stream", ["anthropic"], indirect=True)
def test_a_cut_anthropic_stream_counts_the_input_its_message_start_said(cut_stream: Scene) -> None:
    assert cut_stream.usage.tokens.input_tokens == 700
    assert cut_stream.usage.calls[0].usage is not None and cut_stream.usage.calls[0].usage.input_tokens == 700


# Anthropic's `event: error`, mid-stream, to a chat agent.


@pytest.fixture(scope="module")
def error_event() -> Scene:
    return play(CANDIDATES["anthropic"], _chat_stream_without_usage, Turn(text="partial", error=StreamError(after=3)))


def test_an_error_event_in_the_stream_reaches_the_agent_as_an_api_error(error_event: Scene) -> None:
    assert isinstance(error_event.outcome, openai.APIError) and "Overloaded" in str(error_event.outcome)


def test_an_error_event_in_the_stream_is_recorded_as_a_cut_saying_why(error_event: Scene) -> None:
    assert [(c.outcome, "Overloaded" in (c.error or "")) for c in error_event.usage.calls] == [("stream_cut", True)]


# A stream the agent abandons after its first words.


def _abandoned_stream(gw: Gateway, token: str) -> None:
    oa, _ = clients(gw, token)
    stream = oa.chat.completions.create(model="m", messages=QUESTION, stream=True)
    for chunk in stream:  # the first words, then the agent hangs up
        if chunk.choices and chunk.choices[0].delta.content:
            break
    stream.close()


@PER_PROVIDER
def abandoned(request: pytest.FixtureRequest) -> Scene:
    turn = Turn(text="word " * 50, usage=Usage(input_tokens=300, output_tokens=60), delay_between=0.05)
    return play(CANDIDATES[request.param], _abandoned_stream, turn)


def test_a_stream_the_agent_abandons_is_recorded_as_its_disconnect(abandoned: Scene) -> None:
    assert [c.outcome for c in abandoned.usage.calls] == ["agent_disconnected"]


def test_a_stream_the_agent_abandons_is_counted(abandoned: Scene) -> None:
    assert (abandoned.usage.requests, abandoned.usage.in_flight) == (1, 0)


def test_a_stream_the_agent_abandons_is_no_provider_error(abandoned: Scene) -> None:
    assert abandoned.usage.errors == []


def test_a_stream_the_agent_abandons_is_explained(abandoned: Scene) -> None:
    assert [c.error for c in abandoned.usage.calls] == ["the agent closed the stream before its end"]


def test_a_stream_the_agent_abandons_keeps_its_time_to_first_token(abandoned: Scene) -> None:
    assert [c.ttft_s is not None for c in abandoned.usage.calls] == [True]


# A 429 before a stream's first byte.


def _streamed_messages_step(gw: Gateway, token: str) -> tuple[str, list[Any]]:
    return step(gw, "messages", True, token)


@PER_PROVIDER
def throttled(request: pytest.FixtureRequest) -> Scene:
    script = (Reply(429, {"error": {"message": "slow down"}}, headers={"retry-after": "0.25"}), Turn(text="fine"))
    return play(CANDIDATES[request.param], _streamed_messages_step, *script)


def test_a_429_on_a_stream_is_retried_to_the_agents_answer(throttled: Scene) -> None:
    assert throttled.outcome[0] == "fine"


def test_a_429_on_a_stream_takes_a_second_attempt(throttled: Scene) -> None:
    assert [(c.outcome, c.attempts) for c in throttled.usage.calls] == [("ok", 2)]


def test_a_429_on_a_stream_waits_as_long_as_retry_after_says(throttled: Scene) -> None:
    assert throttled.sleeps == [0.25]


# A provider that keeps failing.


@PER_PROVIDER
def provider_down(request: pytest.FixtureRequest) -> Scene:
    script = [Reply(503, {"error": {"message": "down"}}) for _ in range(3)]
    return play(CANDIDATES[request.param], lambda gw, token: _messages_stream(gw, token, max_tokens=10), *script)


def test_a_failing_provider_gives_the_agent_a_502(provider_down: Scene) -> None:
    assert isinstance(provider_down.outcome, anthropic.APIStatusError) and provider_down.outcome.status_code == 502


def test_a_failing_provider_is_named_as_the_cause_to_the_agent(provider_down: Scene) -> None:
    assert "the candidate model failed" in str(provider_down.outcome)


def test_a_failing_provider_gives_the_agent_an_error_type_of_its_api(provider_down: Scene) -> None:
    assert provider_down.outcome.body["error"]["type"] == "api_error"


def test_a_failing_provider_is_recorded_with_its_status_and_attempts(provider_down: Scene) -> None:
    assert [(e.kind, e.status, e.attempts) for e in provider_down.usage.errors] == [("http_status", 503, 3)]


# A token the gateway did not issue, in each API.


def _foreign_token_in_each_api(gw: Gateway, token: str) -> list[Exception | None]:
    oa, an = clients(gw, "not-a-gateway-token")
    calls: list[Callable[[], object]] = [
        lambda: oa.chat.completions.create(model="m", messages=QUESTION),
        lambda: oa.responses.create(model="m", input="q"),
        lambda: an.messages.create(model="m", max_tokens=5, messages=QUESTION),
    ]
    refusals: list[Exception | None] = []
    for call in calls:
        try:
            call()
            refusals.append(None)
        except Exception as exc:  # the refusal is the claim
            refusals.append(exc)
    return refusals


@PER_PROVIDER
def foreign_token(request: pytest.FixtureRequest) -> Scene:
    return play(CANDIDATES[request.param], _foreign_token_in_each_api)


#: Where each API's refusal of a foreign token stands in the scene's outcome, and the SDK error it must be.
FOREIGN_REFUSALS = [
    (0, openai.AuthenticationError),
    (1, openai.AuthenticationError),
    (2, anthropic.AuthenticationError),
]


@pytest.mark.parametrize(("api", "error"), FOREIGN_REFUSALS, ids=["chat", "responses", "messages"])
def test_a_foreign_token_gets_401_in_each_api(foreign_token: Scene, api: int, error: type[Exception]) -> None:
    assert isinstance(foreign_token.outcome[api], error)


def test_a_foreign_token_gets_messages_own_authentication_error_type(foreign_token: Scene) -> None:
    assert foreign_token.outcome[2].body["error"]["type"] == "authentication_error"


def test_a_foreign_token_reaches_no_provider(foreign_token: Scene) -> None:
    assert foreign_token.seen == []


def test_a_foreign_token_costs_the_sample_nothing(foreign_token: Scene) -> None:
    assert foreign_token.usage.requests == 0


# The token as Anthropic's x-api-key, and as a bearer.


def _as_x_api_key_then_as_bearer(gw: Gateway, token: str) -> list[object]:
    _, an = clients(gw, token)
    bearer = anthropic.Anthropic(base_url=str(an.base_url), auth_token=token, max_retries=0)
    answers: list[object] = []
    for client in (an, bearer):
        try:
            answers.append(client.messages.create(model="m", max_tokens=5, messages=QUESTION))
        except Exception as exc:  # a refusal is what the claims rule out
            answers.append(exc)
    return answers


@PER_PROVIDER
def both_auth_ways(request: pytest.FixtureRequest) -> Scene:
    return play(CANDIDATES[request.param], _as_x_api_key_then_as_bearer)


@pytest.mark.parametrize("way", [0, 1], ids=["x-api-key", "bearer"])
def test_the_token_is_accepted_as_x_api_key_and_as_a_bearer(both_auth_ways: Scene, way: int) -> None:
    assert isinstance(both_auth_ways.outcome[way], anthropic.types.Message)


def test_a_request_by_either_auth_way_is_counted(both_auth_ways: Scene) -> None:
    assert both_auth_ways.usage.requests == 2


# Huge and malformed requests to a chat-only provider: refused clearly, and the gateway stays up.


def _huge_then_malformed_then_fine(gw: Gateway, token: str) -> list[Any]:
    oa, an = clients(gw, token)
    calls: list[Callable[[], object]] = [
        lambda: oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "x" * 100_000}]),
        lambda: an.messages.create(model="m", max_tokens=5, messages="not a list"),  # type: ignore[arg-type]
        lambda: oa.responses.create(model="m", input="q", previous_response_id="resp_1"),
        lambda: oa.chat.completions.create(model="m", messages=QUESTION),
    ]
    answers: list[Any] = []
    for call in calls:
        try:
            answers.append(call())
        except Exception as exc:  # the refusal is the claim
            answers.append(exc)
    return answers


@pytest.fixture(scope="module")
def bad_requests() -> Scene:
    return play(GROQ_CANDIDATE, _huge_then_malformed_then_fine, max_body_bytes=64 * 1024)


def test_a_huge_request_gets_413(bad_requests: Scene) -> None:
    assert isinstance(bad_requests.outcome[0], openai.APIStatusError) and bad_requests.outcome[0].status_code == 413


def test_a_huge_request_is_told_it_is_too_large(bad_requests: Scene) -> None:
    assert "too large" in str(bad_requests.outcome[0])


def test_malformed_messages_get_a_400_naming_them(bad_requests: Scene) -> None:
    assert isinstance(bad_requests.outcome[1], anthropic.BadRequestError) and "messages" in str(bad_requests.outcome[1])


def test_a_request_needing_stored_state_gets_a_400_naming_it(bad_requests: Scene) -> None:
    refusal = bad_requests.outcome[2]
    assert isinstance(refusal, openai.BadRequestError) and "previous_response_id" in str(refusal)


def test_the_gateway_answers_after_bad_requests(bad_requests: Scene) -> None:
    assert bad_requests.outcome[3].choices


def test_only_the_good_and_the_translated_requests_are_recorded(bad_requests: Scene) -> None:
    assert [c.outcome for c in bad_requests.usage.calls] == ["refused", "ok"]


def test_a_refused_request_is_not_a_request(bad_requests: Scene) -> None:
    assert bad_requests.usage.requests == 1


def test_only_the_good_request_reaches_the_provider_with_its_key(bad_requests: Scene) -> None:
    assert [seen.headers["authorization"] for seen in bad_requests.seen] == [f"Bearer {KEY}-groq"]


def test_the_good_request_asks_the_provider_for_the_candidate(bad_requests: Scene) -> None:
    assert [seen.body["model"] for seen in bad_requests.seen] == ["llama-3.3-70b"]


# Models and count_tokens.


def _model_listings(gw: Gateway, token: str) -> list[list[str]]:
    oa, an = clients(gw, token)
    return [[m.id for m in oa.models.list()], [m.id for m in an.models.list()]]


@PER_PROVIDER
def listings(request: pytest.FixtureRequest) -> Scene:
    return play(CANDIDATES[request.param], _model_listings)


@pytest.mark.parametrize("listing", [0, 1], ids=["openai-sdk", "anthropic-sdk"])
def test_the_model_list_holds_only_the_candidate(listings: Scene, listing: int) -> None:
    assert listings.outcome[listing] == [listings.model]


def _count_tokens(gw: Gateway, token: str) -> int:
    _, an = clients(gw, token)
    request: Any = {"model": "claude-opus-5-5", "messages": QUESTION}
    return an.messages.count_tokens(**request).input_tokens


@PER_PROVIDER
def counted(request: pytest.FixtureRequest) -> Scene:
    return play(CANDIDATES[request.param], _count_tokens)


@pytest.mark.parametrize("counted", ["anthropic"], indirect=True)
def test_count_tokens_gives_the_providers_count(counted: Scene) -> None:
    assert counted.outcome == counted.reported[-1].token_count


@pytest.mark.parametrize("counted", ["anthropic"], indirect=True)
def test_count_tokens_asks_the_provider_about_the_candidate(counted: Scene) -> None:
    assert counted.seen[-1].body["model"] == counted.model


@pytest.mark.parametrize("counted", ["anthropic"], indirect=True)
def test_count_tokens_is_recorded_as_a_call(counted: Scene) -> None:
    assert [c.api for c in counted.usage.calls] == ["count_tokens"]


@pytest.mark.parametrize("counted", ["openai"], indirect=True)
def test_count_tokens_needs_an_anthropic_candidate(counted: Scene) -> None:
    refusal = counted.outcome
    assert isinstance(refusal, anthropic.NotFoundError) and "count_tokens needs an Anthropic candidate" in str(refusal)


@pytest.mark.parametrize("counted", ["openai"], indirect=True)
def test_count_tokens_refused_is_not_recorded(counted: Scene) -> None:
    assert counted.usage.calls == []


def test_counting_tokens_is_not_a_step(counted: Scene) -> None:
    assert counted.usage.requests == 0
