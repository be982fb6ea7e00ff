"""The task set and its published ground truth, loaded once per process for the sandbox, the task and the scorer."""

from __future__ import annotations

from functools import cache

from runner.errors import TaskError
from runner.paths import tasks_dir
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.truth import GROUND_TRUTH_NAME, TaskTruth, load_ground_truth


@cache
def tasks() -> dict[str, Task]:
    """Every task of v1, by id, in the task set's order.

    Raises:
        TaskError: a task file is malformed.
    """
    return {task.id: task for task in load_tasks(tasks_dir())}


@cache
def truths() -> dict[str, TaskTruth]:
    """The published ground truth of every task, by id (host-only: the scorer's, never the sandbox's).

    Raises:
        TaskError: the ground-truth file is missing or malformed.
    """
    return dict(load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks)


def task_by_id(task_id: str) -> Task:
    """The task ``task_id``.

    Raises:
        TaskError: no task has that id.
    """
    try:
        return tasks()[task_id]
    except KeyError:
        raise TaskError("no such task in the task set", task_id=task_id) from None
