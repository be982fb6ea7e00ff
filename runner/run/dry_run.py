"""The judges' dry run at preflight: every model judge grades a small, fixed calibration set before a run starts.

**The calibration set** ships with the task set in ``tasks/calibration/``: what the gold replay agent
(``replay/<task>.json``) and the null agent (``null/<task>.json``) collected on a few tasks, one ``SampleOutput``
each, exactly as the sandbox collected them.

**The check.** Each model judge grades every calibration sample through :func:`grade_sample`, so with the real
rubrics, the real prompt and the real deterministic checks. It passes when every reply parses (no ``malformed``,
``refused`` or ``error`` abstention), every gold sample gets ``correct`` on ``answer_correctness`` and every null
sample gets ``incorrect``. A judge stops at its first problem (no more calls are spent on it); the others are still
checked, and :class:`JudgeDryRunError` lists every problem, each naming the judge, the dimension and a bounded,
redacted excerpt of what came back.

**Order.** Judge slots in order; for each, the gold samples by task id, then the null ones. One call at a time,
so a scripted provider can answer them in order.

**Projection.** A judge's mean tokens per graded sample in the dry run, times the samples the run will grade; and
the fewest and the most one sample took, which preflight prices as the range of the judges' cost
(:func:`runner.record.cost.judge_cost_range`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Literal, NamedTuple

from pydantic import ValidationError

from runner.contract import SampleOutput
from runner.grading.grade import GradingContext, grade_sample
from runner.grading.grades import Grade
from runner.grading.judge import Judge, JudgeVote, excerpt
from runner.run.model import JudgeDryRun as JudgeDryRun
from runner.run.spec import RunError
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth

CALIBRATION_DIR: Final = "calibration"
CalibrationAgent = Literal["replay", "null"]
EXPECTED: Final[dict[CalibrationAgent, Grade]] = {"replay": "correct", "null": "incorrect"}
"""The ``answer_correctness`` a sound judge gives each calibration agent's answer."""
_LABEL: Final[dict[CalibrationAgent, str]] = {"replay": "gold", "null": "null"}


class CalibrationSample(NamedTuple):
    """One collected output of the calibration set, with the agent that produced it."""

    agent: CalibrationAgent
    output: SampleOutput


class JudgeDryRunError(RunError):
    """A judge failed its dry run: ``problems`` names each judge, dimension and what came back."""


def load_calibration_set(tasks_root: Path) -> list[CalibrationSample]:
    """The calibration samples under ``tasks_root/calibration``: gold ones by task id, then null ones.

    Raises:
        RunError: the folder is missing, empty, or holds a file that is not a sample output.
    """
    folder = tasks_root / CALIBRATION_DIR
    found: list[CalibrationSample] = []
    for agent in EXPECTED:
        for path in sorted((folder / agent).glob("*.json")):
            try:
                found.append(CalibrationSample(agent, SampleOutput.model_validate_json(path.read_bytes())))
            except (OSError, ValidationError) as exc:
                raise RunError(f"{path}: not a collected sample output ({exc})") from exc
    if not found:
        raise RunError(f"no calibration samples under {folder}")
    return found


def dry_run_judges(
    judges: Sequence[Judge],
    samples: Sequence[CalibrationSample],
    *,
    tasks: Mapping[str, Task],
    truths: Mapping[str, TaskTruth],
    context: GradingContext,
    planned: int,
) -> list[JudgeDryRun]:
    """Have each judge grade ``samples``; return each one's cost and projection for ``planned`` samples.

    Raises:
        JudgeDryRunError: a reply did not parse, or gold was not graded ``correct`` or null ``incorrect`` on
            ``answer_correctness``; one line per failing judge.
        RunError: a calibration sample names a task the task set does not hold.
    """
    unknown = sorted({s.output.task_id for s in samples} - set(tasks))
    if unknown:
        raise RunError(f"the calibration set names tasks the task set does not hold: {unknown}")
    problems: list[str] = []
    results = []
    for judge in judges:
        spent: list[JudgeVote] = []
        for sample in samples:
            out = sample.output
            graded = grade_sample(tasks[out.task_id], truths[out.task_id], out, [judge], out.epoch, context=context)
            spent.append(graded.votes[0])
            problem = _problem(judge.alias, sample, graded.votes)
            if problem is not None:
                problems.append(problem)
                break
        results.append(_cost(judge.alias, spent, planned))
    if problems:
        raise JudgeDryRunError("a judge failed its dry run on the calibration set", problems)
    return results


def _problem(alias: str, sample: CalibrationSample, votes: Sequence[JudgeVote]) -> str | None:
    where = f"judge {alias}, {{dimension}}, on the {_LABEL[sample.agent]} answer of {sample.output.task_id}"
    failed = next((v for v in votes if v.failure is not None), None)
    if failed is not None:
        # The rationale of a failed call already holds a bounded, redacted excerpt of the reply.
        return where.format(dimension="every dimension") + f": {failed.failure}: {excerpt(failed.rationale, 400)}"
    vote = next((v for v in votes if v.dimension == "answer_correctness"), None)
    expected = EXPECTED[sample.agent]
    if vote is None or vote.grade != expected:
        got = vote.grade if vote else "no vote"
        why = excerpt(vote.rationale) if vote else ""
        return where.format(dimension="answer_correctness") + f": graded {got}, expected {expected}; said {why!r}"
    return None


def _cost(alias: str, spent: Sequence[JudgeVote], planned: int) -> JudgeDryRun:
    samples = len(spent)
    tokens_in = sum(v.input_tokens for v in spent)
    tokens_out = sum(v.output_tokens for v in spent)
    return JudgeDryRun(
        judge=alias,
        samples=samples,
        calls=sum(v.attempts for v in spent),
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        latency_s=round(sum(v.latency_s for v in spent), 3),
        projected_samples=planned,
        projected_input_tokens=round(tokens_in / samples * planned) if samples else 0,
        projected_output_tokens=round(tokens_out / samples * planned) if samples else 0,
        sample_input_tokens=(min(v.input_tokens for v in spent), max(v.input_tokens for v in spent)) if spent else None,
        sample_output_tokens=(min(v.output_tokens for v in spent), max(v.output_tokens for v in spent))
        if spent
        else None,
    )
