"""One model call, and the tokens it used: the one model of a call that everything shares.

A call is made by the agent through the gateway, or by a judge through the providers' client. Whoever makes it
builds one :class:`ModelCall` when it ends, however it ends, and hands that one event on:

- the gateway's ledger books its figures (``usage``, ``latency_s``, ``returned_model``...) into the sample's
  accounting, which the journal keeps and the record publishes;
- the transcript store keeps the whole of it (the request as sent, the reply assembled), redacted;
- the timeline and the exports read it back.

:class:`Usage` is the one count of tokens; counts add up with ``+``. This module imports nothing of the project:
every stage may use it.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

Api = Literal["chat", "messages", "responses", "gemini"]
"""A wire API for model calls: OpenAI Chat Completions, Anthropic Messages, OpenAI Responses, or Google's Gemini
(``generateContent``)."""

CallApi = Api | Literal["count_tokens"]
"""A wire API, or Anthropic's token counting (``POST /v1/messages/count_tokens``), which is not a step."""

Caller = Literal["candidate", "judge_a", "judge_b"]
"""Who made a call: the agent through the gateway, or the judge in slot A or B."""

CallOutcome = Literal["ok", "provider_error", "stream_cut", "agent_disconnected", "refused"]
"""How a call ended: answered; the provider failed before answering; the provider's stream broke mid-way; the caller
hung up mid-stream; refused by the gateway before any provider call (a request that is malformed, too large or
untranslatable, or a cap)."""

BodyEncoding = Literal["json", "text", "binary", "omitted"]
"""How a body is kept: parsed JSON; text that is not JSON; bytes that are not UTF-8 (base64); or not kept (too large,
or past the sample's capture cap)."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class Usage(_Model):
    """Tokens one call used, or several calls together (``a + b``), as the provider reported them.

    ``input_tokens`` counts every prompt token, as OpenAI does; the cache reads and writes are parts of it (Anthropic
    reports its uncached input apart, and each reader adds the parts up).
    """

    input_tokens: int = 0
    """Every prompt token, those read from and written to the provider's cache included."""
    output_tokens: int = 0
    """Every generated token, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens read from the provider's cache (a part of ``input_tokens``)."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache (a part of ``input_tokens``), where the provider says so."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning (a part of ``output_tokens``), where the provider says so."""

    def __add__(self, other: Usage) -> Self:
        """The sum, field by field: a subclass adds up its own counts too."""
        return type(self).model_construct(
            **{name: getattr(self, name) + getattr(other, name) for name in type(self).model_fields}
        )


class Body(_Model):
    """A request or error body as it arrived."""

    encoding: BodyEncoding
    """How it is kept (see :data:`BodyEncoding`)."""
    content: Any = None
    """The parsed JSON value (``json``), the text (``text``), the base64 of the bytes (``binary``); ``None`` when
    ``omitted``."""
    size: int
    """Its length in bytes on the wire (for an omitted body, as declared or as counted)."""
    note: str | None = None
    """Why it is kept this way when not plain JSON: ``not JSON``, ``not UTF-8``, ``over the capture cap``."""

    @classmethod
    def of_bytes(cls, raw: bytes, note: str | None = None) -> Body:
        """``raw`` as kept: parsed when it is JSON, else its text, else its bytes (base64)."""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return cls(
                encoding="binary", content=base64.b64encode(raw).decode(), size=len(raw), note=note or "not UTF-8"
            )
        try:
            return cls(encoding="json", content=json.loads(text), size=len(raw), note=note)
        except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser goes
            return cls(encoding="text", content=text, size=len(raw), note=note or "not JSON")


class TextBlock(_Model):
    """Text the model wrote."""

    type: Literal["text"] = "text"
    """The tag: ``text``."""
    text: str
    """The text, the stream's deltas joined."""


class ToolCallBlock(_Model):
    """A tool call the model made (a function call in OpenAI's APIs, a ``tool_use`` block in Messages)."""

    type: Literal["tool_call"] = "tool_call"
    """The tag: ``tool_call``."""
    id: str | None
    """The call's id, which the tool result refers to."""
    name: str
    """The tool's name."""
    arguments: str
    """The arguments as the model wrote them (JSON text, the stream's deltas joined; may be cut or invalid)."""
    input: Any = None
    """``arguments`` parsed, when they are valid JSON; else ``None``."""


class ReasoningBlock(_Model):
    """Reasoning or thinking the provider returned (Anthropic ``thinking``, OpenAI reasoning summaries)."""

    type: Literal["reasoning"] = "reasoning"
    """The tag: ``reasoning``."""
    text: str
    """The reasoning text; empty when the provider returned it redacted or encrypted."""
    redacted: bool = False
    """Whether the provider sent it redacted or encrypted (``redacted_thinking``, ``encrypted_content``)."""
    signature: str | None = None
    """The provider's signature over it, where given."""


class OtherBlock(_Model):
    """A content block of a kind the readers do not model, kept as the provider sent it."""

    type: Literal["other"] = "other"
    """The tag: ``other``."""
    provider_type: str
    """The provider's name for it (``server_tool_use``, ``refusal``, ...)."""
    raw: Any
    """The block as sent."""


