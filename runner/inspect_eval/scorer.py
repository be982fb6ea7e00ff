"""``ispm_scorer``: one epoch of one task graded as v1 grades it, from what the sandbox's ``/output`` holds.

The answer and the query log are collected from the sample's ``ispm`` sandbox exactly as ``ispm run`` collects
an agent's (``runner.sandbox.collect``: caps, symlinks refused, the answer validated), then graded by
:func:`runner.grading.grade.grade_sample`: the verdict and entity checks, the replay of the SQL on the pristine
world, structural coverage, and the two judge slots (:mod:`.judges`). A missing or invalid answer is a failed
sample, graded ``incorrect`` by every slot, as in v1.

The score's value holds, per graded dimension, the epoch's consensus across the judges (the lower
non-abstaining grade) as 1.0, 0.5 or 0.0, or ``None`` where both abstained; its metadata holds every vote,
the structural coverage and the deterministic checks. :mod:`.reducer` turns the epochs into the task's grade.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import anyio.to_thread
from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, metric, scorer
from inspect_ai.solver import TaskState
from inspect_ai.util import sandbox

from runner.contract import SampleOutput
from runner.errors import SandboxError
from runner.grading.consensus import epoch_consensus
from runner.grading.grade import GradingContext, SampleGrade, grade_sample
from runner.grading.grades import DIMENSIONS, SCORES, Grade, Vote
from runner.grading.rubric import RubricSet, load_rubrics
from runner.inspect_eval.judges import DEFAULT_JUDGES, make_judges
from runner.inspect_eval.names import registered
from runner.inspect_eval.sandbox import TASK_METADATA_KEY, IspmSandboxEnvironment
from runner.inspect_eval.task_set import task_by_id, truths
from runner.inspect_names import METRIC, SCORER
from runner.paths import world_dir
from runner.sandbox.collect import AgentEnd, build_output
from runner.world import SNAPSHOT_NAME


@cache
def rubrics() -> RubricSet:
    """The judges' rubrics, read once."""
    return load_rubrics()


def epoch_grades(votes: Sequence[Vote]) -> dict[str, Grade]:
    """Each dimension's consensus across the judges of one epoch, in the contract's order of dimensions."""
    by_dimension: dict[str, list[Grade]] = {}
    for vote in votes:
        by_dimension.setdefault(vote.dimension, []).append(vote.grade)
    return {d: epoch_consensus(by_dimension[d]) for d in DIMENSIONS if d in by_dimension}


def epoch_score(votes: Sequence[Vote], metadata: dict[str, Any] | None = None, answer: str | None = None) -> Score:
    """The score of one epoch from its votes: per dimension the judges' consensus as a number, ``None`` if
    every judge abstained."""
    grades = epoch_grades(votes)
    return Score(
        value={d: SCORES.get(g) for d, g in grades.items()},
        answer=answer,
        explanation="; ".join(f"{d}: {g}" for d, g in grades.items()),
        metadata={"grades": grades} | (metadata or {}),
    )


def _metadata(graded: SampleGrade, sample: SampleOutput) -> dict[str, Any]:
    return {
        "task_id": graded.task_id,
        "epoch": graded.epoch,
        "status": sample.status,
        "error": sample.error,
        "votes": [v.model_dump(mode="json") for v in graded.votes],
        "coverage": graded.coverage.model_dump(mode="json") if graded.coverage is not None else None,
        "coverage_error": graded.coverage_error,
        "entities": graded.entities.model_dump(mode="json"),
        "verdict": graded.verdict.model_dump(mode="json"),
        "queries_logged": len(sample.queries),
        "rubric_set_digest": graded.rubric_set_digest,
    }


async def _collect(task_id: str, epoch: int) -> SampleOutput:
    # What the agent left in /output, judged by the same rules as an `ispm run` sample's.
    try:
        session = sandbox().as_type(IspmSandboxEnvironment).session
    except TypeError as exc:
        error = f"ispm_scorer grades what the ispm sandbox's /output holds: {exc}"
        return SampleOutput(task_id=task_id, epoch=epoch, status="sandbox_error", error=error)
    try:
        files = await anyio.to_thread.run_sync(session.collect_output)
    except SandboxError as exc:
        return SampleOutput(task_id=task_id, epoch=epoch, status="sandbox_error", error=str(exc))
    return build_output(task_id, epoch, AgentEnd(exit_code=0), files, session.spec.limits, time_limit_s=0)


@metric(name=METRIC)
def scored_mean() -> Metric:
    """The mean of the scored values, abstentions (``None``) left out as v1 leaves them out; NaN when none is
    scored (``ref`` never scores ``reasoning_utility``), never a 0 that no judge gave."""

    def compute(scores: list[SampleScore]) -> float:
        values = [float(s.score.value) for s in scores if isinstance(s.score.value, int | float)]
        return sum(values) / len(values) if values else math.nan

    return compute


@scorer(name=registered(SCORER), metrics={d: [scored_mean()] for d in DIMENSIONS})
def ispm_scorer(judges: Sequence[str] = DEFAULT_JUDGES) -> Scorer:
    """v1 grading of one epoch; ``judges`` are the two slots: model roles, or ``ref``/``ref#2`` offline."""
    slots = tuple(judges)
    if len(slots) != 2 or len(set(slots)) != 2:
        raise ValueError(f"v1 grades with two distinct judge slots, not {list(slots)}")

    async def score(state: TaskState, target: Target) -> Score:
        task_id = str(state.metadata[TASK_METADATA_KEY])
        task, truth = task_by_id(task_id), truths()[task_id]
        sample = await _collect(task_id, state.epoch)

        judges = make_judges(slots, rubrics())  # on the loop: Inspect's model roles live in its context

        def grade() -> SampleGrade:
            # ~30 ms to open; its replay connection belongs to the thread that opened it.
            with GradingContext(world_dir() / SNAPSHOT_NAME, rubrics=rubrics()) as context:
                return grade_sample(task, truth, sample, judges, state.epoch, context=context)

        graded = await anyio.to_thread.run_sync(grade)
        answer = sample.answer.response if sample.answer is not None else None
        return epoch_score(graded.consensus_votes(), _metadata(graded, sample), answer)

    return score
