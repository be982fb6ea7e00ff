"""A turn as OpenAI Chat Completions puts it: a ``ChatCompletion``, or ``ChatCompletionChunk`` events.

Bodies are built from the official SDK's types with the fields the real API sets (nulls included, as it sends
them) and dumped with ``exclude_unset``, which is how the SDK itself says a model looked on the wire.
"""

from __future__ import annotations

from typing import Any, Literal

from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.shared import ErrorObject

from .script import StreamError, Turn
from .wire import Answering, Event, Rendered, argument_pieces, arguments_json, compact, dump, text_pieces

FinishReason = Literal["stop", "tool_calls", "length"]
FINISH: dict[str, FinishReason] = {"end": "stop", "tools": "tool_calls", "max_tokens": "length"}
SYSTEM_FINGERPRINT = "fp_fake2026"


def call_id(answering: Answering, turn: Turn, index: int) -> str:
    """The id of the turn's ``index``-th tool call on the OpenAI wires."""
    return turn.tool_calls[index].id or f"call_fake{answering.number}_{index}"


def usage(turn: Turn) -> dict[str, Any]:
    """The ``usage`` object of a completion."""
    counts = turn.usage
    prompt_details: dict[str, int] = {"cached_tokens": counts.cached_tokens, "audio_tokens": 0}
    if counts.cache_write_tokens:
        prompt_details["cache_write_tokens"] = counts.cache_write_tokens
    return {
        "prompt_tokens": counts.input_tokens,
        "completion_tokens": counts.output_tokens,
        "total_tokens": counts.input_tokens + counts.output_tokens,
        "prompt_tokens_details": prompt_details,
        "completion_tokens_details": {
            "reasoning_tokens": counts.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def completion(answering: Answering, turn: Turn) -> Rendered:
    """The non-streamed answer."""
    message: dict[str, Any] = {
        "role": "assistant",
        "content": turn.text if turn.text or not turn.tool_calls else None,
        "refusal": None,
        "annotations": [],
    }
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": call_id(answering, turn, i), "type": "function", "function": {"name": call.name, "arguments": args}}
            for i, (call, args) in enumerate(zip(turn.tool_calls, arguments_json(turn), strict=True))
        ]
    body = dump(
        ChatCompletion.model_validate(
            {
                "id": f"chatcmpl-fake{answering.number}",
                "object": "chat.completion",
                "created": answering.created,
                "model": answering.model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": FINISH[turn.stop_reason]}
                ],
                "usage": usage(turn),
                "service_tier": "default",
                "system_fingerprint": SYSTEM_FINGERPRINT,
            }
        )
    )
    return Rendered(answering.model, body=body, wire_usage=body["usage"])


def chunks(answering: Answering, turn: Turn) -> Rendered:
    """The streamed answer: role delta, content deltas, tool-call deltas, finish chunk, the usage chunk only when
    the request set ``stream_options.include_usage``, then ``[DONE]``."""
    options = answering.request.get("stream_options") or {}
    include_usage = isinstance(options, dict) and options.get("include_usage") is True

    def chunk(choices: list[dict[str, Any]], wire_usage: dict[str, Any] | None = None) -> Event:
        fields: dict[str, Any] = {
            "id": f"chatcmpl-fake{answering.number}",
            "object": "chat.completion.chunk",
            "created": answering.created,
            "model": answering.model,
            "service_tier": "default",
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
        }
        if include_usage:  # the real API then states "usage": null on every chunk but the last
            fields["usage"] = wire_usage
        data = dump(ChatCompletionChunk.model_validate(fields))
        return Event(None, compact(data), data.get("usage"))

    def delta(fields: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}]

    has_text = bool(turn.text) or not turn.tool_calls
    events = [chunk(delta({"role": "assistant", "content": "" if has_text else None, "refusal": None}))]
    events += [chunk(delta({"content": piece})) for piece in text_pieces(turn.text)]
    for i, (call, args) in enumerate(zip(turn.tool_calls, arguments_json(turn), strict=True)):
        opening = {"index": i, "id": call_id(answering, turn, i), "type": "function"}
        events.append(chunk(delta({"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]})))
        events += [
            chunk(delta({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
            for piece in argument_pieces(args)
        ]
    events.append(chunk(delta({}, FINISH[turn.stop_reason])))
    final = [chunk([], usage(turn))] if include_usage else []
    final.append(Event(None, "[DONE]"))
    return Rendered(answering.model, events=events + final)


def error_event(error: StreamError) -> Event:
    """The chunk the real API sends when a stream fails midway: ``data: {"error": {...}}``."""
    body = ErrorObject.model_validate({"message": error.message, "type": error.type, "param": None, "code": None})
    return Event(None, compact({"error": dump(body)}))
