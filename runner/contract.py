"""The agent contract, ``ispm.agent/v1``: what an agent writes, and what the host collects.

These models cross the boundary between the sandbox (which collects) and the grader (which never
sees a container, only a ``SampleOutput``). ``ispm schema answer`` exports ``Answer``'s JSON Schema
for people who bring their own agent image.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from runner.sample_key import SampleKey

AGENT_CONTRACT = "ispm.agent/v1"
ANSWER_FORMAT: Final = "ispm.answer/v1"
MAX_ANSWER_BYTES = 1_000_000

SampleStatus = Literal[
    "ok", "timeout", "oom", "invalid_answer", "agent_error", "gateway_error", "sandbox_error", "token_limit"
]
"""How a sample ended. ``token_limit`` (local runs only): the gateway refused the agent's model call past
``--sample-token-limit``; the sample keeps the answer it wrote, if any, and is graded on it."""


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


ResourceLimit = Literal["pids", "memory", "output"]
"""A sandbox limit a sample can hit: processes, memory, the size of ``/output``."""


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
    limits_reached: list[ResourceLimit] = Field(
        default_factory=list,
        description="The sandbox's limits the sample hit, whatever its exit code: ``pids`` (a fork refused), "
        "``memory`` (the OOM killer ran in it), ``output`` (``/output`` full). Empty when none, or when the "
        "backend cannot tell (docs/sandbox.md, 'Limits reached').",
    )
    stdout_tail: str = ""
    stderr_tail: str = ""
    timings: SampleTimings = Field(default_factory=SampleTimings)

    # ------------------------------------------------------------------------------------------ the v1 contract's text
    # The publisher's six clauses, the structural-coverage note and the five parts of the public run record, as data:
    # the site's contract page (runner/site) is generated from these, never from a second copy of the text.

    @property
    def key(self) -> SampleKey:
        """Which sample this is."""
        return SampleKey(task_id=self.task_id, epoch=self.epoch)


class ContractClause(BaseModel):
    """One clause of ISPM-Enterprise-SQL@v1."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    key: str
    """A short id (``world``, ``surface`` ...), the clause's anchor on the contract page."""
    title: str
    """Its name, one or two words."""
    text: str
    """The clause, as the publisher states it."""


class RecordPart(BaseModel):
    """One of the five parts an official run publishes, and where ``record.json`` holds it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    title: str
    """The part, as the publisher names it."""
    fields: tuple[str, ...]
    """The run record's fields that carry it (dotted paths into ``record.json``)."""


CONTRACT_ID: Final = "ISPM-Enterprise-SQL@v1"
CONTRACT_SUMMARY: Final = (
    "A text-to-SQL evaluation over a frozen synthetic enterprise. The agent must query the world, explain the "
    "result, and leave a reviewable trace."
)
REVISION_RULE: Final = (
    "A change to the task set, the world, the agent-visible surface, the repetition policy or the evidence record "
    "is a new revision with a new identifier, not an edit to this one."
)
CLAUSES: Final[tuple[ContractClause, ...]] = (
    ContractClause(
        key="world",
        title="World",
        text="Every task runs against the bundled ispm-crossvendor-v1 SQLite snapshot. Its manifest names the "
        "dataset and publish date; this implementation adds a content digest and checks it before every run.",
    ),
    ContractClause(
        key="surface",
        title="Agent-visible surface",
        text="The agent receives the task prompt, the SQLite world and the schema documentation. Public ground "
        "truth and witness SQL stay outside the agent workspace during the run.",
    ),
    ContractClause(
        key="response",
        title="Response",
        text="A response must state the conclusion and identify the people, resources, policies or configuration "
        "facts that support it.",
    ),
    ContractClause(
        key="repetition",
        title="Repetition",
        text="Official evaluation runs each task for five epochs with two declared, floating judge aliases; the "
        "provider-returned wire model ids are recorded once at preflight.",
    ),
    ContractClause(
        key="consensus",
        title="Consensus",
        text="Within an epoch the lower non-abstaining judge grade wins. Across epochs, the modal grade wins and "
        "ties resolve downward.",
    ),
    ContractClause(
        key="limits",
        title="Limits",
        text="Official execution allows two concurrent samples, 15 minutes per sample and 12 hours for the "
        "complete run; a run timeout produces no partial score.",
    ),
)
STRUCTURAL_COVERAGE: Final = (
    "Beside the judges, structural coverage of the agent's own SQL is measured deterministically: which of the "
    "witness SQL's tables and joins the agent's queries touched. A fluent answer cannot erase a weak "
    "investigation; answer quality and structural diagnostics are reported separately."
)
RECORD_PARTS: Final[tuple[RecordPart, ...]] = (
    RecordPart(title="Candidate and resolved model metadata", fields=("candidate_model", "resolved_models")),
    RecordPart(title="Aggregate and per-task consensus metrics", fields=("scores.dimensions", "scores.tasks")),
    RecordPart(title="Per-epoch judge grades and votes", fields=("samples.votes", "scores.tasks.epochs")),
    RecordPart(
        title="Token and step accounting",
        fields=("agent_tokens", "judge_tokens", "samples.agent", "samples.queries_logged"),
    ),
    RecordPart(title="Reliability and consistency statistics", fields=("scores.reliability", "scores.pass_hat_k")),
)
