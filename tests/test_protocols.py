"""API translation and reading replies: table-driven cases from tests/fixtures/protocols/<call>/<case>.json.

Each fixture holds ``args`` for one call and either its ``expected`` JSON output or the exact ``raises`` message of
the ``TranslationError``. Every translated output is also validated against the official SDKs' wire types, and the
translated streams are run through the SDKs' own stream accumulators, whose result must equal the non-streamed
translation of the same reply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic.types
import openai.types.chat
import openai.types.responses
import pydantic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import message_create_params
from openai import omit
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import completion_create_params

from runner.call import Usage
from runner.errors import GatewayError
from runner.gateway.protocols import (
    Api,
    ChatStreamToMessages,
    ChatStreamToResponses,
    MessagesStreamToChat,
    Reader,
    StreamEvent,
    StreamTranslator,
    TranslationError,
    chat_to_messages_request,
    chat_to_messages_response,
    chat_to_responses_response,
    messages_to_chat_request,
    messages_to_chat_response,
    reader_for,
    responses_to_chat_request,
)
from runner.gateway.protocols.chat import ChatReader

FIXTURES = Path(__file__).parent / "fixtures" / "protocols"

#: Calls whose output carries the translation time as ``created`` (Messages has no timestamp to carry over).
STAMPED = {"messages_to_chat_response", "messages_stream_to_chat"}


def run(call: str, args: dict[str, Any]) -> Any:
    """The JSON-shaped result of one fixture's call."""
    if call == "chat_to_messages_request":
        return chat_to_messages_request(args["chat"], args["model"])
    if call == "messages_to_chat_request":
        return messages_to_chat_request(args["req"], args["model"])
    if call == "messages_to_chat_response":
        return messages_to_chat_response(args["msg"])
    if call == "chat_to_messages_response":
        return chat_to_messages_response(args["chat"], args.get("model"))
    if call == "responses_to_chat_request":
        return responses_to_chat_request(args["req"], args["model"])
    if call == "chat_to_responses_response":
        return chat_to_responses_response(args["chat"], args["request"])
    if call == "messages_stream_to_chat":
        return messages_stream_to_chat(args["events"], args["include_usage"])
    if call == "chat_stream_to_messages":
        return _listed(chat_stream_to_messages(args["chunks"], args["model"]))
    if call == "chat_stream_to_responses":
        return _listed(chat_stream_to_responses(args["chunks"], args["request"], args["model"]))
    if call == "read_stream":
        api = args["api"]
        reader = ChatReader(usage_expected=args.get("usage_expected", True)) if api == "chat" else reader_for(api)
        for event, data in args["events"]:
            reader.feed(event, data)
        return {
            "usage": reader.usage.model_dump() if reader.usage is not None else None,
            "returned_model": reader.returned_model,
            "finished": reader.finished,
            "error": reader.error,
            "reply": reader.reply(complete=reader.finished).model_dump(mode="json"),
        }
    if call == "read_body":
        reader = read_body(args["api"], args["body"])
        return {
            "usage": reader.usage.model_dump() if reader.usage is not None else None,
            "model": reader.returned_model,
            "reply": reader.reply(complete=True).model_dump(mode="json"),
        }
    if call == "roundtrip_request":
        return chat_to_messages_request(messages_to_chat_request(args["req"], "pivot-model"), args["model"])
    if call == "roundtrip_response":
        return chat_to_messages_response(messages_to_chat_response(args["msg"]))
    raise AssertionError(f"no runner for fixture folder {call!r}")


def read_body(api: Api, body: dict[str, Any]) -> Reader:
    """A reader of ``api`` that read ``body``."""
    reader = reader_for(api)
    reader.read_body(body)
    return reader


def translated(translator: StreamTranslator, events: list[list[Any]] | list[StreamEvent]) -> list[StreamEvent]:
    """Every event ``translator`` gives for ``events`` (name and data), then its closing ones."""
    return [out for name, data in events for out in translator.feed(name, data)] + translator.close()


def unnamed(chunks: list[dict[str, Any]]) -> list[StreamEvent]:
    """Chat chunks as the events of a stream: chat completions' events have no name."""
    return [("", chunk) for chunk in chunks]


