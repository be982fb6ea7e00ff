"""How published runs did on each task: a pure function of their records."""

from __future__ import annotations

from collections.abc import Sequence

from runner.site.model import PublishedRun, TaskResultCell


def task_results(runs: Sequence[PublishedRun]) -> dict[str, tuple[TaskResultCell, ...]]:
    """Each task's result in every published run that graded it, in the order of ``runs``.

    A run without a score (timed out, stopped) grades no task and adds nothing.
    """
    cells: dict[str, list[TaskResultCell]] = {}
    for run in runs:
        scores = run.record.scores
        if scores is None:
            continue
        for result in scores.tasks:
            cells.setdefault(result.task_id, []).append(
                TaskResultCell(
                    run_id=run.record.run_id,
                    label=run.label,
                    has_report=run.has_report,
                    grades=dict(result.grades),
                    strict_success=result.strict_success,
                    correctness=result.grades.get("answer_correctness"),
                )
            )
    return {task_id: tuple(found) for task_id, found in cells.items()}
