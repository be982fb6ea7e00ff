"""The task set as a whole: loading with its ground truth, filtering, and the mix statistics.

:func:`catalog` is the one way the pipeline reads the task set and its published ground truth: each read at most
once per process (parsing the 127 task files takes about a third of a second) and shared, read-only, by every
stage that names a task.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from types import MappingProxyType

from pydantic import BaseModel

from runner.errors import TaskError
from runner.paths import tasks_dir
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.traps import TrapOutcome, check_task_traps, trap_problems
from runner.tasks.truth import GROUND_TRUTH_NAME, GroundTruth, TaskTruth, compare, derive, load_ground_truth
from runner.world.digest import open_readonly
from runner.world.verify import verify


class TaskCatalog:
    """The task set of one tasks folder and its published ground truth, each read on first use and then kept.

    What it hands out is shared by every caller in the process: never change it.
    """

    def __init__(self, root: Path) -> None:
        """The catalog of the tasks folder ``root`` (``v1/`` and ``ground_truth.json``); nothing is read yet."""
        self.root = root
        self._lock = threading.Lock()  # grading threads and Inspect's scorer may ask first at once: read once
        self._tasks: tuple[Task, ...] | None = None
        self._by_id: Mapping[str, Task] | None = None
        self._truth: GroundTruth | None = None

    @property
    def tasks(self) -> tuple[Task, ...]:
        """Every task, sorted by id.

        Raises:
            TaskError: a task file is malformed, or two share an id.
        """
        with self._lock:
            if self._tasks is None:
                self._tasks = tuple(load_tasks(self.root))
            return self._tasks

    @property
    def by_id(self) -> Mapping[str, Task]:
        """Every task by id, in the task set's order.

        Raises:
            TaskError: as :attr:`tasks`.
        """
        if self._by_id is None:
            self._by_id = MappingProxyType({t.id: t for t in self.tasks})
        return self._by_id

    @property
    def truth(self) -> GroundTruth:
        """The published ground truth (host-only: a grader's, never an agent's).

        Raises:
            TaskError: the ground-truth file is missing or malformed.
        """
        with self._lock:
            if self._truth is None:
                self._truth = load_ground_truth(self.root / GROUND_TRUTH_NAME)
            return self._truth

    @property
    def truths(self) -> Mapping[str, TaskTruth]:
        """Each task's published ground truth, by id.

        Raises:
            TaskError: as :attr:`truth`.
        """
        return MappingProxyType(self.truth.tasks)


@cache
def catalog() -> TaskCatalog:
    """The catalog of the bundled task set (``tasks/``), one per process. Deriving and verifying the ground truth
    (:func:`derive_all`, :func:`verify_all`) read their folder afresh instead: they check what is on disk now."""
    return TaskCatalog(tasks_dir())


class TaskFilter(BaseModel):
    """Filters for ``ispm tasks list``; an empty filter matches everything."""

    vendor: str | None = None
    kind: str | None = None
    category: str | None = None
    difficulty: str | None = None
    hops: int | None = None

    def matches(self, task: Task) -> bool:
        return (
            (self.vendor is None or self.vendor in task.vendors)
            and (self.kind is None or task.kind == self.kind)
            and (self.category is None or task.category == self.category)
            and (self.difficulty is None or task.difficulty == self.difficulty)
            and (self.hops is None or task.hops == self.hops)
        )


class TaskMix(BaseModel):
    """Composition of the task set, against the v1 targets."""

    total: int
    verdict: int
    verdict_yes: int
    multi_vendor: int
    three_hop: int
    per_vendor: dict[str, int]
    per_category: dict[str, int]
    per_difficulty: dict[str, int]
    per_trap: dict[str, int]


def derive_all(tasks_root: Path, world_dir: Path) -> GroundTruth:
    """Verify the world, then derive the ground truth of every task from it."""
    check = verify(world_dir)
    tasks = load_tasks(tasks_root)  # read afresh: this checks what is on disk now
    conn: sqlite3.Connection = open_readonly(check.snapshot)
    try:
        return derive(tasks, conn, check.manifest.logical_digest)
    finally:
        conn.close()


def check_traps(tasks_root: Path, world_dir: Path, truth: GroundTruth) -> list[TrapOutcome]:
    """Run the naive variant of every trap of every task against the world, compared with ``truth``."""
    check = verify(world_dir)
    conn: sqlite3.Connection = open_readonly(check.snapshot)
    try:
        return [o for t in load_tasks(tasks_root) for o in check_task_traps(t, truth.tasks[t.id], conn)]
    finally:
        conn.close()


def verify_all(tasks_root: Path, world_dir: Path) -> GroundTruth:
    """Re-derive everything, compare with the published ground truth, and check that every trap bites.

    Raises:
        TaskError: listing each task whose published truth differs from the world, or else each naive
            variant of a trap that fails or gives the true answer.
    """
    published = load_ground_truth(tasks_root / GROUND_TRUTH_NAME)
    derived = derive_all(tasks_root, world_dir)
    problems = compare(published, derived)
    if problems:
        raise TaskError("ground truth does not match the world:\n" + "\n".join(f"  - {p}" for p in problems))
    problems = trap_problems(check_traps(tasks_root, world_dir, derived))
    if problems:
        raise TaskError("traps that decide nothing:\n" + "\n".join(f"  - {p}" for p in problems))
    return derived


def mix(tasks: Sequence[Task], truth: GroundTruth) -> TaskMix:
    """Count the task set's composition."""
    verdicts = [t for t in tasks if t.kind == "verdict"]
    return TaskMix(
        total=len(tasks),
        verdict=len(verdicts),
        verdict_yes=sum(1 for t in verdicts if truth.tasks[t.id].verdict == "yes"),
        multi_vendor=sum(1 for t in tasks if len(t.vendors) >= 2),
        three_hop=sum(1 for t in tasks if t.hops == 3),
        per_vendor=dict(sorted(Counter(v for t in tasks for v in t.vendors).items())),
        per_category=dict(sorted(Counter(t.category for t in tasks).items())),
        per_difficulty=dict(sorted(Counter(t.difficulty for t in tasks).items())),
        per_trap=dict(sorted(Counter(f for t in tasks for f in t.trap_families).items())),
    )
