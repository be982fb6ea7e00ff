"""The run spec: what one run runs, and what ``--official`` locks to v1.

A spec is written into the journal's first entry, so a resumed run continues with exactly the spec it started
with. ``official`` checks a spec against what docs/scoring.md (6) locks and the pinned digests; any spec that has
not passed it is recorded as non-official.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from runner.errors import IspmError
from runner.grading.slots import is_reference, slots_problem

V1_EPOCHS: Final = 5
V1_CONCURRENCY: Final = 2
V1_SAMPLE_LIMIT_S: Final = 900.0
V1_RUN_LIMIT_S: Final = 43_200.0
V1_BREAKER_AFTER: Final = 10
"""K of the circuit breakers: a judge, or the candidate, failing on this many consecutive samples stops the run."""

Calibration = Literal["replay", "null"]
MAX_SAMPLE_TOKEN_LIMIT: Final = 100_000_000
"""The largest ``--sample-token-limit`` taken: more than any sample's context could ever use, so a bigger one is
a typo."""
MAX_RUN_COST_LIMIT_USD: Final = 100_000.0
"""The largest ``--run-cost-limit`` taken, in dollars: far above an official run's cost, so a bigger one is a typo."""
_LIMITS = ("sample_token_limit", "run_cost_limit_usd")


class RunError(IspmError):
    """A run cannot start or continue: a refused official spec, a bad journal, a missing run folder.

    Attributes:
        problems: every reason, one line each.
    """

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        detail = "".join(f"\n  - {p}" for p in self.problems)
        super().__init__(message + detail)


class Digests(BaseModel):
    """What a run's numbers are pinned to."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    world_logical: str
    """The snapshot's logical digest, from its verified manifest."""
    world_pinned: str
    """The world digest the published ground truth was derived from."""
    task_set: str
    """sha256 of the task definitions as loaded now."""
    task_set_pinned: str
    """The task-set digest the published ground truth names."""
    ground_truth: str
    """The published ground truth's own digest."""
    rubric_set: str
    """The digest of the rubric set the judges grade with."""

    def problems(self) -> list[str]:
        """Every way the current world and task set differ from what the ground truth was derived from."""
        found = []
        if self.world_logical != self.world_pinned:
            found.append(f"world logical digest {self.world_logical} is not the pinned {self.world_pinned}")
        if self.task_set != self.task_set_pinned:
            found.append(f"task set digest {self.task_set} is not the pinned {self.task_set_pinned}")
        return found


