"""Google's Gemini API (``generateContent``, ``streamGenerateContent?alt=sse``): its reader, its usage, its errors.

A reply is a ``GenerateContentResponse``: ``candidates[0].content.parts`` (text, ``thought`` text, whole
``functionCall`` parts), a ``finishReason`` and ``usageMetadata``. A stream sends one such object per event, with
no event names; each holds the next parts, and the usage stated so far (cumulative). The gateway asks for one
candidate, so only candidate 0 is read.

Gemini counts ``promptTokenCount`` (cached part included, as ``cachedContentTokenCount``),
``candidatesTokenCount`` *without* the thoughts, ``thoughtsTokenCount`` apart, and the prompt of provider-run tools
as ``toolUsePromptTokenCount``; :class:`~runner.call.Usage` counts every prompt token in ``input_tokens`` and every
generated one, reasoning included, in ``output_tokens``.
"""

from __future__ import annotations

from typing import Any

from runner.call import Usage
from runner.gateway.protocols.api import Body
from runner.gateway.protocols.reply import (
    DEFAULT_MAX_CHARS,
    Block,
    Reader,
    count_of,
    error_text,
    json_text,
    list_of,
    object_of,
    text_of,
)

#: Google's canonical status name for an HTTP status, as its error bodies carry it.
STATUS_NAMES: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    408: "DEADLINE_EXCEEDED",
    409: "ABORTED",
    411: "INVALID_ARGUMENT",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

#: The keys of a ``Tool`` that declare functions the agent runs (the API reads camelCase and snake_case alike).
FUNCTION_KEYS = ("functionDeclarations", "function_declarations")


def error_body(status: int, message: str, **extra: Any) -> Body:
    """An error as Google's APIs send it: ``{"error": {"code", "message", "status"}}``."""
    return {"error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN"), **extra}}


def field(body: dict[str, Any], name: str) -> Any:
    """``body[name]`` by its camelCase name, or by its snake_case one (the API takes both)."""
    if name in body:
        return body[name]
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
    return body.get(snake)


def read_usage(usage: dict[str, Any]) -> Usage:
    """A ``usageMetadata`` object; zeros where it says nothing."""
    thoughts = count_of(field(usage, "thoughtsTokenCount"))
    return Usage(
        input_tokens=count_of(field(usage, "promptTokenCount")) + count_of(field(usage, "toolUsePromptTokenCount")),
        output_tokens=count_of(field(usage, "candidatesTokenCount")) + thoughts,
        cached_tokens=count_of(field(usage, "cachedContentTokenCount")),
        reasoning_tokens=thoughts,
    )


def usage_object(usage: Usage) -> Body:
    """``usage`` as a ``usageMetadata`` object: the thoughts apart from the candidates, as Gemini counts them."""
    body: Body = {
        "promptTokenCount": usage.input_tokens,
        "candidatesTokenCount": max(usage.output_tokens - usage.reasoning_tokens, 0),
        "totalTokenCount": usage.input_tokens + usage.output_tokens,
    }
    if usage.reasoning_tokens:
        body["thoughtsTokenCount"] = usage.reasoning_tokens
    if usage.cached_tokens:
        body["cachedContentTokenCount"] = usage.cached_tokens
    return body


class GeminiReader(Reader):
    """A Gemini reply: a body's ``candidates[0]``, or a stream of such bodies.

    Consecutive text parts make one text block and consecutive ``thought`` parts one reasoning block; each
    ``functionCall`` part is a tool call of its own (Gemini sends a call whole, its arguments an object). A stream
    is ``finished`` once a candidate states its ``finishReason``, or the prompt was blocked (``promptFeedback``);
    an ``{"error": ...}`` event is an in-stream error. The usage is the last ``usageMetadata`` stated.
    """

    api = "gemini"

    def __init__(self, *, max_chars: int = DEFAULT_MAX_CHARS, max_events: int | None = None) -> None:
        super().__init__(max_chars=max_chars, max_events=max_events)
        self._run: tuple[str, int] | None = None  # the text or reasoning block the next such part joins
        self._number = 0  # blocks begun, for their keys

    def read_usage(self, usage: dict[str, Any]) -> Usage:
        return read_usage(usage)

    def feed(self, event: str, data: Body) -> bool:
        self.events += 1
        if "error" in data and "candidates" not in data:
            self.error = error_text(_error_fields(data["error"]))
            return False
        return self._response(data, streamed=True)

    def read_body(self, body: Body) -> None:
        self._response(body, streamed=False)

    def _response(self, body: Body, *, streamed: bool) -> bool:
        self._note_model(field(body, "modelVersion"))
        self.id = self.id or text_of(field(body, "responseId")) or None
        usage = field(body, "usageMetadata")
        if isinstance(usage, dict):
            self._usage = usage
        if field(object_of(field(body, "promptFeedback")), "blockReason"):
            self.stop_reason = "prompt_blocked"
            self.finished = True
        output = False
        candidates = list_of(body.get("candidates"))
        candidate = object_of(candidates[0]) if candidates else {}
        if not streamed or self.events <= self.max_events:
            for part in list_of(object_of(candidate.get("content")).get("parts")):
                if isinstance(part, dict):
                    output = self._part(part) or output
        finish = text_of(field(candidate, "finishReason"))
        if finish:
            self.stop_reason = finish
            self.finished = True
        return output

    def _part(self, part: dict[str, Any]) -> bool:
        """Keep one part; True when it carried output."""
        call = field(part, "functionCall")
        if isinstance(call, dict):
            self._run = None
            self._number += 1
            block = self._block(self._number, "tool_call", id=call.get("id"), name=text_of(call.get("name")))
            self._add(block, json_text(call.get("args") if call.get("args") is not None else {}))
            return True
        if isinstance(part.get("text"), str):
            kind = "reasoning" if part.get("thought") is True else "text"
            block = self._joined(kind)
            signature = field(part, "thoughtSignature")
            if kind == "reasoning" and isinstance(signature, str):
                block.signature = signature
            self._text(block, part["text"])
            return bool(part["text"])
        kind = next(iter(part), "unknown")
        self._run = None
        self._number += 1
        self._block(self._number, "other", name=kind, raw=part)
        return False

    def _joined(self, kind: str) -> Block:
        """The open block of ``kind``, or a new one."""
        if self._run is None or self._run[0] != kind:
            self._number += 1
            self._run = (kind, self._number)
        return self._block(self._run[1], kind)


def _error_fields(error: Any) -> Any:
    """A Google error object with its ``status`` as the label :func:`error_text` shows."""
    if isinstance(error, dict) and "type" not in error and error.get("status"):
        return {"type": error["status"], "message": error.get("message")}
    return error
