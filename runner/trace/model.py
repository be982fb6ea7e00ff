"""The transcript of one sample: every model call the host saw, resolved to full content (version 1).

This is the reader's view. On disk a transcript is content-addressed (:mod:`runner.trace.storage`): each message,
tool list and system prompt is stored once however often the agent resent it; :func:`runner.trace.reader.
load_transcript` puts the requests back together, so a reader never sees a reference.

A transcript is a list of events in the order the gateway (or a judge's client) finished them, each tagged by
``kind`` and joined in the discriminated union :data:`TranscriptEvent`:

- :class:`ModelCallEvent`: one model call, the candidate's (through the gateway) or a judge's: the request as the
  caller sent it, the response assembled into one message (a stream's events put together: text, tool calls,
  reasoning, stop reason, usage), or the failure (status, error, and what arrived of a cut stream);
- :class:`CapReachedEvent`: the sample's capture cap was reached; later calls keep their figures but not their
  content, and this event counts what was left out.

Every secret the host knows of (provider keys, the sample's gateway token) is replaced by ``[REDACTED]`` in headers
and bodies before anything is stored. Content the agent or the model sent is kept as sent (escape it where shown).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TRANSCRIPT_VERSION = 1
"""The version of the transcript's models; a reader migrates older ones."""

REDACTED = "[REDACTED]"
"""What replaces a secret in a stored header or body (as the provider clients redact their keys)."""

Caller = Literal["candidate", "judge_a", "judge_b"]
"""Who made a call: the agent through the gateway, or the judge in slot A or B."""

CallApi = Literal["chat", "responses", "messages", "count_tokens"]
"""A wire API: OpenAI chat completions, OpenAI Responses, Anthropic Messages, or Messages' token counting."""

CallOutcome = Literal["ok", "provider_error", "stream_cut", "agent_disconnected", "refused"]
"""How a call ended, as :class:`runner.gateway.model.ModelCall` names it: answered; the provider failed before
answering; the provider's stream broke; the caller hung up mid-stream; refused by the gateway before any provider
call (a malformed, too large or untranslatable request, a cap)."""

BodyEncoding = Literal["json", "text", "binary", "omitted"]
"""How a body was kept: parsed JSON; text that is not JSON; bytes that are not UTF-8 (base64); or not kept (too
large, or past the sample's cap)."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class Body(_Model):
    """A request or response body as it arrived, secrets redacted."""

    encoding: BodyEncoding
    """How it is kept (see :data:`BodyEncoding`)."""
    content: Any = None
    """The parsed JSON value (``json``), the text (``text``), the base64 of the bytes (``binary``); ``None`` when
    ``omitted``."""
    size: int
    """Its length in bytes on the wire (for an omitted body, as declared or as counted)."""
    note: str | None = None
    """Why it is kept this way when not plain JSON: ``not JSON: ...``, ``not UTF-8``, ``over the capture cap``."""


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
    """A content block of a kind the assembler does not model, kept as the provider sent it."""

    type: Literal["other"] = "other"
    """The tag: ``other``."""
    provider_type: str
    """The provider's name for it (``server_tool_use``, ``refusal``, ...)."""
    raw: Any
    """The block as sent."""


ResponseBlock = Annotated[TextBlock | ToolCallBlock | ReasoningBlock | OtherBlock, Field(discriminator="type")]
"""One block of an assembled response."""


class ResponseUsage(_Model):
    """Tokens the provider reported for one call."""

    input_tokens: int = 0
    """Prompt tokens, cached ones included."""
    output_tokens: int = 0
    """Completion tokens, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning, where reported."""


class AssembledResponse(_Model):
    """The provider's reply as one message: a non-streamed body read, or a stream's events put together.

    API-neutral: the same shape whether the provider spoke chat completions, Responses or Messages.
    """

    api: CallApi
    """The API the provider answered in (the events assembled are in this API)."""
    id: str | None = None
    """The provider's id of the reply."""
    model: str | None = None
    """The model id the provider returned."""
    blocks: list[ResponseBlock] = Field(default_factory=list)
    """Text, tool calls and reasoning, in the order they began."""
    stop_reason: str | None = None
    """Why the model stopped, in the provider's words (``end_turn``, ``tool_use``, ``stop``, ``tool_calls``,
    ``length``...); ``None`` when the stream was cut before it said."""
    usage: ResponseUsage | None = None
    """Tokens the provider reported; ``None`` when it reported none."""
    complete: bool = True
    """Whether the reply arrived whole; ``False`` for a stream cut by either side (then this is what arrived)."""
    stream_events: int = 0
    """Stream events received from the provider; 0 when not streamed."""
    dropped_chars: int = 0
    """Characters of text, arguments or reasoning not kept because the sample's capture cap was reached."""


