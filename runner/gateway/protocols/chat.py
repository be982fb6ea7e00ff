"""Chat Completions: its reader, its usage, and, as the pivot of every translation, the shapes both other APIs'
translations build and what every translator from a chat-completions stream shares (reading one chunk, opening and
closing once).

A chunk carries, for each choice, a ``delta`` (text, refusal text, tool-call pieces) and maybe a ``finish_reason``;
the last chunk of an upstream asked for ``include_usage`` carries ``usage`` and no choices. The gateway asks for one
choice, so only choice 0 is read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from runner.call import Usage
from runner.gateway.protocols.api import Body, StreamEvent
from runner.gateway.protocols.reply import DEFAULT_MAX_CHARS, Reader, count_of, error_text, list_of, object_of, text_of


def read_usage(usage: dict[str, Any]) -> Usage:
    """A chat-completions ``usage`` object; zeros where it says nothing."""
    prompt = object_of(usage.get("prompt_tokens_details"))
    return Usage(
        input_tokens=count_of(usage.get("prompt_tokens")),
        output_tokens=count_of(usage.get("completion_tokens")),
        cached_tokens=count_of(prompt.get("cached_tokens")),
        cache_write_tokens=count_of(prompt.get("cache_write_tokens")),
        reasoning_tokens=count_of(object_of(usage.get("completion_tokens_details")).get("reasoning_tokens")),
    )


def usage_object(usage: Usage) -> Body:
    """``usage`` as a chat-completions ``usage`` object (cache writes stated only when there are some)."""
    prompt: Body = {"cached_tokens": usage.cached_tokens}
    if usage.cache_write_tokens:
        prompt["cache_write_tokens"] = usage.cache_write_tokens
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.input_tokens + usage.output_tokens,
        "prompt_tokens_details": prompt,
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def tool_message(call_id: Any, content: str) -> Body:
    """A chat ``tool`` message: the result of the call ``call_id``."""
    return {"role": "tool", "tool_call_id": str(call_id), "content": content}


def function_tool(name: Any, description: Any, parameters: Any, strict: Any) -> Body:
    """A chat function tool; a falsy ``description`` and a ``None`` ``parameters`` or ``strict`` are left out."""
    fn: Body = {"name": str(name)}
    if description:
        fn["description"] = description
    if parameters is not None:
        fn["parameters"] = parameters
    if strict is not None:
        fn["strict"] = strict
    return {"type": "function", "function": fn}


@dataclass(frozen=True, slots=True)
class ToolCallPiece:
    """One chat ``tool_calls`` delta entry: a call's first piece names it, later ones add to its arguments."""

    index: int
    """Which call of the reply the piece belongs to (parallel calls may interleave)."""
    id: str
    """The call's id (in its first piece only)."""
    name: str
    """The function's name (in its first piece only)."""
    arguments: str
    """The next piece of the call's JSON arguments, possibly empty."""


def _tool_call_piece(call: dict[str, Any]) -> ToolCallPiece:
    fn = call.get("function") or {}
    arguments = fn.get("arguments")
    return ToolCallPiece(
        index=int(call.get("index", 0)),
        id=str(call.get("id", "")),
        name=str(fn.get("name", "")),
        arguments=arguments if isinstance(arguments, str) else "",
    )


class FromChatStream(ABC):
    """A stream translator whose source is chat-completions chunks; subclasses give the target API's events.

    ``feed`` hands each piece of choice 0 to the subclass in the order the chunk holds it: text, refusal text, then
    tool-call pieces; it keeps the latest usage and finish reason for the closing events. The target's opening
    events come before the first chunk's (or from ``close`` when no chunk came), its closing events once.
    """

    def __init__(self) -> None:
        self._started = False
        self._closed = False
        self._usage = Usage()
        self._finish: str | None = None  # the chat finish_reason, None until one arrives

    def feed(self, event: str, data: Body) -> list[StreamEvent]:
        """The events one chat chunk gives (chat events have no name: ``event`` is ``""``)."""
        events = self._start(data)
        if isinstance(data.get("usage"), dict):
            self._usage = read_usage(data["usage"])
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            text = delta.get("content")
            if isinstance(text, str) and text:
                events += self._text(text, False)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                events += self._text(refusal, True)
            for call in delta.get("tool_calls") or []:
                events += self._tool_call(_tool_call_piece(call))
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
        return events

    def close(self) -> list[StreamEvent]:
        """The opening events if no chunk came, then the closing ones (once; later calls give none)."""
        if self._closed:
            return []
        self._closed = True
        return self._start({}) + self._end()

    def _start(self, chunk: Body) -> list[StreamEvent]:
        if self._started:
            return []
        self._started = True
        return self._opening(chunk)

    @abstractmethod
    def _opening(self, chunk: Body) -> list[StreamEvent]:
        """The events that open the target's stream; ``chunk`` is the first chat chunk (``{}`` when none came)."""

    @abstractmethod
    def _text(self, text: str, refusal: bool) -> list[StreamEvent]:
        """The events for a piece of the reply's text (``refusal``: of its refusal text)."""

    @abstractmethod
    def _tool_call(self, piece: ToolCallPiece) -> list[StreamEvent]:
        """The events for a piece of one tool call."""

    @abstractmethod
    def _end(self) -> list[StreamEvent]:
        """The events that close the target's stream, from what was fed."""