def messages_stream_to_chat(events: list[list[Any]], include_usage: bool) -> list[dict[str, Any]]:
    return [chunk for _, chunk in translated(MessagesStreamToChat(include_usage), events)]


def chat_stream_to_messages(chunks: list[dict[str, Any]], model: str) -> list[StreamEvent]:
    return translated(ChatStreamToMessages(model), unnamed(chunks))


def chat_stream_to_responses(chunks: list[dict[str, Any]], request: dict[str, Any], model: str) -> list[StreamEvent]:
    return translated(ChatStreamToResponses(request, model), unnamed(chunks))


def _listed(events: list[tuple[str, dict[str, Any]]]) -> list[list[Any]]:
    return [[name, data] for name, data in events]


def _fixtures() -> list[Path]:
    return sorted(FIXTURES.glob("*/*.json"))


def _load(path: Path) -> dict[str, Any]:
    fixture: dict[str, Any] = json.loads(path.read_text())
    assert fixture.keys() in ({"doc", "args", "expected"}, {"doc", "args", "raises"}), path
    return fixture


def _unstamp(call: str, result: Any, before: int, after: int) -> Any:
    """``result`` with each ``created`` translation time checked to lie in [before, after] and set to 0."""
    if call not in STAMPED:
        return result
    for obj in result if isinstance(result, list) else [result]:
        assert before <= obj["created"] <= after
        obj["created"] = 0
    return result


OUTPUT_CASES = [
    pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in _fixtures() if "raises" not in _load(path)
]
RAISING_CASES = [
    pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in _fixtures() if "raises" in _load(path)
]


@pytest.mark.parametrize("path", OUTPUT_CASES)
def test_each_call_gives_its_fixtures_expected_output(path: Path) -> None:
    fixture = _load(path)
    call = path.parent.name
    before = int(time.time())
    result = run(call, fixture["args"])
    result = _unstamp(call, json.loads(json.dumps(result)), before, int(time.time()))
    assert result == fixture["expected"]


@pytest.mark.parametrize("path", RAISING_CASES)
def test_each_call_refuses_its_fixtures_input_with_the_exact_message(path: Path) -> None:
    fixture = _load(path)
    with pytest.raises(TranslationError) as caught:
        run(path.parent.name, fixture["args"])
    assert str(caught.value) == fixture["raises"]


def test_the_fixtures_cover_every_call() -> None:
    folders = {path.parent.name for path in _fixtures()}
    assert folders == {
        "chat_to_messages_request",
        "messages_to_chat_request",
        "messages_to_chat_response",
        "chat_to_messages_response",
        "responses_to_chat_request",
        "chat_to_responses_response",
        "messages_stream_to_chat",
        "chat_stream_to_messages",
        "chat_stream_to_responses",
        "read_stream",
        "read_body",
        "roundtrip_request",
        "roundtrip_response",
    }


def test_every_request_translation_has_a_fixture_it_refuses() -> None:
    raising = {path.parent.name for path in _fixtures() if "raises" in _load(path)}
    assert {"chat_to_messages_request", "messages_to_chat_request", "responses_to_chat_request"} <= raising


#: Which argument of a round-trip fixture is the original: a request, or a message.
ROUND_TRIPPED = {"roundtrip_request": "req", "roundtrip_response": "msg"}
ROUND_TRIP_CASES = [p for p in _fixtures() if p.parent.name in ROUND_TRIPPED]


@pytest.mark.parametrize("path", ROUND_TRIP_CASES, ids=str)
def test_a_round_trip_fixture_expects_its_original_back(path: Path) -> None:
    fixture = _load(path)
    assert fixture["expected"] == fixture["args"][ROUND_TRIPPED[path.parent.name]]


@pytest.mark.parametrize("path", ROUND_TRIP_CASES, ids=str)
def test_messages_to_chat_and_back_gives_the_original(path: Path) -> None:
    fixture = _load(path)
    assert run(path.parent.name, fixture["args"]) == fixture["args"][ROUND_TRIPPED[path.parent.name]]