class RunSpec(BaseModel):
    """One run: agent, models, repetition, limits, task filter and backend."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    version: Literal[1] = 1
    """The spec format's version."""
    agent_image: str
    """The agent image, as given (``replay`` and ``null`` name our own images)."""
    candidate: str | None = None
    """The candidate model alias the agent is run against; ``None`` for calibration runs, which use no model."""
    judges: tuple[str, str]
    """The two judge slots: ``ref`` / ``ref#N`` for the offline reference judge, else ``provider/model``."""
    epochs: int = Field(default=V1_EPOCHS, ge=1, le=100)
    """How many times each task is run (official: 5)."""
    concurrency: int = Field(default=V1_CONCURRENCY, ge=1, le=64)
    """Samples run at once."""
    sample_limit_s: float = Field(default=V1_SAMPLE_LIMIT_S, gt=0)
    """Wall time per sample, enforced from outside the container."""
    run_limit_s: float = Field(default=V1_RUN_LIMIT_S, gt=0)
    """Wall time of the whole run, summed over resumes; past it the run has no score at all."""
    breaker_after: int = Field(default=V1_BREAKER_AFTER, ge=1)
    """The circuit breakers' K: a judge abstaining as malformed, refused or in error on this many consecutive
    graded samples, or the candidate's gateway requests all failing on this many consecutive samples, stops the
    run (resumable once the cause is fixed)."""
    tasks: list[str] | None = None
    """Only these task ids; ``None`` means the whole task set."""
    backend: Literal["docker", "local", "ray"] = "docker"
    """``docker`` on this machine, ``ray`` across a Ray cluster's Docker hosts (``runner.cluster``), ``local`` for
    development only."""
    calibration: Calibration | None = None
    """``replay``: the replay agent replays gold answers mounted from the run folder; ``null``: the null agent."""
    official: bool = False
    """True only when ``official`` accepted the spec."""
    sample_token_limit: int | None = Field(default=None, ge=1, le=MAX_SAMPLE_TOKEN_LIMIT)
    """Local runs only: input plus output tokens one sample's agent may use; past them the gateway refuses its next
    model call and the sample ends as ``token_limit``. ``None``: no limit (v1, and every official run). Written
    into the spec only when set, so a record of a run without limits is what it always was."""
    run_cost_limit_usd: float | None = Field(default=None, gt=0, le=MAX_RUN_COST_LIMIT_USD, allow_inf_nan=False)
    """Local runs only: dollars the whole run may spend (the agent's and the judges' tokens, priced as the report
    prices them); once reached, no new sample starts and the gateway refuses the agent's calls. ``None``: no limit.
    Written only when set."""

    @model_serializer(mode="wrap")
    def _without_unset_limits(self, handler: SerializerFunctionWrapHandler) -> Any:
        """The spec as v1 wrote it when it has no limits: the limits appear only when set."""
        dumped = handler(self)
        if isinstance(dumped, dict):
            for name in _LIMITS:
                if dumped.get(name, 0) is None:
                    del dumped[name]
        return dumped

    @property
    def needed_model(self) -> str | None:
        """The candidate when the agent needs a model, and so a gateway: ``None`` for a calibration run."""
        return self.candidate if self.candidate and self.calibration is None else None

    @model_validator(mode="after")
    def _limits_on_this_host(self) -> RunSpec:
        # Each ray node runs its own gateway, which this host's limits do not reach.
        if self.backend == "ray" and (self.sample_token_limit is not None or self.run_cost_limit_usd is not None):
            raise ValueError("the token and cost limits are enforced by this host's gateway: not with --backend ray")
        return self

    @field_validator("judges")
    @classmethod
    def _distinct_judges(cls, value: tuple[str, str]) -> tuple[str, str]:
        problem = slots_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


def official(spec: RunSpec, digests: Digests) -> RunSpec:
    """``spec`` marked official, after checking that every value is v1's and the digests are the pinned ones.

    Raises:
        RunError: listing every refusal: the local backend, a task filter, a missing candidate or judge,
            a calibration run, a value that is not v1's, or a world or task digest that does not match.
    """
    problems: list[str] = []
    if spec.backend == "local":
        problems.append("the local backend isolates nothing; official runs use docker or ray")
    if spec.tasks is not None:
        problems.append("a task filter; official runs run every task")
    if any(not j.strip() for j in spec.judges):
        problems.append("two judge aliases are required")
    if any(is_reference(j) for j in spec.judges):
        problems.append("the offline reference judge cannot fill an official judge slot; declare two model judges")
    if not spec.candidate:
        problems.append("no candidate model")
    if spec.calibration is not None:
        problems.append("a calibration run (gold or null answers) is never official")
    if spec.sample_token_limit is not None:
        problems.append("a per-sample token limit; v1 runs every sample to its time limit, with no token limit")
    if spec.run_cost_limit_usd is not None:
        problems.append("a run cost limit; v1 runs every sample, whatever it costs")
    fixed = {
        "epochs": V1_EPOCHS,
        "concurrency": V1_CONCURRENCY,
        "sample_limit_s": V1_SAMPLE_LIMIT_S,
        "run_limit_s": V1_RUN_LIMIT_S,
        "breaker_after": V1_BREAKER_AFTER,
    }
    for name, value in fixed.items():
        if getattr(spec, name) != value:
            problems.append(f"{name} is {getattr(spec, name)}; v1 fixes it at {value}")
    problems += digests.problems()
    if problems:
        raise RunError("this run cannot be official", problems)
    return spec.model_copy(update={"official": True})
