"""The run record, ``record.json``: what a run publishes (docs/scoring.md).

Everything in it is computed from the run's journal by :func:`runner.record.build.build_record`, so anyone
can recompute it. ``scores`` is ``None`` unless the run completed: a run that timed out has no score at all.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from runner.call import CallApi, CallOutcome, ModelCall, Usage
from runner.contract import ResourceLimit, SampleStatus, SampleTimings
from runner.grading.coverage import CoverageReport
from runner.grading.grades import Dimension, Grade
from runner.grading.model import JudgeVote
from runner.run.journal import SampleAttempt
from runner.run.model import JudgeDryRun
from runner.run.spec import Digests, RunSpec
from runner.sample_key import SampleKey

RECORD_VERSION: Literal[1] = 1
RECORD_NAME = "record.json"
RunStatus = Literal["completed", "timed_out", "incomplete"]
FAILURE_KINDS: tuple[str, ...] = (
    "timeout",
    "oom",
    "invalid_answer",
    "agent_error",
    "gateway_error",
    "sandbox_error",
)


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class DimensionScore(_Model):
    """One dimension over the tasks' consensus grades."""

    mean: float | None
    """Mean over tasks with a real grade (correct 1, partial 0.5, incorrect 0); ``None`` if all abstained."""
    graded: int
    """Tasks with a real consensus grade."""
    abstained: int
    """Tasks whose consensus abstained: excluded from the mean, counted here."""


class TaskResult(_Model):
    """One task's consensus, per dimension, with the per-epoch consensus behind it."""

    task_id: str
    """The task's id, e.g. ``ispm-001``."""
    kind: str
    """``verdict`` or ``enumeration``."""
    category: str
    """The task's category, e.g. ``offboarding``."""
    vendors: list[str]
    """The vendors the task touches."""
    hops: int
    """1: one system; 2: one cross-system identity resolution; 3: a chain of two or more."""
    grades: dict[Dimension, Grade]
    """Consensus across epochs (mode, ties downward)."""
    epochs: dict[Dimension, dict[int, Grade]]
    """Consensus within each epoch (lowest non-abstaining judge grade)."""
    strict_success: bool | None
    """Every non-abstaining dimension ``correct``; ``None`` when every dimension abstained."""


class InterJudge(_Model):
    """Agreement between the judges on one dimension, over the ordinal scale incorrect < partial < correct."""

    alpha: float | None
    """Krippendorff's alpha, ordinal metric; ``None`` when undefined (see ``runner.record.stats``)."""
    kappa: float | None
    """Quadratic-weighted Cohen's kappa over judge pairs; ``None`` when undefined."""
    pairs: int
    """Pairs of real (non-abstaining) grades by two judges on the same task and epoch."""


class Reliability(_Model):
    """Reliability and consistency statistics, recomputable from the journal (docs/scoring.md)."""

    agreement: dict[Dimension, float | None]
    """Per-task agreement across epochs: the share of a task's real epoch grades equal to its consensus, averaged
    over tasks."""
    inter_judge: dict[Dimension, InterJudge]
    """Agreement between the two judges, per dimension."""
    ci: dict[Dimension, tuple[float, float] | None]
    """Bootstrap 95% CI (percentile, tasks resampled) of each dimension's mean."""
    strict_success_ci: tuple[float, float] | None
    """The same CI for the strict success rate."""
    abstention_by_judge: dict[str, float]
    """Share of each judge's raw votes that abstained, over every dimension."""
    resamples: int
    """Bootstrap resamples drawn."""
    seed: int
    """The bootstrap's seed, so anyone can redraw the same resamples."""


class Scores(_Model):
    """The aggregate numbers. Present only on a completed run."""

    dimensions: dict[Dimension, DimensionScore]
    """Each dimension's mean over the tasks' consensus grades."""
    strict_success_rate: float | None
    """Share of tasks (with any real grade) whose every non-abstaining dimension is ``correct``."""
    breakdowns: dict[str, dict[str, DimensionScore]]
    """``answer_correctness`` by ``vendor`` (a task counts for each vendor it touches), ``category``, ``kind``,
    ``hops``."""
    pass_hat_k: dict[int, float | None]
    """pass^k on ``answer_correctness``, k = 1..5: the chance that k epochs drawn without replacement are all
    ``correct``, averaged over the tasks whose consensus did not abstain; ``None`` when the run has fewer than k
    epochs or every task abstained."""
    reliability: Reliability | None = None
    """Agreement, inter-judge reliability, CIs and abstention, withheld with the rest of the score. Records written
    before it existed load with None."""
    tasks: list[TaskResult]
    """Every task's consensus, in task order."""


class TokenCount(Usage):
    """Requests (steps) and tokens, as counted by the gateway or the judge clients, never self-reported: a
    :class:`~runner.call.Usage` with its requests. The judges' count only their input and output tokens."""

    requests: int = 0
    """Model requests (steps); for a judge, its calls."""
    failed_requests: int = 0
    """Requests that failed after the client's retries, as the gateway counted them (the agent's only)."""
    cache_write_tokens: SkipJsonSchema[int] = Field(default=0, exclude=True)
    """Not in the v1 record, which is frozen: ``input_tokens`` counts the cache writes with the rest."""


