"""What a test scripts the fake to answer, and what the fake records.

A :class:`Reply` is a raw HTTP answer (any status, any body, transport faults). A :class:`Turn` is a
protocol-neutral model turn (text, tool calls, usage) that the fake renders in the protocol of the request's path,
streamed when the request asked for a stream. :class:`TokenCount` answers ``/v1/messages/count_tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

OPENAI_MODEL = "gpt-fake-2026-01-01"
ANTHROPIC_MODEL = "claude-fake-20260101"
GEMINI_MODEL = "gemini-fake-2026-01-01"

Stop = Literal["end", "tools", "max_tokens"]
"""Why a turn ended: ``end`` (chat ``stop``, messages ``end_turn``, responses ``completed``), ``tools`` (chat
``tool_calls``, messages ``tool_use``) or ``max_tokens`` (chat ``length``, messages ``max_tokens``, responses
``incomplete`` with reason ``max_output_tokens``)."""


@dataclass
class Reply:
    """One scripted answer. ``body`` is JSON-encoded unless it is bytes or str."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers; a ``content-type`` here replaces the default ``application/json``."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    hang: bool = False
    """Hold the connection without answering until the fake closes (tests a read timeout)."""
    malformed: bool = False
    """Answer 200 with a body that is not JSON."""
    drop: bool = False
    """Close the connection without answering (tests a reset)."""
    chunked: bool = False
    """Send the body with chunked transfer coding instead of a Content-Length."""
    close: bool = False
    """Answer with ``Connection: close``, then close the connection."""
    hangup: bool = False
    """Close the connection after answering without saying so first (as an idle keep-alive timeout does)."""


@dataclass(frozen=True)
class Usage:
    """Token counts of one turn, protocol-neutral: ``input_tokens`` is the whole prompt, cached part included."""

    input_tokens: int = 11
    """Every prompt token: OpenAI's ``prompt_tokens``/``input_tokens``; Anthropic's ``input_tokens`` +
    ``cache_read_input_tokens`` + ``cache_creation_input_tokens``."""
    output_tokens: int = 7
    """Every generated token, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens read from the cache (OpenAI ``cached_tokens``, Anthropic ``cache_read_input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning (OpenAI ``reasoning_tokens``, Anthropic ``output_tokens_details.thinking_tokens``,
    which the fake states only when this is not 0)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the cache (Anthropic ``cache_creation_input_tokens``, OpenAI ``cache_write_tokens``)."""

    def __post_init__(self) -> None:
        if (
            min(
                self.input_tokens,
                self.output_tokens,
                self.cached_tokens,
                self.reasoning_tokens,
                self.cache_write_tokens,
            )
            < 0
        ):
            raise ValueError(f"negative token count in {self}")
        if self.cached_tokens + self.cache_write_tokens > self.input_tokens:
            raise ValueError(f"cached and cache-write tokens exceed the input tokens in {self}")
        if self.reasoning_tokens > self.output_tokens:
            raise ValueError(f"reasoning tokens exceed the output tokens in {self}")

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_tokens + other.cached_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class ToolCall:
    """One function call the model makes."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    """The call's arguments; JSON-encoded on the OpenAI wires, an object on Anthropic's."""
    id: str | None = None
    """The call's id (chat ``id``, responses ``call_id``, messages ``id``); None: ``call_fake<n>_<i>`` on OpenAI,
    ``toolu_fake<n>_<i>`` on Anthropic, where n numbers the request and i the call."""


@dataclass(frozen=True)
class StreamError:
    """An error event sent in the middle of a stream (Anthropic ``event: error``, responses ``event: error``, chat
    ``data: {"error": ...}``), after which the stream ends (properly terminated, without its final events)."""

    after: int = 1
    """How many of the turn's events go out before the error."""
    type: str = "overloaded_error"
    """The error's type (Anthropic ``error.type``, chat ``error.type``, responses ``code``)."""
    message: str = "Overloaded"
    """The error's message."""


