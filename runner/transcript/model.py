"""The transcript of one sample: every model call the host saw, resolved to full content.

This is the reader's view. On disk a transcript is content-addressed (:mod:`runner.transcript.storage`): each message,
tool list and system prompt is stored once however often the agent resent it; the store puts the requests back
together, so a reader never sees a reference.

A transcript is a list of events in the order the gateway (or a judge's client) finished them, each tagged by
``kind`` and joined in the discriminated union :data:`TranscriptEvent`:

- :class:`~runner.call.ModelCall`: one model call, the candidate's (through the gateway) or a judge's: the request as
  the caller sent it, the reply put together (a stream's events joined: text, tool calls, reasoning, stop reason),
  what it used, or the failure (status, error, and what arrived of a cut stream);
- :class:`CapReachedEvent`: the sample's capture cap was reached; later calls keep their figures but not their
  content, and this event counts what was left out.

Every secret the host knows of (provider keys, the sample's gateway token) is replaced by ``[REDACTED]`` in headers
and bodies before anything is stored. Content the agent or the model sent is kept as sent (escape it where shown).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.call import Caller, ModelCall
from runner.sample_key import SampleKey

TRANSCRIPT_VERSION = 2
"""The version of the transcript's format. Version 1 (before ispm kept one model of a call) kept a call's usage and
model id inside its reply; it reads as version 2 does."""

REDACTED = "[REDACTED]"
"""What replaces a secret in a stored header or body (as the provider clients redact their keys)."""


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


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


TranscriptEvent = Annotated[ModelCall | CapReachedEvent, Field(discriminator="kind")]
"""One event of a transcript."""


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

    def calls(self, caller: Caller | None = None) -> list[ModelCall]:
        """The model calls, all or only ``caller``'s."""
        return [e for e in self.events if isinstance(e, ModelCall) and (caller is None or e.caller == caller)]


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