ResponseBlock = Annotated[TextBlock | ToolCallBlock | ReasoningBlock | OtherBlock, Field(discriminator="type")]
"""One block of a reply."""


class Reply(_Model):
    """The provider's reply as one message, whatever its API: a body read, or a stream's events put together."""

    id: str | None = None
    """The provider's id of the reply."""
    blocks: list[ResponseBlock] = Field(default_factory=list)
    """Text, tool calls and reasoning, in the order they began."""
    stop_reason: str | None = None
    """Why the model stopped, in the provider's words (``end_turn``, ``tool_use``, ``stop``, ``tool_calls``,
    ``length``...); ``None`` when the stream was cut before it said."""
    complete: bool = True
    """Whether the reply arrived whole; ``False`` for a stream cut by either side (then this is what arrived)."""
    stream_events: int = 0
    """Stream events received from the provider; 0 when not streamed."""
    dropped_chars: int = 0
    """Characters of text, arguments or reasoning past what one reply keeps (or past the sample's capture cap)."""


class StreamCut(_Model):
    """A stream that ended before its final event."""

    by: Literal["provider", "caller"]
    """Who cut it: the provider (connection dropped, an ``error`` event, no final event) or the caller hung up."""
    reason: str
    """What the gateway saw, bounded."""
    events_received: int
    """Provider events received before the cut."""


class ModelCall(_Model):
    """One model call: who made it, the request as sent, the reply assembled, what it used, and how it ended.

    The ledger and the journal keep a call's figures (:meth:`figures`: no request, headers or reply text); the
    transcript keeps all of it, every secret redacted (:mod:`runner.transcript`).
    """

    kind: Literal["model_call"] = "model_call"
    """The tag, among a transcript's events: ``model_call``."""
    seq: int = 0
    """The call's number among its caller's calls of the sample, from 0, in arrival order."""
    caller: Caller = "candidate"
    """Who made it."""
    judge: str | None = None
    """The judge's alias (``provider/model``) when ``caller`` is a judge slot."""
    api: CallApi
    """The API the caller spoke."""
    provider_api: CallApi | None
    """The API the provider was spoken to in (``api`` when passed through); ``None`` when it was never sent."""
    requested_model: str | None
    """The model the caller asked for (the gateway sends every request to the run's candidate)."""
    stream: bool
    """Whether the caller asked for a stream."""
    started_at: datetime | None = None
    """When the request arrived (UTC); ``None`` for a call journaled before calls were timed."""
    latency_s: float = 0.0
    """Seconds from the request's arrival to its last byte or failure, retries and waits included."""
    ttft_s: float | None = None
    """Streams: seconds from the request's arrival to the provider's first output event (a text, tool-call or
    reasoning delta); ``None`` when not streamed or when none came."""
    attempts: int = 0
    """Provider tries, retries before the first byte included; 0 when it was never sent."""
    status: int
    """The HTTP status the caller got."""
    outcome: CallOutcome
    """How the call ended."""
    error: str | None = None
    """A bounded description when ``outcome`` is not ``ok``."""
    usage: Usage | None = None
    """The tokens the provider reported (for a cut stream, what it reported before the cut); ``None`` when it
    reported none."""
    returned_model: str | None = None
    """The model id the provider returned."""
    request_headers: dict[str, str] = Field(default_factory=dict)
    """The caller's request headers, names lower-cased (a judge's call has none of its own)."""
    request: Body | None = None
    """The request body as the caller sent it, before any translation; ``None`` in a call's figures."""
    response: Reply | None = None
    """The reply; ``None`` when none began (a refusal, a provider failure). A call's figures keep it without its
    blocks."""
    error_body: Body | None = None
    """The error reply the caller got, when the call failed before a stream began."""
    cut: StreamCut | None = None
    """Set when a stream ended before its final event."""
    content_omitted: bool = False
    """The call came after the sample's capture cap: its figures are kept, its request and reply are not."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_shapes(cls, value: Any) -> Any:
        """Read a call as journals and transcripts of earlier versions wrote it: tokens as flat fields (a journal's
        calls), or the usage and the model id inside the reply (a transcript's, which also named the reply's API)."""
        if not isinstance(value, dict) or "usage" in value:
            return value
        fields = dict(value)
        flat = {name: fields.pop(name) for name in _FLAT_USAGE if name in fields}
        if flat:
            fields["usage"] = flat
        response = fields.get("response")
        if isinstance(response, dict) and {"api", "usage", "model"} & response.keys():
            response = dict(response)
            response.pop("api", None)
            fields["usage"] = response.pop("usage", None)
            model = response.pop("model", None)
            fields.setdefault("returned_model", model)
            fields["response"] = response
        return fields

    def figures(self) -> ModelCall:
        """The call without its content (the request, its headers, the reply's blocks, the error body): what the
        ledger and the journal keep, and the timeline shows beside the conversation."""
        response = self.response
        if (
            self.request is None
            and not self.request_headers
            and self.error_body is None
            and not (response and response.blocks)
        ):
            return self
        kept = None if response is None else response.model_copy(update={"blocks": []})
        return self.model_copy(update={"request": None, "response": kept, "request_headers": {}, "error_body": None})


_FLAT_USAGE = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
"""The token fields a journaled call carried before :class:`Usage` held them."""