@dataclass(frozen=True)
class Turn:
    """One model turn, rendered in the protocol of the request's path, as a stream when the request says
    ``"stream": true``. The last four fields script stream faults and are ignored when not streaming."""

    text: str = "ok"
    """The assistant's text; rendered even when empty unless there are tool calls."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    """Function calls, after the text."""
    usage: Usage = field(default_factory=Usage)
    """The usage the fake reports."""
    model: str | None = None
    """The model named in the answer; None: :data:`OPENAI_MODEL` or :data:`ANTHROPIC_MODEL` by protocol."""
    stop: Stop | None = None
    """Why the turn ended; None: ``tools`` when there are tool calls, else ``end``."""
    headers: dict[str, str] = field(default_factory=dict)
    """Extra response headers."""
    delay: float = 0.0
    """Seconds to wait before answering."""
    cut_after: int | None = None
    """Send only the first N events, then close the connection without ending the chunked body."""
    delay_between: float = 0.0
    """Seconds between events: event N is due N × this after the first, whenever the reader took the last one."""
    error: StreamError | None = None
    """An in-stream error event in place of the rest of the stream."""

    @property
    def stop_reason(self) -> Stop:
        """:attr:`stop`, or what it defaults to."""
        return self.stop or ("tools" if self.tool_calls else "end")


@dataclass(frozen=True)
class TokenCount:
    """The answer to ``POST /v1/messages/count_tokens``: ``{"input_tokens": N}``."""

    input_tokens: int = 13
    """N."""


Scripted = Reply | Turn | TokenCount
"""Anything that can be pushed onto the script or returned by a responder."""


@dataclass
class Seen:
    """One request the fake received."""

    method: str
    path: str
    """The request target as sent, query included (Claude Code posts ``/v1/messages?beta=true``)."""
    headers: dict[str, str]
    body: Any
    peer: Any = None
    """The client's address: equal for requests that came over one kept-alive connection."""

    @property
    def stream(self) -> bool:
        """Whether the request asked for a stream: its body says ``"stream": true``, or (Gemini) its path names
        ``streamGenerateContent``."""
        return (
            isinstance(self.body, dict) and self.body.get("stream") is True
        ) or ":streamGenerateContent" in self.path


@dataclass
class Reported:
    """What the fake put on the wire for one answered request (requests that hung or were dropped have none).

    A stream's entry is updated before each event is written, so once a client has read an event, the entry
    already states it."""

    path: str
    """The request target, as in :attr:`Seen.path`."""
    stream: bool
    """Whether the request asked for a stream (a :class:`Turn` then answers with events; a :class:`Reply` as
    scripted)."""
    status: int
    """The HTTP status sent."""
    model: str | None = None
    """The model the answer named (None when it named none)."""
    wire_usage: dict[str, Any] | None = None
    """The usage object as the protocol stated it: chat ``usage``, responses ``response.usage``, messages
    ``usage`` (for a stream, ``message_start``'s usage updated by ``message_delta``'s); None if none was sent."""
    usage: Usage | None = None
    """:attr:`wire_usage` in neutral terms; None if none was sent."""
    complete: bool = False
    """Whether the whole answer went out (for a stream: up to its final event)."""
    token_count: int | None = None
    """For ``count_tokens``: the count sent."""


def total_usage(reported: list[Reported]) -> Usage:
    """The sum of the usage the fake reported over these entries (entries without usage count zero)."""
    total = Usage(0, 0)
    for entry in reported:
        if entry.usage is not None:
            total = total + entry.usage
    return total


def usage_from_wire(protocol: str, usage: dict[str, Any]) -> Usage:
    """A protocol's usage object (``chat``, ``responses``, ``messages`` or ``gemini``) in neutral terms."""
    if protocol == "gemini":  # candidatesTokenCount leaves the thoughts out
        thoughts = usage.get("thoughtsTokenCount") or 0
        return Usage(
            usage.get("promptTokenCount") or 0,
            (usage.get("candidatesTokenCount") or 0) + thoughts,
            usage.get("cachedContentTokenCount") or 0,
            thoughts,
        )
    if protocol == "messages":
        cached = usage.get("cache_read_input_tokens") or 0
        written = usage.get("cache_creation_input_tokens") or 0
        thinking = (usage.get("output_tokens_details") or {}).get("thinking_tokens") or 0
        return Usage(usage["input_tokens"] + cached + written, usage["output_tokens"], cached, thinking, written)
    if protocol == "chat":
        prompt = usage.get("prompt_tokens_details") or {}
        completion = usage.get("completion_tokens_details") or {}
        return Usage(
            usage["prompt_tokens"],
            usage["completion_tokens"],
            prompt.get("cached_tokens") or 0,
            completion.get("reasoning_tokens") or 0,
            prompt.get("cache_write_tokens") or 0,
        )
    prompt = usage.get("input_tokens_details") or {}
    completion = usage.get("output_tokens_details") or {}
    return Usage(
        usage["input_tokens"],
        usage["output_tokens"],
        prompt.get("cached_tokens") or 0,
        completion.get("reasoning_tokens") or 0,
        prompt.get("cache_write_tokens") or 0,
    )


def openai_completion(
    content: str | None = "ok",
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    cached_tokens: int = 0,
    model: str = OPENAI_MODEL,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat-completions response body with the given usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1767225600,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {"cached_tokens": cached_tokens},
        },
    }


def anthropic_message(
    content: list[dict[str, Any]] | None = None,
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
    cache_read: int = 0,
    stop_reason: str = "end_turn",
    model: str = ANTHROPIC_MODEL,
) -> dict[str, Any]:
    """A Messages response body; ``content`` defaults to one text block."""
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content if content is not None else [{"type": "text", "text": "ok"}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read,
        },
    }