_TOKENS = frozenset(("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens"))


class RecordedCall(_Model):
    """One model request of the agent as the v1 record publishes it: a :class:`~runner.call.ModelCall`'s figures,
    its tokens flat. Frozen with the record: what the model of a call gains (cache writes, its time, its content)
    reaches the journal and the transcript, not ``record.json``."""

    api: CallApi
    """The agent-facing API it came in on."""
    provider_api: CallApi | None
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
    """Streams: seconds from the request's arrival to the provider's first output event; ``None`` when not
    streamed or when none came."""
    error: str | None = None
    """A bounded, redacted description when ``outcome`` is not ``ok``."""

    @classmethod
    def of(cls, call: ModelCall) -> RecordedCall:
        """The record's entry for ``call``."""
        figures = call.model_dump(include=set(cls.model_fields) - _TOKENS)
        return cls(**figures, **(call.usage or Usage()).model_dump(include=set(_TOKENS)))


class SampleRecord(_Model):
    """One sample: its status, SQL, timings and every vote with its rationale."""

    task_id: str
    """The sample's task."""
    epoch: int
    """The sample's epoch (1-based)."""
    status: SampleStatus
    """``ok``, or the failure kind (see ``failures`` on the run)."""
    error: str | None = None
    """Why the sample failed, as the sandbox recorded it; ``None`` when ``ok``."""
    queries_logged: int
    """SQL statements the agent ran through the SQL tool."""
    queries_declared: list[str]
    """The SQL the answer says its conclusion rests on."""
    coverage: CoverageReport | None = None
    """How much of the witness SQL's tables and joins the agent's SQL (declared and logged) covered; ``None``
    when the sample was not graded or coverage could not be measured."""
    coverage_error: str | None = None
    """Why coverage could not be measured."""
    analysis_note: str | None = Field(default=None, exclude_if=lambda note: note is None)
    """What the sample's analysis budget (docs/scoring.md) left out: queries not replayed, SQL not analysed for
    coverage. The judges graded what was analysed. Left out of ``record.json`` when nothing was left out."""
    timings: SampleTimings
    """Wall time of each sandbox phase."""
    limits_reached: list[ResourceLimit] = Field(default_factory=list, exclude_if=lambda limits: not limits)
    """The sandbox's limits the sample hit, whatever its exit code: ``pids``, ``memory`` or ``output``
    (docs/sandbox.md, 'Limits reached'). Left out of ``record.json`` when empty, as in records made before it."""
    grade_s: float
    """Wall time of grading this sample."""
    graded: bool
    """Whether the judges graded it (an ungraded sample counts ``incorrect`` on every dimension)."""
    agent: TokenCount | None = None
    """The agent's steps and tokens from the gateway; ``None`` when the run had no gateway (calibration)."""
    agent_calls: list[RecordedCall] = Field(default_factory=list)
    """Every model request of the agent, in order, as the gateway booked it: the API, the model the agent asked
    for, tokens, latency, time to first token, and how it ended (docs/gateway.md)."""
    judges: dict[str, TokenCount] = Field(default_factory=dict)
    """Each judge slot's calls and tokens for this sample (zero for the reference judge)."""
    votes: list[JudgeVote]
    """Every judge's vote on every dimension, with its rationale and cost."""
    node: str | None = None
    """The cluster node the sample ran on (the ``ray`` backend); ``None`` on one machine."""
    engine: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The Docker engine that ran it on its node, as ``docker info`` names it: ``<host>:<data root> (<engine ID>)``;
    ``None`` on one machine,
    and left out of the record then, so records rebuilt from earlier journals keep their bytes."""
    attempts: list[SampleAttempt] = Field(default_factory=list)
    """Attempts that are not the one graded: lost with their node, or late duplicates (never a second vote)."""

    @property
    def key(self) -> SampleKey:
        """Which sample this is."""
        return SampleKey(task_id=self.task_id, epoch=self.epoch)


class JudgeHealth(_Model):
    """One judge slot over the samples it was asked to grade."""

    samples: int
    """Samples the judge was asked to grade (broken samples are not asked)."""
    calls: int
    """Judge calls made, retries of bad replies included."""
    malformed: int
    """Samples left ungraded because the reply did not parse, was empty or was truncated."""
    refusals: int
    """Samples left ungraded because the judge refused."""
    errors: int
    """Samples left ungraded because the provider failed."""
    failure_rate: float | None
    """``(malformed + refusals + errors) / samples``, held against the threshold; ``None`` without samples."""
    abstention_rate: float | None
    """Share of the judge's votes on those samples that are ``abstain``, for any reason (deliberate ones
    included); ``None`` without votes."""


class CandidateHealth(_Model):
    """The candidate model, as the gateway counted its requests."""

    requests: int
    """Requests forwarded to the provider, failed ones included."""
    failed_requests: int
    """Requests that failed after the client's retries."""
    failed_rate: float | None
    """``failed_requests / requests``; ``None`` without requests."""


