"""Grade one sample: the deterministic checks, then one set of votes from each judge slot.

The order is declared here and nowhere else:

1. **verdict** and **entities** (``entities``): the answer against the ground truth;
2. **replay** (``replay``): the declared and logged SQL on the pristine snapshot;
3. **coverage** (``coverage``): the agent's SQL texts against the witness;
4. **judges**: each slot (an ``LLMJudge`` or the ``ReferenceJudge``) sees all of the above.

**A broken sample** (status other than ``ok``, or no answer) is not shown to the judges. The
contract counts a broken agent as a failure, so every judge slot records ``incorrect`` on every
graded dimension, with the status as the rationale; ``incorrect`` rather than ``abstain``,
because an abstention never wins a consensus and the failure would then vanish from the score.
Its deterministic checks are those of an empty answer (recall 0, no verdict); replay and
coverage are not run.

**The sample's analysis budget** (``SAMPLE_ANALYSIS_BUDGET_S``, docs/scoring.md): everything the host does
with what the agent left, replay and coverage, ends within it, whatever the agent declared or logged.
Replay runs until the budget less coverage's own share (``CoverageLimits.per_sample_s``); coverage
until the end of the budget. What is left is recorded as not analysed with the reason (replay:
``skipped``; coverage: an unparsed statement), the sample's ``analysis_note`` says so, and the judges
still grade: the sample counts as graded. The entity and verdict checks are bounded by the answer's
schema (its size and evidence count), not by time.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runner.contract import SampleOutput, SampleStatus
from runner.errors import GradingError
from runner.grading.bounded_coverage import CoverageLimits, StructureAnalyser
from runner.grading.coverage import CoverageError, CoverageReport, SqlSchema, compare_structures
from runner.grading.entities import EntityCheck, IdentityIndex, VerdictCheck, check_entities, check_verdict
from runner.grading.grades import Vote
from runner.grading.judge import Judge, JudgeInput, JudgeVote, LLMJudge, dimensions_for
from runner.grading.reference_judge import ReferenceJudge
from runner.grading.replay import (
    DEFAULT_BUDGET_S,
    SKIPPED_REASON,
    LoggedCheck,
    Replayer,
    ReplayReport,
    logged_checks,
)
from runner.grading.rubric import RubricSet, load_rubrics
from runner.grading.slots import is_reference, slots_problem
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth
from runner.world.digest import open_readonly, table_names

SAMPLE_ANALYSIS_BUDGET_S = 60.0
"""Wall time the host spends on one sample's SQL (replay and coverage together); see the module docs."""


