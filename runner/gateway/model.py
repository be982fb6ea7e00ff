"""The gateway's typed hand-offs: provider descriptions, client settings, and what a sample consumed.

These cross the gateway's boundary: the run journals :class:`SampleUsage`, preflight and the judges read
:class:`ProviderSpec` and :class:`ClientSettings`, and the record keeps every :class:`ModelCall`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.gateway.protocols.api import Api

__all__ = ["Api"]  # re-exported: a wire API, chat completions, Messages or Responses


ErrorKind = Literal["http_status", "timeout", "connection", "malformed", "stream"]
"""What went wrong on a provider call; ``stream`` is a stream the provider broke after it began."""

CallOutcome = Literal["ok", "provider_error", "stream_cut", "agent_disconnected", "refused"]
"""How one agent request ended: answered; the provider failed before answering; the provider's stream broke
mid-way; the agent hung up mid-stream; refused by the gateway (an untranslatable request) before any provider
call."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class ProviderSpec(_Model):
    """One provider the gateway and the judges can reach: where, with which key, and in which wire API."""

    name: str
    """The provider part of a model reference, ``<name>/<model>``."""
    wire: Literal["chat", "messages"]
    """The API its models are called with: OpenAI-compatible chat completions, or Anthropic Messages."""
    responses: bool = False
    """Whether it also serves the OpenAI Responses API, so a Responses agent is passed through, not translated."""
    key_env: str | None
    """The host variable holding its key; ``None`` for a server that takes none."""
    key_required: bool = True
    """Whether a missing key is an error (local servers usually need none)."""
    base_env: str
    """The host variable that overrides (or, without a default, sets) its base URL."""
    default_base: str | None
    """The base URL when ``base_env`` is unset; ``None`` when the user must say where the server is."""
    auth: Literal["bearer", "x-api-key", "api-key"] = "bearer"
    """The header the key goes in: ``Authorization: Bearer``, Anthropic's ``x-api-key``, or Azure's ``api-key``."""
    note: str = ""
    """One line for people: what this provider is, and the example value of its base URL."""


class ClientSettings(_Model):
    """Timeouts and retry policy of a provider client. The defaults suit long LLM replies."""

    connect_timeout: float = 10.0
    """Seconds to open a connection."""
    read_timeout: float = 300.0
    """Seconds to wait for response bytes (between stream events, too); a hung provider is a retryable timeout."""
    write_timeout: float = 30.0
    """Seconds to send the request."""
    pool_timeout: float = 30.0
    """Seconds to wait for a free pooled connection."""
    max_attempts: int = Field(default=5, ge=1)
    """Tries per call, the first included; also bounds retries of malformed bodies."""
    max_elapsed: float = 600.0
    """No new try starts after this many seconds since the first."""
    retry_after_cap: float = 60.0
    """Upper bound on a provider's ``Retry-After``, so a hostile or confused header cannot stall a run."""
    backoff_initial: float = 0.5
    """Base of the jittered exponential backoff used when no ``Retry-After`` is given."""
    backoff_max: float = 30.0
    """Upper bound of one backoff wait."""
    max_connections: int = 32
    """Connection pool size; two samples plus judges need far fewer."""