# --- the SDKs' wire types ---------------------------------------------------------------------------------

ANTHROPIC_EVENT = pydantic.TypeAdapter(anthropic.types.RawMessageStreamEvent)
RESPONSES_EVENT = pydantic.TypeAdapter(openai.types.responses.ResponseStreamEvent)
# Module-level: the lazy validators these return need their adapter alive while they are drained.
MESSAGES_REQUEST = pydantic.TypeAdapter(message_create_params.MessageCreateParamsBase)
CHAT_REQUEST = pydantic.TypeAdapter(completion_create_params.CompletionCreateParamsBase)


def _drain(value: Any) -> Any:
    """Force pydantic's lazy ``Iterable`` validators (the SDKs' request TypedDicts use them) to validate."""
    if isinstance(value, Iterator):  # pydantic's ValidatorIterator, which validates as it is iterated
        return [_drain(v) for v in value]
    if isinstance(value, dict):
        return {k: _drain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_drain(v) for v in value]
    return value


def _models(value: Any) -> Iterator[pydantic.BaseModel]:
    if isinstance(value, pydantic.BaseModel):
        yield value
        for field in type(value).model_fields:
            yield from _models(getattr(value, field))
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _models(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _models(v)


def _no_unknown_fields(model: Any) -> None:
    """The SDK models accept unknown keys; a translation must not emit any (they would be misspellings)."""
    for sub in _models(model):
        assert not sub.model_extra, f"{type(sub).__name__} got unknown fields {sorted(sub.model_extra)}"


def _anthropic_events(result: Any) -> None:
    for name, data in result:
        anthropic_event = ANTHROPIC_EVENT.validate_python(data)
        assert anthropic_event.type == name
        _no_unknown_fields(anthropic_event)


def _responses_events(result: Any) -> None:
    for number, (name, data) in enumerate(result):
        responses_event = RESPONSES_EVENT.validate_python(data)
        assert (responses_event.type, responses_event.sequence_number) == (name, number)
        _no_unknown_fields(responses_event)


def _chat_chunks(result: Any) -> None:
    for chunk in result:
        _no_unknown_fields(openai.types.chat.ChatCompletionChunk.model_validate(chunk))


#: Each call's output, checked against the SDK wire type it claims to be (what a reader read has none).
VALIDATE: dict[str, Callable[[Any], object]] = {
    "chat_to_messages_request": lambda result: _drain(MESSAGES_REQUEST.validate_python(result)),
    "roundtrip_request": lambda result: _drain(MESSAGES_REQUEST.validate_python(result)),
    "messages_to_chat_request": lambda result: _drain(CHAT_REQUEST.validate_python(result)),
    "responses_to_chat_request": lambda result: _drain(CHAT_REQUEST.validate_python(result)),
    "chat_to_messages_response": lambda result: _no_unknown_fields(anthropic.types.Message.model_validate(result)),
    "roundtrip_response": lambda result: _no_unknown_fields(anthropic.types.Message.model_validate(result)),
    "messages_to_chat_response": lambda result: _no_unknown_fields(
        openai.types.chat.ChatCompletion.model_validate(result)
    ),
    "chat_to_responses_response": lambda result: _no_unknown_fields(
        openai.types.responses.Response.model_validate(result)
    ),
    "messages_stream_to_chat": _chat_chunks,
    "chat_stream_to_messages": _anthropic_events,
    "chat_stream_to_responses": _responses_events,
}
SDK_TYPED_CASES = [p for p in OUTPUT_CASES if p.values[0].parent.name in VALIDATE]  # type: ignore[union-attr]


def test_only_readings_have_no_sdk_type() -> None:
    assert {p.parent.name for p in _fixtures()} - VALIDATE.keys() == {"read_stream", "read_body"}


@pytest.mark.parametrize("path", SDK_TYPED_CASES)
def test_outputs_validate_against_the_sdk_types(path: Path) -> None:
    call = path.parent.name
    VALIDATE[call](json.loads(json.dumps(run(call, _load(path)["args"]))))


# --- the SDKs' stream accumulators ------------------------------------------------------------------------


def _stream_cases(call: str) -> list[Any]:
    return [pytest.param(_load(p)["args"], id=p.stem) for p in _fixtures() if p.parent.name == call]


def _anthropic_message(events: list[tuple[str, dict[str, Any]]] | list[list[Any]]) -> dict[str, Any]:
    snapshot = None
    json_bufs: dict[int, bytes] = {}
    for _, data in events:
        if data["type"] != "ping":
            event = ANTHROPIC_EVENT.validate_python(data)
            snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=json_bufs)
    assert snapshot is not None
    return anthropic.types.Message.model_validate(snapshot.model_dump()).model_dump(mode="json", exclude_none=True)