class StreamCut(_Model):
    """A stream that ended before its final event."""

    by: Literal["provider", "caller"]
    """Who cut it: the provider (connection dropped, an ``error`` event, no final event) or the caller hung up."""
    reason: str
    """What the gateway saw, bounded and redacted."""
    events_received: int
    """Provider events received before the cut."""


class ModelCallEvent(_Model):
    """One model call: the request as sent, the response as assembled, and how it ended."""

    kind: Literal["model_call"] = "model_call"
    """The tag: ``model_call``."""
    seq: int
    """The call's number within its caller's calls of this sample, from 0, in arrival order."""
    caller: Caller
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
    started_at: datetime
    """When the request arrived (UTC)."""
    latency_s: float
    """Seconds from the request's arrival to its last byte or failure."""
    ttft_s: float | None = None
    """Streams: seconds to the provider's first output event; ``None`` when none came or not streamed."""
    request_headers: dict[str, str] = Field(default_factory=dict)
    """The caller's request headers, names lower-cased, secrets redacted (the gateway's token, keys)."""
    request: Body
    """The request body as the caller sent it (before any translation), secrets redacted."""
    response: AssembledResponse | None = None
    """The reply assembled; ``None`` when no reply began (a refusal or a provider failure)."""
    status: int
    """The HTTP status the caller got."""
    outcome: CallOutcome
    """How the call ended."""
    error: str | None = None
    """A bounded, redacted description when ``outcome`` is not ``ok``."""
    error_body: Body | None = None
    """The error reply the caller got, when the call failed before a stream began."""
    cut: StreamCut | None = None
    """Set when a stream ended before its final event."""
    content_omitted: bool = False
    """The call came after the sample's capture cap: its figures are kept, its request and response are not."""


class CapReachedEvent(_Model):
    """The sample's capture cap was reached: what came after is counted, not kept; the sample goes on."""

    kind: Literal["cap_reached"] = "cap_reached"
    """The tag: ``cap_reached``."""
    caller: Caller
    """Whose part of the transcript reached its cap."""
    limit_bytes: int
    """The cap: bytes of distinct content (uncompressed JSON) kept per sample and caller."""
    calls_omitted: int
    """Calls whose content was not kept (their figures are)."""
    bytes_omitted: int
    """Bytes of content not kept, as it would have been stored."""


TranscriptEvent = Annotated[ModelCallEvent | CapReachedEvent, Field(discriminator="kind")]
"""One event of a transcript."""


class SampleKey(_Model):
    """Which sample: a task and an epoch of one run."""

    task_id: str
    """The task's id."""
    epoch: int
    """The epoch, from 1."""

    def label(self) -> str:
        """``<task>.e<epoch>``, as logs and file names spell it."""
        return f"{self.task_id}.e{self.epoch}"


class Transcript(_Model):
    """Every model call of one sample, the candidate's and the judges', each in order."""

    version: int = TRANSCRIPT_VERSION
    """The transcript format's version."""
    run_id: str | None
    """The run it belongs to, from the journal."""
    sample: SampleKey
    """Which sample."""
    events: list[TranscriptEvent] = Field(default_factory=list)
    """The candidate's events, then the judges' (slot A, then B), each caller's calls in arrival order (``seq``)."""

    def calls(self, caller: Caller | None = None) -> list[ModelCallEvent]:
        """The model calls, all or only ``caller``'s."""
        return [e for e in self.events if isinstance(e, ModelCallEvent) and (caller is None or e.caller == caller)]


class TranscriptRef(_Model):
    """Where one part of a sample's transcript is stored, and its digest: journaled with the sample."""

    path: str
    """The file, relative to the run folder (``transcripts/<task>.e<epoch>.<part>.json.gz``)."""
    sha256: str
    """The hex sha256 of the file's bytes; the audit checks it."""
    bytes: int
    """The file's size."""
    calls: int
    """Model calls it holds, those whose content was omitted included."""
    capped: bool = False
    """Whether the capture cap was reached (a :class:`CapReachedEvent` says what was left out)."""
