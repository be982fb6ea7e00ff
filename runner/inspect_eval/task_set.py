"""The task set and its published ground truth for the sandbox, the task and the scorer, from the one catalog of
the task set (:func:`runner.tasks.catalog.catalog`), read once per process."""

from __future__ import annotations

from collections.abc import Mapping

from runner.errors import TaskError
from runner.tasks.catalog import catalog
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth


def tasks() -> Mapping[str, Task]:
    """Every task of v1, by id, in the task set's order.

    Raises:
        TaskError: a task file is malformed.
    """
    return catalog().by_id


def truths() -> Mapping[str, TaskTruth]:
    """The published ground truth of every task, by id (host-only: the scorer's, never the sandbox's).

    Raises:
        TaskError: the ground-truth file is missing or malformed.
    """
    return catalog().truths


def task_by_id(task_id: str) -> Task:
    """The task ``task_id``.

    Raises:
        TaskError: no task has that id.
    """
    try:
        return tasks()[task_id]
    except KeyError:
        raise TaskError("no such task in the task set", task_id=task_id) from None
