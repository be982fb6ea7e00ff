"""Where a run stands: why it has no score, and why the leaderboard lists it without ranking it.

One place for both, so the record, the report, the leaderboard and the analytics give the same reason.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runner.record.model import RunRecord


def no_score_reason(record: RunRecord) -> str | None:
    """Why the run has no score, or ``None`` when it has one."""
    if record.scores is not None:
        return None
    if record.status == "timed_out":
        return "Timed out: the run limit passed before every sample was graded. No score, not even a partial one."
    if record.status == "incomplete" and record.stop_reason is not None:
        return (
            f"Stopped by a circuit breaker: {record.stop_reason}. No score until the cause is fixed and "
            "`ispm run --resume RUN_DIR` completes it."
        )
    if record.status == "incomplete":
        return "Incomplete: the run was stopped. No score until `ispm run --resume RUN_DIR` completes it."
    return "No score was computed for this run."


def unranked_reason(record: RunRecord) -> str | None:
    """Why ``record`` is listed but not ranked; ``None`` when it is ranked.

    In order: no score (timed out, stopped), a harness calibration, unhealthy judges or candidate (over the health
    threshold), or no task with a real ``answer_correctness``.
    """
    withheld = no_score_reason(record)
    if withheld is not None:
        return withheld
    if record.calibration is not None:
        return f"Harness calibration ({record.calibration}): not a model score."
    if record.health is not None and record.health.problems:
        return "Not rankable, unhealthy run: " + "; ".join(record.health.problems) + "."
    scores = record.scores
    correctness = scores.dimensions.get("answer_correctness") if scores else None
    if correctness is None or correctness.mean is None:
        return "Every task's answer_correctness abstained: nothing to rank."
    return None