class RunHealth(_Model):
    """The judges' and the candidate's health, and every way it is over the threshold."""

    threshold: float
    """:data:`HEALTH_THRESHOLD` as this record was built with it."""
    judges: dict[str, JudgeHealth]
    """By judge slot alias."""
    candidate: CandidateHealth | None
    """``None`` when the run had no gateway (calibration runs)."""
    problems: list[str]
    """One line per judge or candidate over the threshold; empty when the run is healthy."""

    def summary_lines(self) -> list[str]:
        """The health lines of the terminal summary."""
        lines = []
        for alias, j in self.judges.items():
            rate = "n/a" if j.abstention_rate is None else f"{j.abstention_rate:.3f}"
            lines.append(
                f"judge {alias}: {j.calls} calls on {j.samples} samples, {j.malformed} malformed, "
                f"{j.refusals} refusals, {j.errors} errors; abstention rate {rate}"
            )
        if self.candidate is not None:
            c = self.candidate
            lines.append(f"candidate: {c.requests} requests, {c.failed_requests} failed")
        return lines


class LeftOutNode(_Model):
    """A cluster node the run left out (the ``ray`` backend): no sample ran on it."""

    node: str
    """The Ray node id."""
    host: str | None
    """The node's host name; ``None`` when its check never answered."""
    joined: bool
    """Whether it joined the cluster mid-run (checked on joining) rather than being there when the run (or a resume)
    started."""
    reasons: list[str]
    """Every check it failed, one line each."""
    at: str
    """When it was left out (UTC, ISO 8601)."""


class RunRecord(_Model):
    """``record.json``: everything a run publishes, recomputable from ``journal.jsonl``."""

    version: Literal[1] = RECORD_VERSION
    """The record format's version."""
    run_id: str
    """The run's id, also its folder's name under ``runs/``."""
    status: RunStatus
    """``completed``; ``timed_out`` (run limit passed: no score); ``incomplete`` (stopped, resumable)."""
    official: bool
    """Whether ``--official`` accepted the spec (every v1 value locked)."""
    calibration: str | None
    """``replay`` (gold answers) or ``null``: harness calibration, never a model's score."""
    spec: RunSpec
    """What the run ran, as written into the journal's first entry."""
    digests: Digests
    """The world, task set, ground truth and rubric digests the numbers are pinned to."""
    images: dict[str, str]
    """The images the run used, by name, as recorded when it started."""
    runner_version: str
    """The ``ispm`` version that ran it."""
    candidate_model: str | None
    """The candidate model alias; ``None`` for calibration runs."""
    resolved_models: dict[str, str]
    """Model id returned on the wire, by alias; empty for the reference judge and calibration agents."""
    started_at: str
    """When the run first started (UTC, ISO 8601)."""
    ended_at: str | None
    """When its last attempt ended (UTC, ISO 8601); ``None`` if it never ended."""
    run_s: float
    """Run wall time over every attempt, as counted against the run limit."""
    phases_s: dict[str, float]
    """Summed wall time per phase over every sample: create, start, agent, collect, remove, grade."""
    agent_tokens: TokenCount | None
    """The agent's totals over every sample, from the gateway; ``None`` without a gateway."""
    judge_tokens: dict[str, TokenCount]
    """Each judge slot's totals over every sample, kept apart from the agent's."""
    failures: dict[str, int]
    """Samples by failure kind (every non-``ok`` status)."""
    abstention_rates: dict[Dimension, float]
    """Share of raw judge votes that abstained, per dimension."""
    samples_planned: int
    """Tasks times epochs."""
    samples_graded: int
    """Samples recorded in ``samples``: graded by the judges, or recorded ``incorrect`` when broken."""
    stop_reason: str | None = None
    """Why a circuit breaker stopped the run, when that is how its last attempt ended; ``None`` otherwise."""
    judge_dry_runs: list[JudgeDryRun] = Field(default_factory=list)
    """Each model judge's dry run at every start and resume, in order: tokens, latency, the run's projection."""
    nodes_left_out: list[LeftOutNode] = Field(default_factory=list)
    """Cluster nodes left out because they failed a check (the ``ray`` backend), at every start, resume and join,
    in order; every sample ran on a node that passed them."""
    health: RunHealth | None = None
    """The judges' and the candidate's health (docs/scoring.md, "Health"); records built before it load with None."""
    unranked_reason: str | None = None
    """Why the leaderboard lists this run without ranking it (no score, a calibration, unhealthy, nothing graded);
    ``None`` when it is ranked."""
    scores: Scores | None = Field(default=None)
    """``None`` unless ``status`` is ``completed``."""
    samples: list[SampleRecord]
    """Every sample, in (task, epoch) order."""