class ProviderErrorRecord(_Model):
    """One failed provider call, as recorded in a sample's accounting."""

    kind: ErrorKind
    """What went wrong: an HTTP error status, a timeout, a broken connection, a body that is not JSON, or a
    stream the provider broke after it began."""
    provider: str
    """The provider part of the model reference."""
    model: str
    """The model name sent to the provider."""
    status: int | None
    """The last HTTP status received, or None when no response arrived."""
    retryable: bool
    """Whether the last failure was of a retryable kind (so retries ran out rather than being skipped)."""
    attempts: int
    """How many times the call was tried."""
    message: str
    """A bounded, redacted description; never holds a key."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    """When the call finally failed (UTC)."""


class ProviderResult(BaseModel):
    """A successful non-streamed call, normalized across providers."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    provider: str
    """The provider part of the model reference."""
    model: str
    """The model name we asked for."""
    returned_model: str | None
    """The model id the provider returned on the wire (what the contract records)."""
    input_tokens: int
    """Prompt tokens, cached ones included."""
    output_tokens: int
    """Completion tokens, reasoning included."""
    cached_tokens: int
    """Prompt tokens served from the provider's cache (a subset of ``input_tokens``)."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning, where the provider reports them (a subset of ``output_tokens``)."""
    latency_s: float
    """Wall time of the whole call, retries and waits included."""
    attempts: int
    """How many tries it took."""
    body: dict[str, Any]
    """The provider's parsed response body, in its own protocol."""
    raw: bytes = Field(default=b"", repr=False)
    """The response bytes (key redacted), for pass-through without re-serializing."""
    completion: dict[str, Any] | None = Field(default=None, repr=False)
    """The reply as a chat-completions body; set by :meth:`ProviderClient.chat`."""


class Caps(_Model):
    """Optional per-sample limits. Off (None) for official runs; accounting happens either way."""

    max_requests: int | None = None
    """Refuse further requests once this many were forwarded for the sample."""
    max_tokens: int | None = None
    """Refuse further requests once input plus output tokens reach this. A reply may overshoot it once."""


class ModelCall(_Model):
    """One agent request the gateway answered, in the order it arrived: what was asked, what it cost."""

    api: Api | Literal["count_tokens"]
    """The agent-facing API it came in on."""
    provider_api: Api | Literal["count_tokens"] | None
    """The API it went to the provider in (equal to ``api`` when passed through); ``None`` if never sent."""
    requested_model: str | None
    """The model name the agent asked for; every request goes to the run's candidate whatever it says."""
    stream: bool
    """Whether the agent asked for a streamed reply."""
    outcome: CallOutcome
    """How the request ended."""
    status: int
    """The HTTP status the agent got."""
    input_tokens: int = 0
    """Prompt tokens the provider reported, cached ones included; what was known when a stream broke."""
    output_tokens: int = 0
    """Completion tokens the provider reported, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning, where reported."""
    returned_model: str | None = None
    """The model id the provider returned."""
    attempts: int = 0
    """Provider tries, retries before the first byte included."""
    latency_s: float = 0.0
    """Seconds from the request's arrival to its last byte (or failure)."""
    ttft_s: float | None = None
    """Streams: seconds from the request's arrival to the provider's first output event (a text, tool-call or
    reasoning delta); ``None`` when not streamed or when none came."""
    error: str | None = None
    """A bounded, redacted description when ``outcome`` is not ``ok``."""


class SampleUsage(BaseModel):
    """What one sample consumed, as counted by the gateway."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    sample_id: str
    """The sample the token was issued for."""
    requests: int = 0
    """Model requests forwarded to the provider (the agent's steps), failed ones included; token counts excluded."""
    input_tokens: int = 0
    """Prompt tokens over all requests, cached ones included (a broken stream counts what it reported)."""
    output_tokens: int = 0
    """Completion tokens over all requests, reasoning included."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its cache."""
    reasoning_tokens: int = 0
    """Output tokens spent reasoning, where the provider reports them."""
    latency_s: float = 0.0
    """Total seconds spent waiting on the provider, retries and streaming included."""
    errors: list[ProviderErrorRecord] = Field(default_factory=list)
    """Provider calls that failed after retries, or whose stream the provider broke, in order."""
    model_ids: list[str] = Field(default_factory=list)
    """Distinct model ids the provider returned, in the order first seen."""
    refused: int = 0
    """Requests refused by a cap (not forwarded, not in ``requests``)."""
    in_flight: int = 0
    """Forwarded requests not yet answered when this copy was taken; 0 once the figures are final."""
    calls: list[ModelCall] = Field(default_factory=list)
    """Every model request of the sample, in arrival order (cap refusals excluded)."""
