"""Chat Completions, the pivot of every translation: the shapes both other APIs' translations build, and what every
translator from a chat-completions stream shares (reading one chunk, opening and closing once).

A chunk carries, for each choice, a ``delta`` (text, refusal text, tool-call pieces) and maybe a ``finish_reason``;
the last chunk of an upstream asked for ``include_usage`` carries ``usage`` and no choices. The gateway asks for one
choice, so only choice 0 is read.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from runner.gateway.protocols.api import Body, StreamEvent
from runner.gateway.protocols.tokens import TokenUsage, chat_usage


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
        self._usage = TokenUsage()
        self._finish: str | None = None  # the chat finish_reason, None until one arrives

    def feed(self, event: str, data: Body) -> list[StreamEvent]:
        """The events one chat chunk gives (chat events have no name: ``event`` is ``""``)."""
        events = self._start(data)
        if isinstance(data.get("usage"), dict):
            self._usage = chat_usage(data["usage"])
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