def _chat_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(openai.types.chat.ChatCompletionChunk.model_validate(chunk))
    # The snapshot, not get_final_completion(), which refuses a `length` finish.
    return state.current_completion_snapshot.model_dump(mode="json")


def _chat_essentials(completion: dict[str, Any]) -> dict[str, Any]:
    """What a chat completion says, tool arguments compared as JSON values (whitespace may differ)."""
    choice = completion["choices"][0]
    calls = [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in choice["message"].get("tool_calls") or []
    ]
    usage = openai.types.CompletionUsage.model_validate(completion["usage"]).model_dump(exclude_none=True)
    return {
        "id": completion["id"],
        "model": completion["model"],
        "content": choice["message"]["content"],
        "tool_calls": calls,
        "finish_reason": choice["finish_reason"],
        "usage": usage,
    }


@pytest.mark.parametrize("args", _stream_cases("messages_stream_to_chat"))
def test_messages_stream_to_chat_accumulates_to_the_non_streamed_translation(args: dict[str, Any]) -> None:
    chunks = messages_stream_to_chat(args["events"], include_usage=True)
    streamed = _chat_essentials(_chat_completion(chunks))
    whole = _chat_essentials(messages_to_chat_response(_anthropic_message(args["events"])))
    assert streamed == whole


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_messages"))
def test_chat_stream_to_messages_accumulates_to_the_non_streamed_translation(args: dict[str, Any]) -> None:
    streamed = _anthropic_message(chat_stream_to_messages(args["chunks"], args["model"]))
    whole = chat_to_messages_response(_chat_completion(args["chunks"]), args["model"])
    assert streamed == anthropic.types.Message.model_validate(whole).model_dump(mode="json", exclude_none=True)


def _responses_stream(args: dict[str, Any]) -> tuple[list[StreamEvent], Any, dict[str, str]]:
    """A fixture's chunks translated to Responses events, and what the SDK's stream state made of them: the
    final response, and each item's text or arguments as it accumulated them from the deltas."""
    events = chat_stream_to_responses(args["chunks"], args["request"], args["model"])
    state: ResponseStreamState[None] = ResponseStreamState(
        input_tools=args["request"].get("tools", []), text_format=omit
    )
    accumulated: dict[str, str] = {}
    final = None
    for _, data in events:
        for out in state.handle_event(RESPONSES_EVENT.validate_python(data)):
            if out.type in ("response.output_text.delta", "response.function_call_arguments.delta"):
                accumulated[out.item_id] = out.snapshot
            if out.type in ("response.completed", "response.incomplete"):
                final = out.response
    return events, final, accumulated


