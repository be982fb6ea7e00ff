"""The task set as a whole: loading with its ground truth, filtering, and the mix statistics."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from pydantic import BaseModel

from runner.errors import TaskError
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.traps import TrapOutcome, check_task_traps, trap_problems
from runner.tasks.truth import GROUND_TRUTH_NAME, GroundTruth, compare, derive, load_ground_truth
from runner.world.digest import open_readonly
from runner.world.verify import verify


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
    tasks = load_tasks(tasks_root)
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


def mix(tasks: list[Task], truth: GroundTruth) -> TaskMix:
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
