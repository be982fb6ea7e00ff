"""Published runs as the site keeps them, and how they did on each task: pure functions of their records."""

from __future__ import annotations

from collections.abc import Sequence

from runner.record.model import RunRecord
from runner.site.model import PublishedRun, TaskGrades, TaskResultCell


def published_run(record: RunRecord, *, label: str, has_report: bool) -> PublishedRun:
    """``record`` as the site and the board keep it: each task's consensus, and the record without what only its own
    report shows (samples, per-task results, breakdowns). The board's cache (``runner.board.published``) keeps this
    too: one rule for every page."""
    scores = record.scores
    results = scores.tasks if scores else []
    tasks = {r.task_id: TaskGrades(grades=dict(r.grades), strict_success=r.strict_success) for r in results}
    slim_scores = scores.model_copy(update={"tasks": [], "breakdowns": {}}) if scores else None
    slim = record.model_copy(update={"samples": [], "scores": slim_scores})
    return PublishedRun(record=slim, tasks=tasks, label=label, has_report=has_report)


def task_results(runs: Sequence[PublishedRun]) -> dict[str, tuple[TaskResultCell, ...]]:
    """Each task's result in every published run that graded it, in the order of ``runs``.

    A run without a score (timed out, stopped) grades no task and adds nothing.
    """
    cells: dict[str, list[TaskResultCell]] = {}
    for run in runs:
        for task_id, result in sorted(run.tasks.items()):
            cells.setdefault(task_id, []).append(
                TaskResultCell(
                    run_id=run.record.run_id,
                    label=run.label,
                    has_report=run.has_report,
                    grades=result.grades,
                    strict_success=result.strict_success,
                    correctness=result.grades.get("answer_correctness"),
                )
            )
    return {task_id: tuple(found) for task_id, found in cells.items()}