class GradingContext:
    """What grading needs from the world, prepared once: a replay connection, identities, schema, rubrics."""

    def __init__(
        self,
        world_path: Path,
        *,
        budget_s: float = DEFAULT_BUDGET_S,
        rubrics: RubricSet | None = None,
        coverage_limits: CoverageLimits | None = None,
        sample_budget_s: float = SAMPLE_ANALYSIS_BUDGET_S,
    ):
        """Open the snapshot at ``world_path`` (the ``.sqlite`` file) and read what grading needs from it.

        ``coverage_limits`` bounds the structural analysis of the agent's SQL (``bounded_coverage``);
        ``sample_budget_s`` bounds replay and coverage of one sample together (see the module docs).

        Raises:
            RubricError: when the rubric files are malformed (and ``rubrics`` is not given).
        """
        conn = open_readonly(world_path)
        try:
            self.identities = IdentityIndex.from_connection(conn)
            self.schema = snapshot_schema(conn)
        finally:
            conn.close()
        self.rubrics = rubrics or load_rubrics()
        self.replayer = Replayer(world_path, budget_s=budget_s)
        self.sample_budget_s = sample_budget_s
        self.analyser = StructureAnalyser(self.schema, coverage_limits or CoverageLimits())

    def coverage(self, witness_sql: str, agent_sql: Sequence[str], *, deadline: float | None = None) -> CoverageReport:
        """``coverage.coverage`` against this world's schema, at a bounded cost for the agent's SQL.

        The witness is analysed here; the agent's texts in a worker process, within the per-query
        and per-sample limits, and a text over one counts as unparsed with the reason. Each text is
        analysed once and cached, and the report is assembled exactly as ``coverage.coverage``
        assembles it (a test holds the two equal).

        Raises:
            CoverageError: when the witness holds no statement or one that cannot be parsed, or
                the analysis worker cannot be started.
        """
        return compare_structures(self.analyser.witness(witness_sql), self.analyser.agent(agent_sql, deadline=deadline))

    def close(self) -> None:
        """Close the replay connection and stop the analysis worker."""
        self.replayer.close()
        self.analyser.close()

    def __enter__(self) -> GradingContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SampleGrade(BaseModel):
    """Everything grading found about one sample."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    epoch: int
    status: SampleStatus
    """The sample's collection status."""
    graded: bool
    """False when the sample was broken and the judges were not asked."""
    failure: str | None = None
    """Why the sample was not graded."""
    verdict: VerdictCheck
    entities: EntityCheck
    replay: ReplayReport | None = None
    coverage: CoverageReport | None = None
    coverage_error: str | None = None
    """Why coverage could not be measured (an unparseable witness)."""
    analysis_note: str | None = None
    """What the sample's analysis budget left out (not replayed, not analysed); ``None`` when nothing was."""
    replay_checks: dict[str, LoggedCheck] = {}
    """What the replay found of each distinct text the SQL tool logged, by ``replay.sql_key``."""
    votes: list[JudgeVote]
    """One vote per judge slot per graded dimension."""
    rubric_set_digest: str

    def consensus_votes(self) -> list[Vote]:
        """The plain votes, as ``consensus`` takes them."""
        return [v.to_vote() for v in self.votes]

    def summary_lines(self) -> list[str]:
        """What ``ispm grade`` prints: the deterministic checks, then one line per vote."""
        e = self.entities
        state = "graded" if self.graded else f"not graded: {self.failure}"
        lines = [
            f"{self.task_id} epoch {self.epoch}: {state}",
            f"verdict {self.verdict.verdict} (expected {self.verdict.expected})",
            f"entities recall {e.recall} precision {e.precision} ({len(e.matched)}/{e.truth_count}, "
            f"{len(e.extra)} extra)",
        ]
        if self.replay is not None:
            r = self.replay
            lines.append(f"replay {r.ok} ok, {r.errors} failed, {r.refused} refused, {r.log_mismatches} log mismatches")
        if self.coverage is not None:
            lines.append(f"coverage tables {self.coverage.table_recall} joins {self.coverage.join_recall}")
        if self.analysis_note is not None:
            lines.append(self.analysis_note)
        lines += [f"{v.judge:<24} {v.dimension:<32} {v.grade:<10} {v.rationale}" for v in self.votes]
        return lines


def make_judges(aliases: Sequence[str], rubrics: RubricSet) -> list[Judge]:
    """A judge per slot, in slot order: ``ref`` or ``ref#N`` is the offline reference judge, anything else an LLM
    judge (``runner.grading.slots``)."""
    return [ReferenceJudge(a, rubrics=rubrics) if is_reference(a) else LLMJudge(a, rubrics=rubrics) for a in aliases]


