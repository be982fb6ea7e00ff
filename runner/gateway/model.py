"""The gateway's typed hand-offs: provider descriptions, client settings, and what a sample consumed.

These cross the gateway's boundary: the run journals :class:`SampleUsage` (with each call's figures, a
:class:`~runner.call.ModelCall`), and preflight and the judges read :class:`ProviderSpec` and :class:`ClientSettings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.call import Api, ModelCall, Usage

__all__ = ["Api"]  # re-exported: a wire API, chat completions, Messages or Responses


ErrorKind = Literal["http_status", "timeout", "connection", "malformed", "stream"]
"""What went wrong on a provider call; ``stream`` is a stream the provider broke after it began."""


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
    gemini: bool = False
    """Whether it also serves Gemini's own API (``models/{model}:generateContent``) at its base URL less a last
    ``/openai`` (Google's OpenAI-compatible endpoint sits one level below it), so a Gemini agent is passed through,
    not translated."""
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


@dataclass(slots=True)
class ProviderResult:
    """A successful non-streamed provider call: the call as the provider hop saw it, and the body it answered."""

    call: ModelCall
    """The call: the API the provider was spoken to in, the model sent, tries, latency, what the reader found (usage,
    model id, the reply); whoever made it adds who asked, and what (:meth:`ModelCall.model_copy`)."""
    body: dict[str, Any]
    """The provider's parsed response body, in its own protocol."""
    raw: bytes = field(default=b"", repr=False)
    """The response bytes (key redacted), for pass-through without re-serializing."""
    completion: dict[str, Any] | None = field(default=None, repr=False)
    """The reply as a chat-completions body; set by :meth:`ProviderClient.chat`."""


class Caps(_Model):
    """Optional per-sample limits. Off (None) for official runs; accounting happens either way."""

    max_requests: int | None = None
    """Refuse further requests once this many were forwarded for the sample."""
    max_tokens: int | None = None
    """Refuse further requests once input plus output tokens reach this (``--sample-token-limit``), with a 403 the
    SDKs do not retry. A reply may overshoot it once."""
    max_usd: float | None = None
    """Refuse every sample's further requests once the candidate's calls through this gateway cost this many
    dollars (``--run-cost-limit``), with a 403. A reply may overshoot it once per sample in flight."""


class SampleUsage(BaseModel):
    """What one sample consumed, as the gateway's ledger booked each of its calls."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    sample_id: str
    """The sample the token was issued for."""
    requests: int = 0
    """Model requests forwarded to the provider (the agent's steps), failed ones included; token counts excluded."""
    tokens: Usage = Field(default_factory=Usage)
    """Tokens over all requests (a broken stream counts what it reported)."""
    latency_s: float = 0.0
    """Total seconds spent waiting on the provider, retries and streaming included."""
    errors: list[ProviderErrorRecord] = Field(default_factory=list)
    """Provider calls that failed after retries, or whose stream the provider broke, in order."""
    model_ids: list[str] = Field(default_factory=list)
    """Distinct model ids the provider returned, in the order first seen."""
    refused: int = 0
    """Requests refused by a cap (not forwarded, not in ``requests``)."""
    stopped_by: Literal["token_limit", "cost_limit"] | None = None
    """``token_limit`` once the sample's token limit refused one of its calls, ``cost_limit`` once the run's cost
    limit did; ``None`` otherwise."""
    in_flight: int = 0
    """Forwarded requests not yet answered when this copy was taken; 0 once the figures are final."""
    calls: list[ModelCall] = Field(default_factory=list)
    """Every model request of the sample, as each ended (cap refusals excluded): its figures, not its content."""

    @model_validator(mode="before")
    @classmethod
    def _flat_tokens(cls, value: Any) -> Any:
        """Read a usage journaled before :class:`~runner.call.Usage` held its tokens (flat fields)."""
        if not isinstance(value, dict) or "tokens" in value or "input_tokens" not in value:
            return value
        fields = dict(value)
        fields["tokens"] = {name: fields.pop(name) for name in _FLAT_USAGE if name in fields}
        return fields


_FLAT_USAGE = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens")
