"""The fake provider against the real official clients: every protocol, streamed and not, its faults, and that
``fake.reported`` states exactly the usage the clients saw."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from fake_provider import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    FakeProvider,
    Reply,
    Reported,
    Seen,
    Stop,
    StreamError,
    TokenCount,
    ToolCall,
    Turn,
    Usage,
    openai_completion,
    total_usage,
)
from openai.types.chat import ChatCompletionChunk

USAGE = Usage(input_tokens=120, output_tokens=30, cached_tokens=40, reasoning_tokens=8, cache_write_tokens=20)
WEATHER = ToolCall("get_weather", {"city": "Paris", "days": [1, 2], "unit": "celsius"})
TOOL_TURN = Turn(text="Let me check the weather.", tool_calls=[WEATHER], usage=USAGE)
ASK: Any = [{"role": "user", "content": "Weather in Paris?"}]  # typed loosely: both clients take it
ANTHROPIC_WIRE_USAGE = {
    "input_tokens": 60,
    "cache_creation_input_tokens": 20,
    "cache_read_input_tokens": 40,
    "cache_creation": {"ephemeral_5m_input_tokens": 20, "ephemeral_1h_input_tokens": 0},
    "output_tokens": 30,
    "service_tier": "standard",
    "output_tokens_details": {"thinking_tokens": 8},
}
RESPONSES_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    *["response.output_text.delta"] * 5,
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.output_item.added",
    *["response.function_call_arguments.delta"] * 8,
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
]
MESSAGES_EVENTS = [
    "message_start",
    "content_block_start",
    *["content_block_delta"] * 5,
    "content_block_stop",
    "content_block_start",
    *["content_block_delta"] * 9,
    "content_block_stop",
    "message_delta",
    "message_stop",
]


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def oai(fake: FakeProvider) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.openai_base, api_key="sk-fake", max_retries=0)


@pytest.fixture
def claude(fake: FakeProvider) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.anthropic_base, api_key="sk-ant-fake", max_retries=0)


def sse_lines(fake: FakeProvider, path: str, body: dict[str, object]) -> tuple[httpx.Response, list[str]]:
    """The raw answer to one streamed request, as its non-empty lines."""
    with httpx.stream("POST", fake.url + path, json=body) as response:
        return response, [line for line in response.iter_lines() if line]


# ---------------------------------------------------------------- chat completions


def test_chat_create_with_a_tool_call(fake: FakeProvider, oai: openai.OpenAI) -> None:
    fake.push(TOOL_TURN)
    completion = oai.chat.completions.create(model="gpt-4.1", messages=ASK)
    choice = completion.choices[0]
    assert (completion.id, completion.model, choice.finish_reason) == ("chatcmpl-fake1", OPENAI_MODEL, "tool_calls")
    assert choice.message.content == "Let me check the weather."
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (  # type: ignore[union-attr]
        "call_fake1_0",
        "get_weather",
        WEATHER.arguments,
    )
    assert completion.usage is not None and completion.usage.model_dump(exclude_none=True) == {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 40, "cache_write_tokens": 20, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": 8,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }
    assert fake.reported == [
        Reported("/v1/chat/completions", False, 200, OPENAI_MODEL, completion.usage.to_dict(mode="json"), USAGE, True)
    ]


@pytest.mark.parametrize("include_usage", [True, False])
def test_chat_stream_sends_usage_only_when_asked(fake: FakeProvider, oai: openai.OpenAI, include_usage: bool) -> None:
    fake.push(TOOL_TURN)
    options: Any = {"stream_options": {"include_usage": True}} if include_usage else {}
    chunks: list[ChatCompletionChunk] = list(
        oai.chat.completions.create(model="m", messages=ASK, stream=True, **options)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(
        (c.choices[0].delta.tool_calls or [])[0].function.arguments or ""  # type: ignore[union-attr]
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    opening = chunks[6].choices[0].delta.tool_calls[0]  # type: ignore[index]
    assert (text, json.loads(arguments)) == ("Let me check the weather.", WEATHER.arguments)
    assert (opening.index, opening.id, opening.function.name) == (0, "call_fake1_0", "get_weather")  # type: ignore[union-attr]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish == ["tool_calls"]
    if include_usage:
        assert len(chunks) == 1 + 5 + 1 + 8 + 1 + 1
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert [c.usage for c in chunks[:-1]] == [None] * (len(chunks) - 1)
        assert fake.reported[0].wire_usage == chunks[-1].usage.to_dict(mode="json")
        assert fake.reported[0].usage == USAGE
    else:
        assert len(chunks) == 1 + 5 + 1 + 8 + 1
        assert (fake.reported[0].wire_usage, fake.reported[0].usage) == (None, None)
    assert (fake.reported[0].stream, fake.reported[0].complete) == (True, True)


def test_chat_stream_wire_is_chunked_sse_ending_in_done(fake: FakeProvider) -> None:
    fake.push(Turn(text="Hi there", usage=Usage(3, 2)))
    response, lines = sse_lines(fake, "/v1/chat/completions", {"model": "m", "stream": True})
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["transfer-encoding"] == "chunked"
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    assert [json.loads(line[6:])["choices"][0]["delta"] for line in lines[:-1]] == [
        {"role": "assistant", "content": "", "refusal": None},
        {"content": "Hi"},
        {"content": " there"},
        {},
    ]
    assert "usage" not in json.loads(lines[0][6:])  # the real API leaves it out unless usage was asked for


def test_each_event_is_flushed_as_it_is_produced(fake: FakeProvider) -> None:
    fake.push(Turn(text="one two", delay_between=0.3))  # 4 events: 3 gaps of 0.3 s
    arrivals = []
    with httpx.stream("POST", fake.url + "/v1/chat/completions", json={"model": "m", "stream": True}) as response:
        for line in response.iter_lines():
            if line:
                arrivals.append(time.monotonic())
    assert len(arrivals) == 5
    assert arrivals[3] - arrivals[0] >= 0.85  # buffered events would all arrive together at the end


def test_async_client_streams_chat(fake: FakeProvider) -> None:
    fake.push(Turn(text="async works", usage=Usage(5, 3)))

    async def run() -> str:
        client = openai.AsyncOpenAI(base_url=fake.openai_base, api_key="sk-fake", max_retries=0)
        stream = await client.chat.completions.create(model="m", messages=ASK, stream=True)
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
        await client.close()
        return text

    assert asyncio.run(run()) == "async works"


# ---------------------------------------------------------------- responses


def test_responses_create_with_a_tool_call(fake: FakeProvider, oai: openai.OpenAI) -> None:
    fake.push(TOOL_TURN)
    response = oai.responses.create(model="gpt-4.1", input="Weather in Paris?", instructions="Be brief.")
    assert (response.id, response.status, response.model, response.instructions) == (
        "resp_fake1",
        "completed",
        OPENAI_MODEL,
        "Be brief.",
    )
    assert response.output_text == "Let me check the weather."
    call = response.output[1]
    assert call.type == "function_call"
    assert (call.call_id, call.name, json.loads(call.arguments)) == ("call_fake1_0", "get_weather", WEATHER.arguments)
    assert response.usage is not None and response.usage.to_dict(mode="json") == {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 40, "cache_write_tokens": 20},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 8},
        "total_tokens": 150,
    }
    assert fake.reported == [
        Reported("/v1/responses", False, 200, OPENAI_MODEL, response.usage.to_dict(mode="json"), USAGE, True)
    ]


def test_responses_stream_events_in_order_with_sequence_numbers(fake: FakeProvider, oai: openai.OpenAI) -> None:
    fake.push(TOOL_TURN)
    with oai.responses.stream(model="gpt-4.1", input="Weather in Paris?") as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert [e.type for e in events] == RESPONSES_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(RESPONSES_EVENTS)))
    assert final.output_text == "Let me check the weather."
    assert final.output[1].type == "function_call"
    assert json.loads(final.output[1].arguments) == WEATHER.arguments
    assert final.usage is not None
    assert fake.reported[0].wire_usage == final.usage.to_dict(mode="json")
    assert (fake.reported[0].usage, fake.reported[0].stream, fake.reported[0].complete) == (USAGE, True, True)


# ---------------------------------------------------------------- messages


def test_messages_create_with_a_tool_call(fake: FakeProvider, claude: anthropic.Anthropic) -> None:
    fake.push(TOOL_TURN)
    message = claude.messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=ASK)
    assert (message.id, message.model, message.stop_reason) == ("msg_fake1", ANTHROPIC_MODEL, "tool_use")
    text, tool = message.content
    assert text.type == "text" and text.text == "Let me check the weather."
    assert tool.type == "tool_use" and (tool.id, tool.name, tool.input) == (
        "toolu_fake1_0",
        "get_weather",
        WEATHER.arguments,
    )
    assert message.usage.to_dict(mode="json") == ANTHROPIC_WIRE_USAGE
    assert fake.reported == [Reported("/v1/messages", False, 200, ANTHROPIC_MODEL, ANTHROPIC_WIRE_USAGE, USAGE, True)]


def test_messages_stream_final_message(fake: FakeProvider, claude: anthropic.Anthropic) -> None:
    fake.push(TOOL_TURN)
    with claude.messages.stream(model="claude-sonnet-4-6", max_tokens=100, messages=ASK) as stream:
        events = [e.type for e in stream]
        message = stream.get_final_message()
    raw = [e for e in events if e not in ("text", "input_json")]  # the helper's own derived events
    assert raw == MESSAGES_EVENTS
    assert message.content[0].type == "text" and message.content[0].text == "Let me check the weather."
    assert message.content[1].type == "tool_use" and message.content[1].input == WEATHER.arguments
    assert message.stop_reason == "tool_use"
    assert message.usage.to_dict(mode="json") == ANTHROPIC_WIRE_USAGE
    assert fake.reported[0].wire_usage == ANTHROPIC_WIRE_USAGE
    assert (fake.reported[0].usage, fake.reported[0].complete) == (USAGE, True)


def test_messages_stream_wire_has_one_ping_and_an_empty_first_json_piece(fake: FakeProvider) -> None:
    fake.push(TOOL_TURN)
    _, lines = sse_lines(fake, "/v1/messages?beta=true", {"model": "m", "stream": True})
    names = [line[7:] for line in lines if line.startswith("event: ")]
    assert names == [*MESSAGES_EVENTS[:2], "ping", *MESSAGES_EVENTS[2:]]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    assert [d["type"] for d in data] == names
    assert data[0]["message"]["usage"]["output_tokens"] == 1  # what the API states before generating
    assert data[10]["delta"] == {"type": "input_json_delta", "partial_json": ""}
    assert data[-2]["usage"] == {"output_tokens": 30, "output_tokens_details": {"thinking_tokens": 8}}
    assert fake.seen[0].path == "/v1/messages?beta=true"


def test_count_tokens_scripted_by_path_and_defaulted(fake: FakeProvider, claude: anthropic.Anthropic) -> None:
    fake.push(TOOL_TURN)  # unscoped answers are not spent on token counts
    fake.push(TokenCount(4242), path="/v1/messages/count_tokens")
    counted = claude.messages.count_tokens(model="claude-sonnet-4-6", messages=ASK)
    default = claude.messages.count_tokens(model="claude-sonnet-4-6", messages=ASK)
    assert (counted.input_tokens, default.input_tokens) == (4242, 13)
    assert [(r.path, r.token_count, r.usage) for r in fake.reported] == [
        ("/v1/messages/count_tokens", 4242, None),
        ("/v1/messages/count_tokens", 13, None),
    ]
    message = claude.messages.create(model="claude-sonnet-4-6", max_tokens=10, messages=ASK)
    assert message.stop_reason == "tool_use"


def test_models_are_listed_in_each_clients_shape(
    fake: FakeProvider, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    fake.models = ["gpt-4.1-2025-04-14", "claude-sonnet-4-6"]
    assert [m.id for m in oai.models.list()] == fake.models
    assert [m.id for m in claude.models.list()] == fake.models
    assert [r.path for r in fake.reported] == ["/v1/models", "/v1/models"]


# ---------------------------------------------------------------- stop reasons


@pytest.mark.parametrize(
    ("stop", "chat", "messages", "responses"),
    [("end", "stop", "end_turn", "completed"), ("max_tokens", "length", "max_tokens", "incomplete")],
)
def test_stop_reasons_in_each_protocol(
    fake: FakeProvider,
    oai: openai.OpenAI,
    claude: anthropic.Anthropic,
    stop: Stop,
    chat: str,
    messages: str,
    responses: str,
) -> None:
    turn = Turn(text="cut short", stop=stop)
    fake.push(turn, turn, turn)
    assert oai.chat.completions.create(model="m", messages=ASK).choices[0].finish_reason == chat
    assert claude.messages.create(model="m", max_tokens=5, messages=ASK).stop_reason == messages
    events = list(oai.responses.create(model="m", input="x", stream=True))
    last = events[-1]
    assert last.type == f"response.{responses}"
    assert last.response.status == responses  # type: ignore[union-attr]
    incomplete = {"reason": "max_output_tokens"} if responses == "incomplete" else None
    details = last.response.incomplete_details  # type: ignore[union-attr]
    assert (details.to_dict() if details else None) == incomplete


# ---------------------------------------------------------------- faults


def test_cut_after_ends_each_stream_early(fake: FakeProvider, oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    fake.push(
        Turn(text="a b c", cut_after=2),
        Turn(text="a b c", cut_after=3),
        Turn(text="a b c", usage=Usage(50, 9), cut_after=3),
    )
    received = []
    with pytest.raises(openai.APIConnectionError):
        for chunk in oai.chat.completions.create(model="m", messages=ASK, stream=True):
            received.append(chunk)
    assert len(received) == 2
    events = []
    with pytest.raises(openai.APIConnectionError):
        for event in oai.responses.create(model="m", input="x", stream=True):
            events.append(event.type)
    assert events == ["response.created", "response.in_progress", "response.output_item.added"]
    with (
        pytest.raises(Exception, match="incomplete chunked read") as cut,
        claude.messages.stream(
            model="m",
            max_tokens=5,
            messages=ASK,
        ) as stream,
    ):
        stream.get_final_message()
    assert type(cut.value).__name__ == "RemoteProtocolError"  # the client's transport error, unwrapped
    assert [(r.complete, r.usage) for r in fake.reported] == [
        (False, None),
        (False, None),
        (False, Usage(50, 1)),  # message_start went out: input tokens and the API's first output count
    ]


def test_in_stream_error_event(fake: FakeProvider, oai: openai.OpenAI, claude: anthropic.Anthropic) -> None:
    error = StreamError(after=2, type="overloaded_error", message="Overloaded")
    fake.push(Turn(error=error), Turn(error=error), Turn(error=error))
    with (
        pytest.raises(anthropic.APIStatusError) as failure,
        claude.messages.stream(model="m", max_tokens=5, messages=ASK) as stream,
    ):
        stream.get_final_message()
    assert failure.value.body == {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(openai.APIError, match="Overloaded"):
        list(oai.chat.completions.create(model="m", messages=ASK, stream=True))
    events = list(oai.responses.create(model="m", input="x", stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error"]
    assert (events[2].code, events[2].message, events[2].sequence_number) == ("overloaded_error", "Overloaded", 2)  # type: ignore[union-attr]
    assert [r.complete for r in fake.reported] == [False, False, False]


def test_a_reply_still_answers_stream_requests_with_an_error(fake: FakeProvider, claude: anthropic.Anthropic) -> None:
    fake.push(
        Reply(429, {"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}, {"retry-after": "7"})
    )
    with (
        pytest.raises(anthropic.RateLimitError) as failure,
        claude.messages.stream(model="m", max_tokens=5, messages=ASK) as stream,
    ):
        stream.get_final_message()
    assert failure.value.response.headers["retry-after"] == "7"
    assert fake.reported == [Reported("/v1/messages", True, 429, complete=True)]


def test_hung_and_dropped_requests_are_not_reported(fake: FakeProvider, oai: openai.OpenAI) -> None:
    fake.push(Reply(drop=True))
    with pytest.raises(openai.APIConnectionError):
        oai.chat.completions.create(model="m", messages=ASK)
    assert (len(fake.seen), fake.reported) == (1, [])


# ---------------------------------------------------------------- responder, defaults, totals


def test_responder_answers_what_the_script_does_not(fake: FakeProvider, claude: anthropic.Anthropic) -> None:
    asked: list[str] = []

    def side_requests(seen: Seen) -> Turn | None:
        asked.append(seen.body["model"])
        return Turn(text="side answer", usage=Usage(7, 2)) if seen.body["model"] == "claude-haiku" else None

    fake.responder = side_requests
    fake.push(Turn(text="scripted"))
    first = claude.messages.create(model="claude-haiku", max_tokens=5, messages=ASK)
    second = claude.messages.create(model="claude-haiku", max_tokens=5, messages=ASK)
    third = claude.messages.create(model="claude-opus", max_tokens=5, messages=ASK)
    assert [m.content[0].text for m in (first, second, third)] == ["scripted", "side answer", "ok"]  # type: ignore[union-attr]
    assert asked == ["claude-haiku", "claude-opus"]  # the script came first
    assert [r.usage for r in fake.reported] == [Usage(11, 7), Usage(7, 2), Usage(13, 5)]


def test_canned_answers_are_unchanged_without_a_script(fake: FakeProvider) -> None:
    answer = httpx.post(fake.openai_base + "/chat/completions", json={"model": "m"})
    assert answer.json() == openai_completion()
    streamed = httpx.post(fake.openai_base + "/responses", json={"model": "m", "stream": True})
    assert streamed.text.splitlines()[-2].startswith('data: {"response":{"id":"resp_fake2"')
    assert [r.usage for r in fake.reported] == [Usage(11, 7), Usage(11, 7)]


def test_reported_totals_equal_what_the_clients_saw(
    fake: FakeProvider, oai: openai.OpenAI, claude: anthropic.Anthropic
) -> None:
    turns = [
        Turn(text=f"turn {i}", usage=Usage(100 + i, 10 + i, cached_tokens=i, reasoning_tokens=i)) for i in range(6)
    ]
    fake.push(*turns)
    seen = Usage(0, 0)
    chat = oai.chat.completions.create(model="m", messages=ASK).usage
    assert chat is not None
    seen += Usage(chat.prompt_tokens, chat.completion_tokens)
    chunks = list(
        oai.chat.completions.create(model="m", messages=ASK, stream=True, stream_options={"include_usage": True})
    )
    assert chunks[-1].usage is not None
    seen += Usage(chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens)
    for stream in (False, True):
        if stream:
            with oai.responses.stream(model="m", input="x") as events:
                usage = events.get_final_response().usage
        else:
            usage = oai.responses.create(model="m", input="x").usage
        assert usage is not None
        seen += Usage(usage.input_tokens, usage.output_tokens)
    message = claude.messages.create(model="m", max_tokens=5, messages=ASK)
    with claude.messages.stream(model="m", max_tokens=5, messages=ASK) as events:
        streamed = events.get_final_message()
    for m in (message, streamed):
        seen += Usage(m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0), m.usage.output_tokens)
    total = total_usage(fake.reported)
    assert (total.input_tokens, total.output_tokens) == (seen.input_tokens, seen.output_tokens) == (615, 75)
    assert total == Usage(615, 75, cached_tokens=15, reasoning_tokens=15)