def grade_sample(
    task: Task,
    truth: TaskTruth,
    sample: SampleOutput,
    judges: Sequence[Judge],
    epoch: int,
    *,
    context: GradingContext,
) -> SampleGrade:
    """Run the deterministic checks on ``sample`` and collect every judge's votes.

    Raises:
        GradingError: the task, truth and sample disagree on task id or epoch, or two judge slots
            share an alias (their votes would be indistinguishable in consensus).
    """
    if not task.id == truth.task_id == sample.task_id:
        raise GradingError(f"task {task.id}, truth {truth.task_id} and sample {sample.task_id} do not agree")
    if epoch != sample.epoch:
        raise GradingError(f"task {task.id}: grading epoch {epoch} but the sample is from epoch {sample.epoch}")
    problem = slots_problem([j.alias for j in judges])
    if problem is not None:
        raise GradingError(problem)

    # A broken sample keeps the checks of an empty answer and no replay or coverage (see the module doc).
    # A sample stopped by its token limit is graded on the answer it wrote before the limit, if any.
    answer = sample.answer if sample.status in ("ok", "token_limit") else None
    failure: str | None = None
    replay: ReplayReport | None = None
    report: CoverageReport | None = None
    coverage_error: str | None = None
    analysis_note: str | None = None
    started = time.monotonic()
    if answer is None:
        failure = f"status {sample.status}" + (f": {sample.error}" if sample.error else "")
        if sample.status == "ok":
            failure = "status ok but no answer was collected"
        verdict = check_verdict(None, truth)
        entities = check_entities(truth.entities, [], context.identities)
        votes = _failure_votes(task, epoch, judges, failure, context.rubrics)
    else:
        verdict = check_verdict(answer, truth)
        entities = check_entities(truth.entities, answer.evidence, context.identities)
        # Replay leaves coverage its own share of the sample's budget.
        coverage_share = context.analyser.limits.per_sample_s
        replay_by = started + max(0.0, context.sample_budget_s - coverage_share)
        replay = context.replayer.replay_sample(sample, deadline=replay_by)
        try:
            report = context.coverage(
                task.witness_sql, [q.sql for q in replay.queries], deadline=started + context.sample_budget_s
            )
        except CoverageError as exc:
            coverage_error = str(exc)
        analysis_note = budget_note(replay, report, context.sample_budget_s)
        item = JudgeInput(
            task=task,
            truth=truth,
            epoch=epoch,
            answer=answer,
            replay=replay,
            coverage=report,
            entities=entities,
            verdict=verdict,
        )
        votes = [v for judge in judges for v in judge.judge(item)]
    return SampleGrade(
        task_id=task.id,
        epoch=epoch,
        status=sample.status,
        graded=failure is None,
        failure=failure,
        verdict=verdict,
        entities=entities,
        replay=replay,
        coverage=report,
        coverage_error=coverage_error,
        analysis_note=analysis_note,
        replay_checks=logged_checks(replay) if replay is not None else {},
        votes=votes,
        rubric_set_digest=context.rubrics.digest,
    )


def budget_note(replay: ReplayReport, coverage: CoverageReport | None, budget_s: float) -> str | None:
    """What the sample's analysis budget left out, in words; ``None`` when it left nothing out."""
    stopped = sum(q.status == "timeout" and (q.error or "").startswith(SKIPPED_REASON) for q in replay.queries)
    unread = [why for why in (coverage.unparsed_reasons if coverage is not None else []) if "budget is spent" in why]
    if not (replay.skipped or stopped or unread):
        return None
    return (
        f"the sample's {budget_s:g} s analysis budget was spent: {replay.skipped + stopped} of "
        f"{len(replay.queries)} distinct queries not replayed ({stopped} interrupted), {len(unread)} SQL texts "
        "not analysed for coverage; the judges graded what was analysed"
    )


def _failure_votes(task: Task, epoch: int, judges: Sequence[Judge], why: str, rubrics: RubricSet) -> list[JudgeVote]:
    rationale = f"not graded: {why}; a broken agent is a failure"
    return [
        JudgeVote.cast(judge, task.id, epoch, dim, "incorrect", rationale, rubrics=rubrics)
        for judge in judges
        for dim in dimensions_for(task)
    ]


def snapshot_schema(conn: sqlite3.Connection) -> SqlSchema:
    """The snapshot's schema as coverage wants it: every table with its columns."""
    return SqlSchema({t: [r[1] for r in conn.execute(f'PRAGMA table_info("{t}")')] for t in table_names(conn)})
