"""Gemini ⇄ chat completions: the request, the reply and the stream, checked against both SDKs' own types.

A Gemini request becomes a chat request the ``openai`` SDK's request type accepts; a chat reply (rendered by the
fake provider from the ``openai`` SDK's types) becomes a ``GenerateContentResponse`` the ``google-genai`` SDK's type
accepts; and the translated stream, put together the way the SDK's callers put a stream together, holds what the
non-streamed translation of the same reply holds, with the same usage. The reader's cases are fixtures in
tests/fixtures/protocols/read_stream and read_body (``gemini_*``), run by test_protocols.py.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pydantic
import pytest
from fake_provider import ToolCall, Turn, Usage
from fake_provider import chat as fake_chat
from fake_provider.wire import Answering
from google.genai import types
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import completion_create_params

from runner.call import Usage as CallUsage
from runner.gateway import policy
from runner.gateway.protocols import TranslationError, reader_for
from runner.gateway.protocols.chat_gemini import (
    ChatStreamToGemini,
    chat_to_gemini_response,
    gemini_to_chat_request,
    json_schema,
)

CHAT_REQUEST = pydantic.TypeAdapter(completion_create_params.CompletionCreateParamsNonStreaming)
SQL = "SELECT id FROM hibob_people WHERE status = 'terminated'"
RUN_SQL = {
    "name": "run_sql",
    "description": "Run one SQL query",
    "parameters": {"type": "OBJECT", "properties": {"sql": {"type": "STRING"}}, "required": ["sql"]},
}
#: A two-step conversation as google-genai sends it (camelCase, the model's call without an id, as Gemini sends it).
CONVERSATION: dict[str, Any] = {
    "contents": [
        {"role": "user", "parts": [{"text": "Leavers?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Thinking it over.", "thought": True},
                {"text": "Checking."},
                {"functionCall": {"name": "run_sql", "args": {"sql": SQL}}, "thoughtSignature": "c2lnbmVk"},
            ],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "run_sql", "response": {"result": "2 rows"}}}]},
    ],
    "systemInstruction": {"role": "user", "parts": [{"text": "You are an analyst."}]},
    "tools": [{"functionDeclarations": [RUN_SQL]}],
    "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["run_sql"]}},
    "generationConfig": {"temperature": 0.2, "maxOutputTokens": 512, "stopSequences": ["END"], "topK": 40},
}


def test_a_conversation_becomes_the_chat_request_it_means() -> None:
    assert gemini_to_chat_request(CONVERSATION, "gpt-4.1") == {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You are an analyst."},
            {"role": "user", "content": "Leavers?"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1_2",
                        "type": "function",
                        "function": {"name": "run_sql", "arguments": json.dumps({"sql": SQL})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1_2", "content": "2 rows"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "run_sql",
                    "description": "Run one SQL query",
                    "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
                },
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "run_sql"}},
        "temperature": 0.2,
        "max_tokens": 512,
        "stop": ["END"],
    }


def test_the_translated_request_is_one_the_openai_sdk_types_accept() -> None:
    CHAT_REQUEST.validate_python(gemini_to_chat_request(CONVERSATION, "gpt-4.1"))


def test_the_request_google_genai_builds_translates_too() -> None:
    """What the SDK's own types put on the wire (snake_case fields turned camelCase by the SDK's aliases)."""
    request = types.GenerateContentConfig(
        system_instruction="Be brief.",
        tools=[types.Tool(function_declarations=[types.FunctionDeclaration.model_validate(RUN_SQL)])],
        response_mime_type="application/json",
    ).model_dump(mode="json", exclude_none=True, by_alias=True)
    body = {
        "contents": [{"role": "user", "parts": [{"text": "Leavers?"}]}],
        "systemInstruction": {"parts": [{"text": request["systemInstruction"]}]},
        "tools": request["tools"],
        "generationConfig": {"responseMimeType": request["responseMimeType"]},
    }
    chat = gemini_to_chat_request(body, "m")
    assert (chat["messages"][0], chat["response_format"]) == (
        {"role": "system", "content": "Be brief."},
        {"type": "json_object"},
    )
    assert chat["tools"][0]["function"]["parameters"]["type"] == "object"


def test_a_gemini_schema_becomes_json_schema_nullable_and_nested_alike() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "verdict": {"type": "STRING", "enum": ["yes", "no"], "nullable": True},
            "queries": {"type": "ARRAY", "items": {"type": "STRING"}, "min_items": 1},
        },
        "propertyOrdering": ["verdict", "queries"],
    }
    assert json_schema(schema) == {
        "type": "object",
        "properties": {
            "verdict": {"type": ["string", "null"], "enum": ["yes", "no"]},
            "queries": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        },
    }


def test_responses_pair_with_their_calls_by_id_or_else_by_name_in_order() -> None:
    def call(name: str, call_id: str | None = None) -> dict[str, Any]:
        return {"functionCall": {"name": name, "args": {}, **({"id": call_id} if call_id else {})}}

    def answer(name: str, call_id: str | None = None) -> dict[str, Any]:
        return {"functionResponse": {"name": name, "response": {"n": 1}, **({"id": call_id} if call_id else {})}}

    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "go"}]},
            {"role": "model", "parts": [call("a"), call("b", "given"), call("a")]},
            {"role": "user", "parts": [answer("a"), answer("b", "given"), answer("a"), {"text": "and?"}]},
        ]
    }
    messages = gemini_to_chat_request(body, "m")["messages"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_1_0", "given", "call_1_2"]
    assert [(m["role"], m.get("tool_call_id"), m["content"]) for m in messages[2:]] == [
        ("tool", "call_1_0", '{"n": 1}'),
        ("tool", "given", '{"n": 1}'),
        ("tool", "call_1_2", '{"n": 1}'),
        ("user", None, "and?"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"contents": [], "tools": [{"googleSearch": {}}]},
            "tools[0]: googleSearch tools are not supported when the provider speaks chat",
        ),
        (
            {"contents": [{"role": "model", "parts": [{"executableCode": {"code": "1"}}]}]},
            "contents[0].parts[0]: executableCode parts are not supported by chat completions",
        ),
        (
            {"contents": [{"role": "user", "parts": [{"functionResponse": {"name": "x", "response": {}}}]}]},
            "contents[0]: a functionResponse for 'x' answers no earlier functionCall",
        ),
        (
            {"contents": [], "cachedContent": "cachedContents/abc"},
            "cachedContent (stored context) is not supported when the provider speaks chat",
        ),
        (
            {"contents": [], "generationConfig": {"candidateCount": 2}},
            "generationConfig.candidateCount other than 1 is not supported",
        ),
        ({"contents": "Leavers?"}, "contents must be a list"),
        (
            {"contents": [], "toolConfig": {"functionCallingConfig": {"mode": ["ANY"]}}},
            "toolConfig.functionCallingConfig.mode ['ANY'] is not supported",
        ),
    ],
)
def test_what_chat_cannot_say_is_refused_by_name(body: dict[str, Any], message: str) -> None:
    with pytest.raises(TranslationError) as caught:
        gemini_to_chat_request(body, "m")
    assert str(caught.value) == message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=20,
)
GEMINI_KEYS = st.sampled_from(
    [
        *("contents", "role", "parts", "text", "thought", "functionCall", "functionResponse", "name", "args", "id"),
        *("response", "inlineData", "mimeType", "tools", "functionDeclarations", "parameters", "type", "nullable"),
        *("systemInstruction", "toolConfig", "functionCallingConfig", "mode", "generationConfig", "candidateCount"),
    ]
)
GEMINI_JSON = st.recursive(
    JSON,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(GEMINI_KEYS | st.text(max_size=4), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(body=st.dictionaries(GEMINI_KEYS, GEMINI_JSON, max_size=5))
def test_no_request_body_makes_the_translation_fail_but_by_name(body: dict[str, Any]) -> None:
    """Any JSON object is translated or refused with a TranslationError (a 400), never another exception (a 500)."""
    with contextlib.suppress(TranslationError, pydantic.ValidationError):
        CHAT_REQUEST.validate_python(json.loads(json.dumps(gemini_to_chat_request(body, "m"))))


# --- replies and streams ---------------------------------------------------------------------------------

TURNS = {
    "tool call": Turn(
        text="Checking the leavers.",
        tool_calls=[ToolCall("run_sql", {"sql": SQL}, id="call_sql")],
        usage=Usage(input_tokens=1200, output_tokens=40, cached_tokens=1000, reasoning_tokens=12),
    ),
    "text": Turn(text="Two leavers can still sign in.", usage=Usage(input_tokens=1300, output_tokens=25)),
    "cut short": Turn(text="Two leavers", stop="max_tokens", usage=Usage(input_tokens=10, output_tokens=2)),
}
WANTS_USAGE = Answering(1, "gpt-4.1-2025-04-14", {"stream_options": {"include_usage": True}}, 0)


def _chat_reply(turn: Turn) -> dict[str, Any]:
    body = fake_chat.completion(WANTS_USAGE, turn).body
    assert body is not None
    return body


def _chat_chunks(turn: Turn) -> list[dict[str, Any]]:
    events = fake_chat.chunks(WANTS_USAGE, turn).events or []
    return [json.loads(e.data) for e in events if e.data != "[DONE]"]


def _gemini_stream(turn: Turn) -> list[dict[str, Any]]:
    translator = ChatStreamToGemini({}, "gpt-4.1")
    out = [data for chunk in _chat_chunks(turn) for _, data in translator.feed("", chunk)]
    return out + [data for _, data in translator.close()]


def _put_together(events: list[dict[str, Any]]) -> tuple[str, list[tuple[str | None, str | None, Any]], Any, Any]:
    """What a google-genai caller gets from a stream: the text joined, the calls, the last finish and usage."""
    text, calls, finish, usage = "", [], None, None
    for event in events:
        response = types.GenerateContentResponse.model_validate(event)
        candidate = (response.candidates or [None])[0]
        for part in candidate.content.parts or [] if candidate and candidate.content else []:
            text += part.text or ""
            if part.function_call is not None:
                calls.append((part.function_call.id, part.function_call.name, part.function_call.args))
        finish = candidate.finish_reason if candidate and candidate.finish_reason else finish
        usage = response.usage_metadata or usage
    return text, calls, finish, usage


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_a_chat_reply_becomes_a_response_the_google_genai_types_accept_whole(turn: Turn) -> None:
    body = chat_to_gemini_response(_chat_reply(turn), {})
    parsed = types.GenerateContentResponse.model_validate(body)
    assert parsed.model_dump(mode="json", exclude_none=True, by_alias=True) == body  # no field the SDK drops


def test_a_chat_tool_call_becomes_a_function_call_with_its_id_and_an_args_object() -> None:
    body = chat_to_gemini_response(_chat_reply(TURNS["tool call"]), {})
    assert body["candidates"][0] == {
        "content": {
            "parts": [
                {"text": "Checking the leavers."},
                {"functionCall": {"id": "call_sql", "name": "run_sql", "args": {"sql": SQL}}},
            ],
            "role": "model",
        },
        "index": 0,
        "finishReason": "STOP",
    }


def test_the_usage_is_stated_as_gemini_counts_it_thoughts_apart() -> None:
    body = chat_to_gemini_response(_chat_reply(TURNS["tool call"]), {})
    assert body["usageMetadata"] == {
        "promptTokenCount": 1200,
        "candidatesTokenCount": 28,
        "thoughtsTokenCount": 12,
        "cachedContentTokenCount": 1000,
        "totalTokenCount": 1240,
    }


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_the_translated_stream_puts_together_to_the_non_streamed_translation(turn: Turn) -> None:
    whole = _put_together([chat_to_gemini_response(_chat_reply(turn), {})])
    assert _put_together(_gemini_stream(turn)) == whole


@pytest.mark.parametrize("turn", TURNS.values(), ids=TURNS.keys())
def test_the_reader_reads_the_same_usage_and_end_on_both_sides_of_the_stream(turn: Turn) -> None:
    chat, gemini = reader_for("chat"), reader_for("gemini")
    for chunk in _chat_chunks(turn):
        chat.feed("", chunk)
    for event in _gemini_stream(turn):
        gemini.feed("", event)
    assert (gemini.usage, gemini.finished) == (chat.usage, True)
    assert gemini.usage == CallUsage(
        input_tokens=turn.usage.input_tokens,
        output_tokens=turn.usage.output_tokens,
        cached_tokens=turn.usage.cached_tokens,
        reasoning_tokens=turn.usage.reasoning_tokens,
    )


def test_a_stream_sends_text_as_it_comes_and_each_call_whole_at_the_end() -> None:
    events = _gemini_stream(TURNS["tool call"])
    parts = [e["candidates"][0]["content"]["parts"] for e in events]
    assert "".join(p[0].get("text", "") for p in parts[:-1]) == "Checking the leavers."
    assert parts[-1] == [{"functionCall": {"id": "call_sql", "name": "run_sql", "args": {"sql": SQL}}}]
    assert [("finishReason" in e["candidates"][0], "usageMetadata" in e) for e in events][-1] == (True, True)
    assert not any("finishReason" in e["candidates"][0] or "usageMetadata" in e for e in events[:-1])


def test_arguments_that_are_not_a_json_object_cannot_be_a_function_call() -> None:
    reply = _chat_reply(TURNS["tool call"])
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "[1, 2]"
    with pytest.raises(TranslationError, match="arguments of the tool call 'run_sql' are not a JSON object"):
        chat_to_gemini_response(reply, {})


# --- the policy: tools the provider runs are refused before anything reaches it ----------------------------


@pytest.mark.parametrize(
    "tool", ["googleSearch", "google_search_retrieval", "codeExecution", "urlContext", "fileSearch"]
)
def test_a_provider_run_gemini_tool_is_refused_naming_it(tool: str) -> None:
    body = {"contents": [], "tools": [{"functionDeclarations": [RUN_SQL]}, {tool: {}}]}
    refused = policy.refusal("gemini", body)
    assert refused is not None and refused.startswith(f"tools[1] has '{tool}', a tool the provider runs itself")


@pytest.mark.parametrize("key", ["functionDeclarations", "function_declarations"])
def test_function_declarations_are_allowed_in_either_spelling(key: str) -> None:
    assert policy.refusal("gemini", {"contents": [], "tools": [{key: [RUN_SQL]}]}) is None
