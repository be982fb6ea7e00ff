"""The agent contract, ``ispm.agent/v1``: what an agent writes, and what the host collects.

These models cross the boundary between the sandbox (which collects) and the grader (which never
sees a container, only a ``SampleOutput``). ``ispm schema answer`` exports ``Answer``'s JSON Schema
for people who bring their own agent image.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

AGENT_CONTRACT = "ispm.agent/v1"
ANSWER_FORMAT: Final = "ispm.answer/v1"
MAX_ANSWER_BYTES = 1_000_000

SampleStatus = Literal["ok", "timeout", "oom", "invalid_answer", "agent_error", "gateway_error", "sandbox_error"]


class EvidenceItem(BaseModel):
    """One cited person, account, resource, policy or configuration fact."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    vendor: Literal["hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas"] = Field(
        description="Vendor whose identifier this is."
    )
    kind: str = Field(max_length=64, description="What it is: person, account, group, role, resource, policy, ...")
    identifier: str = Field(max_length=2048, description="The vendor's identifier (login, UPN, ARN, key id, ...).")
    fact: str = Field(default="", max_length=4096, description="Why it matters, in one sentence.")


class Answer(BaseModel):
    """``/output/answer.json``: the agent's conclusion and what supports it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    format: Literal["ispm.answer/v1"] = Field(default=ANSWER_FORMAT, description="Answer format version.")
    response: str = Field(max_length=200_000, description="The text the judges read: conclusion and explanation.")
    verdict: Literal["yes", "no"] | None = Field(
        default=None, description="For verdict tasks, the primary call; null for enumeration tasks."
    )
    evidence: list[EvidenceItem] = Field(default_factory=list, max_length=5_000, description="Cited findings.")
    queries: list[str] = Field(
        default_factory=list, max_length=1_000, description="The SQL the conclusion rests on, verbatim."
    )


class QueryLogEntry(BaseModel):
    """One line of ``/output/queries.jsonl``, as the SQL tool writes it."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    ts: str
    sql: str
    row_count: int | None = None
    truncated: bool = False
    result_digest: str | None = None
    duration_ms: float | None = None
    error: str | None = None


class SampleTimings(BaseModel):
    """Wall time of each phase of one sample, in seconds."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    create: float = 0.0
    """Making the sample's resources (for Docker: image inspect, volume, container)."""
    start: float = 0.0
    """From the container's start until the agent's command starts."""
    agent: float = 0.0
    """The agent's own run, until it ends or the time limit stops it."""
    collect: float = 0.0
    """Reading ``/output`` and validating the answer."""
    remove: float = 0.0
    """Removing every resource of the sample."""


class SampleOutput(BaseModel):
    """Everything the host collected from one sample: the grader's only input from the sandbox."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    task_id: str
    epoch: int = Field(ge=1)
    status: SampleStatus
    error: str | None = Field(default=None, description="Specific reason when status is not ok.")
    notes: list[str] = Field(
        default_factory=list,
        description="What collection noticed without failing the sample: skipped log lines, caps reached.",
    )
    answer: Answer | None = None
    queries: list[QueryLogEntry] = Field(default_factory=list)
    trace: list[dict[str, object]] = Field(default_factory=list)
    exit_code: int | None = None
    oom_killed: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""
    timings: SampleTimings = Field(default_factory=SampleTimings)
