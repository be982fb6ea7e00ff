"""A turn as Google's Gemini API puts it: a ``GenerateContentResponse``, or a stream of them (``alt=sse``).

Bodies are built from the ``google-genai`` SDK's own types and dumped by their wire (camelCase) names, unset fields
left out, as the API sends them. As Gemini does: a stream sends the text piece by piece, each event stating the
prompt's usage so far; the last event carries every function call whole (arguments an object, no call id: the
Gemini API sends none), the ``finishReason`` and the whole ``usageMetadata``, in which ``candidatesTokenCount``
leaves out the ``thoughtsTokenCount``.
"""

from __future__ import annotations

from typing import Any

from google.genai import types

from .script import StreamError, Turn
from .wire import Answering, Event, Rendered, compact, text_pieces

FINISH = {"end": "STOP", "tools": "STOP", "max_tokens": "MAX_TOKENS"}
THOUGHT_SIGNATURE = b"signed-by-fake"  # what Gemini 2.5+ attaches to a function call part (base64 on the wire)


def dump(model: types._common.BaseModel) -> dict[str, Any]:
    """An SDK model as the API sends it: the fields that were set, by their wire (camelCase) names."""
    data: dict[str, Any] = model.model_dump(mode="json", exclude_none=True, by_alias=True)
    return data


def usage(turn: Turn) -> dict[str, Any]:
    """The whole ``usageMetadata`` of a turn."""
    counts = turn.usage
    fields: dict[str, Any] = {
        "prompt_token_count": counts.input_tokens,
        "candidates_token_count": counts.output_tokens - counts.reasoning_tokens,
        "total_token_count": counts.input_tokens + counts.output_tokens,
        "prompt_tokens_details": [{"modality": "TEXT", "token_count": counts.input_tokens}],
    }
    if counts.reasoning_tokens:
        fields["thoughts_token_count"] = counts.reasoning_tokens
    if counts.cached_tokens:
        fields["cached_content_token_count"] = counts.cached_tokens
    return dump(types.GenerateContentResponseUsageMetadata(**fields))


def _prompt_usage(turn: Turn) -> dict[str, Any]:
    """What a stream's early events state: the prompt only."""
    prompt = turn.usage.input_tokens
    return dump(types.GenerateContentResponseUsageMetadata(prompt_token_count=prompt, total_token_count=prompt))


def _calls(turn: Turn) -> list[types.Part]:
    return [
        types.Part(
            function_call=types.FunctionCall(id=call.id, name=call.name, args=call.arguments),
            thought_signature=THOUGHT_SIGNATURE if i == 0 else None,
        )
        for i, call in enumerate(turn.tool_calls)
    ]


def _response(answering: Answering, parts: list[types.Part], finish: str | None, wire_usage: dict[str, Any]) -> Any:
    candidate = types.Candidate(
        content=types.Content(role="model", parts=parts),
        finish_reason=types.FinishReason(finish) if finish else None,
        index=0,
    )
    body = dump(
        types.GenerateContentResponse(
            candidates=[candidate],
            model_version=answering.model,
            response_id=f"fake-response-{answering.number}",
        )
    )
    body["usageMetadata"] = wire_usage  # as dumped by its own type, zero counts kept
    return body


def body(answering: Answering, turn: Turn) -> Rendered:
    """The non-streamed answer."""
    parts = ([types.Part(text=turn.text)] if turn.text or not turn.tool_calls else []) + _calls(turn)
    wire_usage = usage(turn)
    return Rendered(
        answering.model, body=_response(answering, parts, FINISH[turn.stop_reason], wire_usage), wire_usage=wire_usage
    )


def events(answering: Answering, turn: Turn) -> Rendered:
    """The streamed answer: one event per text piece, then the function calls, ``finishReason`` and usage."""
    out = [
        Event(
            None,
            compact(_response(answering, [types.Part(text=piece)], None, _prompt_usage(turn))),
            _prompt_usage(turn),
        )
        for piece in text_pieces(turn.text)
    ]
    last_parts = _calls(turn) or [types.Part(text="")]
    wire_usage = usage(turn)
    out.append(Event(None, compact(_response(answering, last_parts, FINISH[turn.stop_reason], wire_usage)), wire_usage))
    return Rendered(answering.model, events=out)


def error_event(error: StreamError) -> Event:
    """The event Gemini sends when a stream fails midway: ``data: {"error": {"code", "message", "status"}}``."""
    return Event(None, compact({"error": {"code": 503, "message": error.message, "status": "UNAVAILABLE"}}))
