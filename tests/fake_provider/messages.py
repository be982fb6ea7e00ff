"""A turn as Anthropic Messages puts it: a ``Message``, or the ``message_start`` … ``message_stop`` events.

Built from the official SDK's types with the fields the real API sets, dumped with ``exclude_unset``.
"""

from __future__ import annotations

from typing import Any

from anthropic.types import (
    Message,
    MessageTokensCount,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
)
from anthropic.types.shared import ErrorResponse

from .script import StreamError, Turn
from .wire import Answering, Event, Rendered, argument_pieces, arguments_json, compact, dump, text_pieces

STOP_REASON = {"end": "end_turn", "tools": "tool_use", "max_tokens": "max_tokens"}


def usage(turn: Turn, output_tokens: int) -> dict[str, Any]:
    """The ``usage`` object of a message; Anthropic's ``input_tokens`` leaves out the cached and cache-written
    tokens, which it counts apart."""
    counts = turn.usage
    return {
        "input_tokens": counts.input_tokens - counts.cached_tokens - counts.cache_write_tokens,
        "cache_creation_input_tokens": counts.cache_write_tokens,
        "cache_read_input_tokens": counts.cached_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": counts.cache_write_tokens, "ephemeral_1h_input_tokens": 0},
        "output_tokens": output_tokens,
        "service_tier": "standard",
    }


def output_details(turn: Turn) -> dict[str, Any]:
    """``output_tokens_details``, stated (once the output is known) only for a turn that reasoned."""
    if not turn.usage.reasoning_tokens:
        return {}
    return {"output_tokens_details": {"thinking_tokens": turn.usage.reasoning_tokens}}


def blocks(answering: Answering, turn: Turn) -> list[dict[str, Any]]:
    """The message's content blocks, complete."""
    content: list[dict[str, Any]] = []
    if turn.text or not turn.tool_calls:
        content.append({"type": "text", "text": turn.text})
    content += [
        {
            "type": "tool_use",
            "id": call.id or f"toolu_fake{answering.number}_{i}",
            "name": call.name,
            "input": call.arguments,
        }
        for i, call in enumerate(turn.tool_calls)
    ]
    return content


def message(answering: Answering, turn: Turn) -> Rendered:
    """The non-streamed answer."""
    body = dump(
        Message.model_validate(
            {
                "id": f"msg_fake{answering.number}",
                "type": "message",
                "role": "assistant",
                "model": answering.model,
                "content": blocks(answering, turn),
                "stop_reason": STOP_REASON[turn.stop_reason],
                "stop_sequence": None,
                "usage": usage(turn, turn.usage.output_tokens) | output_details(turn),
            }
        )
    )
    return Rendered(answering.model, body=body, wire_usage=body["usage"])


def events(answering: Answering, turn: Turn) -> Rendered:
    """The streamed answer, in the real order: ``message_start`` (input usage, ``output_tokens`` 1 as the API
    states before generating), per block ``content_block_start``/``_delta``…/``_stop`` with one ``ping`` after
    the first start, ``message_delta`` (stop reason, final ``output_tokens``), ``message_stop``."""
    started = usage(turn, min(1, turn.usage.output_tokens))
    start = dump(
        RawMessageStartEvent.model_validate(
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_fake{answering.number}",
                    "type": "message",
                    "role": "assistant",
                    "model": answering.model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": started,
                },
            }
        )
    )
    stream = [Event("message_start", compact(start), start["message"]["usage"])]
    pieces = [text_pieces(turn.text)] if turn.text or not turn.tool_calls else []
    pieces += [["", *argument_pieces(args)] for args in arguments_json(turn)]  # the API opens with an empty piece
    for index, (block, block_pieces) in enumerate(zip(blocks(answering, turn), pieces, strict=True)):
        opening = {**block, "text": ""} if block["type"] == "text" else {**block, "input": {}}
        stream.append(_event(RawContentBlockStartEvent, type="content_block_start", index=index, content_block=opening))
        if index == 0:
            stream.append(Event("ping", compact({"type": "ping"})))
        for piece in block_pieces:
            delta = (
                {"type": "text_delta", "text": piece}
                if block["type"] == "text"
                else {"type": "input_json_delta", "partial_json": piece}
            )
            stream.append(_event(RawContentBlockDeltaEvent, type="content_block_delta", index=index, delta=delta))
        stream.append(_event(RawContentBlockStopEvent, type="content_block_stop", index=index))
    ending = dump(
        RawMessageDeltaEvent.model_validate(
            {
                "type": "message_delta",
                "delta": {"stop_reason": STOP_REASON[turn.stop_reason], "stop_sequence": None},
                "usage": {"output_tokens": turn.usage.output_tokens} | output_details(turn),
            }
        )
    )
    stream.append(Event("message_delta", compact(ending), {**started, **ending["usage"]}))
    stream.append(_event(RawMessageStopEvent, type="message_stop"))
    return Rendered(answering.model, events=stream)


def _event(model: Any, **fields: Any) -> Event:
    data = dump(model.model_validate(fields))
    return Event(data["type"], compact(data))


def error_event(error: StreamError) -> Event:
    """The event the real API sends when a stream fails midway (e.g. ``overloaded_error``)."""
    body = ErrorResponse.model_validate({"type": "error", "error": {"type": error.type, "message": error.message}})
    return Event("error", compact(dump(body)))


def token_count(input_tokens: int) -> dict[str, Any]:
    """The body of a ``count_tokens`` answer."""
    return dump(MessageTokensCount(input_tokens=input_tokens))
