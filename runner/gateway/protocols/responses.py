"""OpenAI Responses: its reader and its usage."""

from __future__ import annotations

from typing import Any

from runner.call import Reply, Usage
from runner.gateway.protocols.api import Body
from runner.gateway.protocols.reply import (
    DEFAULT_MAX_CHARS,
    Reader,
    count_of,
    error_text,
    key_of,
    kind_of,
    list_of,
    object_of,
    text_of,
)

TERMINAL = ("response.completed", "response.incomplete", "response.failed")
"""The events that end a Responses stream."""
_DELTAS = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.function_call_arguments.delta": "tool_call",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
}


def read_usage(usage: dict[str, Any]) -> Usage:
    """A Responses ``usage`` object; zeros where it says nothing."""
    details = object_of(usage.get("input_tokens_details"))
    return Usage(
        input_tokens=count_of(usage.get("input_tokens")),
        output_tokens=count_of(usage.get("output_tokens")),
        cached_tokens=count_of(details.get("cached_tokens")),
        cache_write_tokens=count_of(details.get("cache_write_tokens")),
        reasoning_tokens=count_of(object_of(usage.get("output_tokens_details")).get("reasoning_tokens")),
    )


def usage_object(usage: Usage) -> Body:
    """``usage`` as a Responses ``usage`` object."""
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": usage.cache_write_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }


class ResponsesReader(Reader):
    """A Responses reply: a body's ``output``, or a stream's events.

    A stream is ``finished`` at ``response.completed``, ``response.incomplete`` or ``response.failed``, whose
    ``response`` holds the whole reply (read once, at the end, rather than from the deltas); an ``error`` event or
    ``response.failed`` is an in-stream error. The usage is that of the last lifecycle event that has one.
    """

    api = "responses"

    def __init__(self, *, max_chars: int = DEFAULT_MAX_CHARS, max_events: int | None = None) -> None:
        super().__init__(max_chars=max_chars, max_events=max_events)
        self._final: dict[str, Any] | None = None  # a stream's final response, read in reply()

    def read_usage(self, usage: dict[str, Any]) -> Usage:
        return read_usage(usage)

    def feed(self, event: str, data: Body) -> bool:
        self.events += 1
        kind = kind_of(event, data)
        default = _DELTAS.get(kind)
        if default is not None:  # nearly every event
            if self.events <= self.max_events:
                index = key_of(data.get("output_index"))
                self._text(self.blocks.get(index) or self._block(index, default), data.get("delta"))
            return True
        if kind == "error":
            self.error = error_text(data)
            return False
        response = data.get("response")
        if isinstance(response, dict):
            self._note_model(response.get("model"))
            self.id = text_of(response.get("id")) or self.id
            if isinstance(response.get("usage"), dict):
                self._usage = response["usage"]
            if kind in TERMINAL:
                self.finished = True
                self._final = response
            if kind == "response.failed":
                self.error = error_text(response.get("error") or "response failed")
        elif kind == "response.output_item.added" and self.events <= self.max_events:
            item = object_of(data.get("item"))
            index = key_of(data.get("output_index"))
            itype = text_of(item.get("type"))
            if itype == "function_call":
                self._block(index, "tool_call", id=item.get("call_id"), name=text_of(item.get("name")))
            elif itype in ("reasoning", "message"):
                self._block(index, "reasoning" if itype == "reasoning" else "text")
            else:
                self._block(index, "other", name=itype, raw=item)
        return kind.endswith(".delta")

    def read_body(self, body: Body) -> None:
        self.id = text_of(body.get("id")) or None
        self._note_model(body.get("model"))
        if isinstance(body.get("usage"), dict):
            self._usage = body["usage"]
        self._read_output(body)

    def _read_output(self, body: Body) -> None:
        self.stop_reason = text_of(object_of(body.get("incomplete_details")).get("reason")) or None
        self.stop_reason = self.stop_reason or text_of(body.get("status")) or None
        for number, item in enumerate(list_of(body.get("output"))):
            if not isinstance(item, dict):
                continue
            itype = text_of(item.get("type"))
            if itype == "message":
                for part_number, part in enumerate(list_of(item.get("content"))):
                    if isinstance(part, dict):
                        self._add(self._block((number, part_number), "text"), part.get("text") or part.get("refusal"))
            elif itype == "function_call":
                found = self._block(number, "tool_call", id=item.get("call_id"), name=text_of(item.get("name")))
                self._add(found, item.get("arguments"))
            elif itype == "reasoning":
                found = self._block(number, "reasoning")
                found.redacted = bool(item.get("encrypted_content"))
                for part in list_of(item.get("summary")):
                    if isinstance(part, dict):
                        self._add(found, part.get("text"))
            else:
                self._block(number, "other", name=itype, raw=item)

    def reply(self, *, complete: bool) -> Reply:
        if self._final is not None:  # the whole reply, as the stream's last event stated it
            self.blocks, self.kept, self.dropped = {}, 0, 0
            self._read_output(self._final)
        return super().reply(complete=complete)