class ChatReader(Reader):
    """A chat-completions reply: a body's ``choices[0].message``, or a stream's chunks.

    A stream is ``finished`` once a chunk carrying a ``finish_reason`` was seen and, when ``usage_expected`` (the
    request set ``stream_options.include_usage``, as the gateway always asks of a chat provider), a chunk carrying
    ``usage`` too; they may be one chunk or come in either order. A chunk that is an ``{"error": ...}`` object (as
    several OpenAI-compatible providers send) is an in-stream error. The usage is the last one a chunk carried.
    """

    api = "chat"

    def __init__(
        self, *, usage_expected: bool = True, max_chars: int = DEFAULT_MAX_CHARS, max_events: int | None = None
    ) -> None:
        super().__init__(max_chars=max_chars, max_events=max_events)
        self.usage_expected = usage_expected
        self._finish_seen = False

    def read_usage(self, usage: dict[str, Any]) -> Usage:
        return read_usage(usage)

    def feed(self, event: str, data: Body) -> bool:
        self.events += 1
        choices = data.get("choices")
        if (
            self.returned_model is not None
            and type(choices) is list
            and len(choices) == 1
            and data.get("usage") is None
        ):
            # Nearly every chunk after the first is one text delta: taken first, and fastest. (OpenAI's chunks carry
            # ``"usage": null`` until the last when usage is asked for, as the gateway always asks.)
            choice = choices[0]
            delta = choice.get("delta") if type(choice) is dict else None
            if (
                type(delta) is dict
                and len(delta) == 1
                and "content" in delta
                and not choice.get("finish_reason")
                and choice.get("index", 0) == 0
                and self.events <= self.max_events
            ):
                piece = delta["content"]
                self._text(self.blocks.get("text") or self._block("text", "text"), piece)
                return bool(piece)
        return self._chunk(data)

    def _chunk(self, data: Body) -> bool:
        if "error" in data and "choices" not in data:
            self.error = error_text(data["error"])
            return False
        self._note_model(data.get("model"))
        self.id = self.id or (data.get("id") if isinstance(data.get("id"), str) else None)
        if isinstance(data.get("usage"), dict):
            self._usage = data["usage"]
        output = False
        for choice in list_of(data.get("choices")):
            if not isinstance(choice, dict):
                continue
            delta = object_of(choice.get("delta"))
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            output = output or bool(delta.get("content") or delta.get("tool_calls") or reasoning)
            if choice.get("finish_reason"):
                self._finish_seen = True
            if choice.get("index", 0) != 0 or self.events > self.max_events:
                continue
            if reasoning:
                self._add(self._block("reasoning", "reasoning"), reasoning)
            if delta.get("content"):
                self._add(self._block("text", "text"), delta["content"])
            for call in list_of(delta.get("tool_calls")):
                if not isinstance(call, dict):
                    continue
                fn = object_of(call.get("function"))
                block = self._block(("tool", count_of(call.get("index"))), "tool_call", id=call.get("id"))
                block.id = block.id or (call.get("id") if isinstance(call.get("id"), str) else None)
                block.name = block.name or text_of(fn.get("name"))
                self._add(block, fn.get("arguments"))
            if choice.get("finish_reason"):
                self.stop_reason = text_of(choice["finish_reason"]) or None
        self.finished = self._finish_seen and (self._usage is not None or not self.usage_expected)
        return output

    def read_body(self, body: Body) -> None:
        self.id = text_of(body.get("id")) or None
        self._note_model(body.get("model"))
        if isinstance(body.get("usage"), dict):
            self._usage = body["usage"]
        choices = list_of(body.get("choices"))
        first = object_of(choices[0]) if choices else {}
        message = object_of(first.get("message"))
        self.stop_reason = text_of(first.get("finish_reason")) or None
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        if reasoning:
            self._add(self._block(0, "reasoning"), reasoning)
        if message.get("content"):
            self._add(self._block(1, "text"), message["content"])
        for number, call in enumerate(list_of(message.get("tool_calls"))):
            call = object_of(call)
            fn = object_of(call.get("function"))
            block = self._block(("tool", number), "tool_call", id=call.get("id"), name=text_of(fn.get("name")))
            self._add(block, fn.get("arguments"))
