"""A turn as OpenAI Responses puts it: a ``Response``, or the ``response.created`` … ``response.completed`` events.

Built from the official SDK's types with the fields the real API sets (it echoes the request's settings and states
nulls), dumped with ``exclude_unset``. Every event carries its ``sequence_number``, from 0.
"""

from __future__ import annotations

from typing import Any

import pydantic
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseErrorEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)

from .chat import call_id
from .script import StreamError, Turn
from .wire import Answering, Event, Rendered, argument_pieces, arguments_json, compact, dump, text_pieces


def usage(turn: Turn) -> dict[str, Any]:
    """The ``usage`` object of a response."""
    counts = turn.usage
    return {
        "input_tokens": counts.input_tokens,
        "input_tokens_details": {
            "cached_tokens": counts.cached_tokens,
            "cache_write_tokens": counts.cache_write_tokens,
        },
        "output_tokens": counts.output_tokens,
        "output_tokens_details": {"reasoning_tokens": counts.reasoning_tokens},
        "total_tokens": counts.input_tokens + counts.output_tokens,
    }


def items(answering: Answering, turn: Turn, status: str) -> list[dict[str, Any]]:
    """The response's output items, complete, with this item status."""
    output: list[dict[str, Any]] = []
    if turn.text or not turn.tool_calls:
        part = {"type": "output_text", "text": turn.text, "annotations": [], "logprobs": []}
        output.append(
            {
                "id": f"msg_fake{answering.number}",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [part],
            }
        )
    output += [
        {
            "id": f"fc_fake{answering.number}_{i}",
            "type": "function_call",
            "status": status,
            "arguments": args,
            "call_id": call_id(answering, turn, i),
            "name": call.name,
        }
        for i, (call, args) in enumerate(zip(turn.tool_calls, arguments_json(turn), strict=True))
    ]
    return output


def response(answering: Answering, turn: Turn | None, output: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``Response`` object: in progress when ``turn`` is None, else finished with ``output`` and usage."""
    request = answering.request
    fields: dict[str, Any] = {
        "id": f"resp_fake{answering.number}",
        "object": "response",
        "created_at": answering.created,
        "status": "in_progress",
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "model": answering.model,
        "output": output,
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "previous_response_id": request.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": request.get("store", True),
        "temperature": request.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "top_p": request.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": None,
        "metadata": request.get("metadata", {}),
    }
    if turn is not None:
        incomplete = turn.stop_reason == "max_tokens"
        fields["status"] = "incomplete" if incomplete else "completed"
        fields["incomplete_details"] = {"reason": "max_output_tokens"} if incomplete else None
        fields["completed_at"] = None if incomplete else answering.created
        fields["usage"] = usage(turn)
    try:
        data = dump(Response.model_validate(fields))
    except pydantic.ValidationError:  # request settings the SDK's response type cannot hold: echo defaults instead
        fields |= {"tools": [], "tool_choice": "auto", "instructions": None}
        data = dump(Response.model_validate(fields))
    # The SDK types these times as floats; the API sends whole seconds.
    return data | {key: fields[key] for key in ("created_at", "completed_at") if key in fields}


def body(answering: Answering, turn: Turn) -> Rendered:
    """The non-streamed answer."""
    status = "incomplete" if turn.stop_reason == "max_tokens" else "completed"
    data = response(answering, turn, items(answering, turn, status))
    return Rendered(answering.model, body=data, wire_usage=data["usage"])


def events(answering: Answering, turn: Turn) -> Rendered:
    """The streamed answer, in the real order (see the module doc)."""
    stream: list[Event] = []

    def emit(model: Any, wire_usage: dict[str, Any] | None = None, **fields: Any) -> None:
        data = dump(model.model_validate({**fields, "sequence_number": len(stream)}))
        stream.append(Event(data["type"], compact(data), wire_usage))

    pending = response(answering, None, [])
    emit(ResponseCreatedEvent, type="response.created", response=pending)
    emit(ResponseInProgressEvent, type="response.in_progress", response=pending)
    status = "incomplete" if turn.stop_reason == "max_tokens" else "completed"
    done = items(answering, turn, status)
    arguments = iter(arguments_json(turn))
    for index, item in enumerate(done):
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            emit(
                ResponseOutputItemAddedEvent,
                type="response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            part = item["content"][0]
            emit(
                ResponseContentPartAddedEvent,
                type="response.content_part.added",
                content_index=0,
                part={**part, "text": ""},
                **where,
            )
            for piece in text_pieces(turn.text):
                emit(
                    ResponseTextDeltaEvent,
                    type="response.output_text.delta",
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                    **where,
                )
            emit(
                ResponseTextDoneEvent,
                type="response.output_text.done",
                content_index=0,
                text=turn.text,
                logprobs=[],
                **where,
            )
            emit(ResponseContentPartDoneEvent, type="response.content_part.done", content_index=0, part=part, **where)
        else:
            args = next(arguments)
            emit(
                ResponseOutputItemAddedEvent,
                type="response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for piece in argument_pieces(args):
                emit(
                    ResponseFunctionCallArgumentsDeltaEvent,
                    type="response.function_call_arguments.delta",
                    delta=piece,
                    **where,
                )
            emit(
                ResponseFunctionCallArgumentsDoneEvent,
                type="response.function_call_arguments.done",
                arguments=args,
                **where,
            )
        emit(ResponseOutputItemDoneEvent, type="response.output_item.done", output_index=index, item=item)
    finished = response(answering, turn, done)
    if status == "incomplete":
        emit(ResponseIncompleteEvent, finished["usage"], type="response.incomplete", response=finished)
    else:
        emit(ResponseCompletedEvent, finished["usage"], type="response.completed", response=finished)
    return Rendered(answering.model, events=stream)


def error_event(error: StreamError, sequence_number: int) -> Event:
    """The event the real API sends when a stream fails midway."""
    data = dump(
        ResponseErrorEvent.model_validate(
            {
                "type": "error",
                "code": error.type,
                "message": error.message,
                "param": None,
                "sequence_number": sequence_number,
            }
        )
    )
    return Event("error", compact(data))