def _whole_response(args: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed translation of the completion a fixture's chunks make up."""
    return chat_to_responses_response({**_chat_completion(args["chunks"]), "model": args["model"]}, args["request"])


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_responses"))
def test_chat_stream_to_responses_ends_with_the_non_streamed_translation(args: dict[str, Any]) -> None:
    events, _, _ = _responses_stream(args)
    assert events[-1][1]["response"] == _whole_response(args)


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_responses"))
def test_chat_stream_to_responses_accumulates_to_the_non_streamed_translation(args: dict[str, Any]) -> None:
    _, final, _ = _responses_stream(args)
    whole = openai.types.responses.Response.model_validate(_whole_response(args))
    fields = {"id", "status", "output", "usage"}
    assert _unparsed(final.model_dump(mode="json", include=fields)) == whole.model_dump(mode="json", include=fields)


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_responses"))
def test_chat_stream_to_responses_deltas_add_up_to_each_items_text_and_arguments(args: dict[str, Any]) -> None:
    _, _, accumulated = _responses_stream(args)
    from_deltas = {
        item["id"]: item["content"][0]["text"] if item["type"] == "message" else item["arguments"]
        for item in _whole_response(args)["output"]
        if (item["type"] == "function_call" and item["arguments"]) or item["type"] == "message"
    }
    assert accumulated == {k: v for k, v in from_deltas.items() if v}


def _unparsed(value: Any) -> Any:
    """``value`` without the fields the SDK's parsing helpers add (``parsed``, ``parsed_arguments``)."""
    if isinstance(value, dict):
        return {k: _unparsed(v) for k, v in value.items() if k not in ("parsed", "parsed_arguments")}
    if isinstance(value, list):
        return [_unparsed(v) for v in value]
    return value


# --- usage, across translations ---------------------------------------------------------------------------


def _watched(api: Api, events: list[StreamEvent]) -> Reader:
    reader = reader_for(api)
    for name, data in events:
        reader.feed(name, data)
    return reader


def _three_sides(args: dict[str, Any]) -> list[Reader]:
    """A chat stream fixture watched as chat, and as its Messages and Responses translations."""
    return [
        _watched("chat", unnamed(args["chunks"])),
        _watched("messages", chat_stream_to_messages(args["chunks"], args["model"])),
        _watched("responses", chat_stream_to_responses(args["chunks"], {"model": "m", "input": "x"}, args["model"])),
    ]


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_messages"))
def test_every_chat_stream_fixture_reports_usage(args: dict[str, Any]) -> None:
    assert _watched("chat", unnamed(args["chunks"])).usage not in (None, Usage())


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_messages"))
def test_the_reader_sees_the_end_on_both_sides_of_a_translation(args: dict[str, Any]) -> None:
    assert [side.finished for side in _three_sides(args)] == [True, True, True]


@pytest.mark.parametrize("args", _stream_cases("chat_stream_to_messages"))
def test_the_reader_reads_the_same_usage_on_both_sides_of_a_translation(args: dict[str, Any]) -> None:
    chat, messages, responses = _three_sides(args)
    assert (messages.usage, responses.usage) == (chat.usage, chat.usage)


#: Each request translation, a request it accepts, and the fields an agent could send in the wrong shape.
REQUEST_TRANSLATIONS: list[tuple[Callable[[dict[str, Any], str], dict[str, Any]], dict[str, Any], list[str]]] = [
    (
        chat_to_messages_request,
        {"messages": [{"role": "user", "content": "q"}]},
        ["tools", "tool_choice", "stop", "n", "max_tokens", "parallel_tool_calls"],
    ),
    (
        messages_to_chat_request,
        {"messages": [{"role": "user", "content": "q"}], "max_tokens": 5},
        ["system", "tools", "tool_choice", "stop_sequences"],
    ),
    (responses_to_chat_request, {"input": "q"}, ["input", "instructions", "tools", "tool_choice", "text"]),
    (
        lambda message, model: chat_to_messages_request({"messages": [message]}, model),
        {"role": "assistant", "content": "x"},
        ["content", "tool_calls", "role"],
    ),
    (
        lambda message, model: messages_to_chat_request({"messages": [message]}, model),
        {"role": "user", "content": "x"},
        ["content", "role"],
    ),
    (
        lambda item, model: responses_to_chat_request({"input": [item]}, model),
        {"type": "message", "role": "user", "content": "x"},
        ["content", "role", "type", "output", "call_id"],
    ),
]
ODD_SHAPES: list[Any] = [1, True, "s", {}, {"a": 1}, ["x"], [1], [{}], [[]]]
SHAPE_CASES = [
    pytest.param(translate, {**base, field: odd}, id=f"{n}-{field}-{json.dumps(odd)}")
    for n, (translate, base, fields) in enumerate(REQUEST_TRANSLATIONS)
    for field in fields
    for odd in ODD_SHAPES
]


def _outcome(translate: Callable[[dict[str, Any], str], dict[str, Any]], request: dict[str, Any]) -> str:
    try:
        translate(request, "m")
    except TranslationError:
        return "refused by name"
    return "translated"


@pytest.mark.parametrize(("translate", "request_body"), SHAPE_CASES)
def test_a_request_field_of_the_wrong_shape_is_refused_by_name_not_crashed_on(
    translate: Callable[[dict[str, Any], str], dict[str, Any]], request_body: dict[str, Any]
) -> None:
    assert _outcome(translate, request_body) in ("translated", "refused by name")


def test_translation_error_is_a_gateway_error() -> None:
    assert issubclass(TranslationError, GatewayError)


EMPTY_CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": []}


def test_a_chat_stream_to_messages_closes_with_message_delta_and_message_stop() -> None:
    to_messages = ChatStreamToMessages("m")
    to_messages.feed("", EMPTY_CHUNK)
    assert [name for name, _ in to_messages.close()] == ["message_delta", "message_stop"]


def test_a_chat_stream_to_responses_closes_with_response_completed() -> None:
    to_responses = ChatStreamToResponses({"model": "m", "input": "x"}, "m")
    to_responses.feed("", EMPTY_CHUNK)
    assert [name for name, _ in to_responses.close()][-1] == "response.completed"


def test_a_messages_stream_to_chat_closes_with_one_usage_chunk() -> None:
    assert len(MessagesStreamToChat(include_usage=True).close()) == 1


def test_every_translator_closes_once() -> None:
    translators: list[StreamTranslator] = [
        ChatStreamToMessages("m"),
        ChatStreamToResponses({"model": "m", "input": "x"}, "m"),
        MessagesStreamToChat(include_usage=True),
    ]
    assert [(len(t.close()) > 0, t.close()) for t in translators] == [(True, [])] * 3


@pytest.mark.parametrize("args", _stream_cases("messages_stream_to_chat"))
def test_a_messages_stream_to_chat_gives_events_without_a_name(args: dict[str, Any]) -> None:
    names = {name for name, _ in translated(MessagesStreamToChat(include_usage=True), args["events"])}
    assert names == {""}


# --- the two-step bridges (Responses agent ⇄ Anthropic provider go through chat) --------------------------


def _output_args(call: str) -> list[Any]:
    return [
        pytest.param(f["args"], id=p.stem)
        for p in _fixtures()
        if p.parent.name == call and "raises" not in (f := _load(p))
    ]


def _responses_to_messages(req: dict[str, Any]) -> dict[str, Any]:
    return chat_to_messages_request(responses_to_chat_request(req, "claude-sonnet-4-5"), "claude-sonnet-4-5")


def _messages_to_responses(msg: dict[str, Any]) -> dict[str, Any]:
    return chat_to_responses_response(messages_to_chat_response(msg), {"model": "gpt-5.1", "input": "x"})


@pytest.mark.parametrize("args", _output_args("responses_to_chat_request"))
def test_responses_requests_translate_on_to_valid_messages_requests(args: dict[str, Any]) -> None:
    _drain(MESSAGES_REQUEST.validate_python(_responses_to_messages(args["req"])))


@pytest.mark.parametrize("args", _output_args("responses_to_chat_request"))
def test_a_responses_request_reaches_messages_streamed_exactly_when_it_asked_to_stream(args: dict[str, Any]) -> None:
    assert _responses_to_messages(args["req"]).get("stream") == (True if args["req"].get("stream") else None)


@pytest.mark.parametrize("args", _output_args("messages_to_chat_response"))
def test_messages_replies_translate_on_to_valid_responses(args: dict[str, Any]) -> None:
    _no_unknown_fields(openai.types.responses.Response.model_validate(_messages_to_responses(args["msg"])))


@pytest.mark.parametrize("args", _output_args("messages_to_chat_response"))
def test_a_messages_reply_keeps_its_usage_through_chat_to_responses(args: dict[str, Any]) -> None:
    assert read_body("responses", _messages_to_responses(args["msg"])).usage == read_body("messages", args["msg"]).usage
