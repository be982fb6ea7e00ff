"""The trap-bites check: every naive variant of a task's witness must give a different answer.

A task lists the traps it sets (``Task.traps``), each with edits that turn the witness into the query a
careless analyst would write. If that query still gives the published answer, the trap decides nothing and
the benchmark cannot tell an agent that handles it from one that does not. The answer compared is what
grading compares: the verdict (verdict tasks) and the set of finding entities.
"""

from __future__ import annotations

import sqlite3

from pydantic import BaseModel, ConfigDict

from runner.errors import TaskError
from runner.tasks.model import TRAP_FAMILIES, Task
from runner.tasks.truth import TaskTruth, entity_keys, run_query, verdict_of

# The published task set must let each trap family decide the answer of at least this many tasks.
MIN_TASKS_PER_FAMILY = 5


class TrapOutcome(BaseModel):
    """What one naive variant answered, against the truth."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    """The task whose trap this is."""
    family: str
    """The trap family (see ``TRAP_FAMILIES``)."""
    bites: bool
    """True when the naive answer differs from the truth (verdict or finding entities)."""
    verdict_flips: bool
    """True when, on a verdict task, the naive variant gives the other verdict."""
    missed: int
    """Truth entities (rows of identifying columns) the naive variant does not return."""
    extra: int
    """Entities the naive variant returns that the truth does not hold."""
    error: str | None = None
    """Why the naive variant could not be compared (it fails, or lacks an entity column); it then does not bite."""


def check_task_traps(task: Task, truth: TaskTruth, conn: sqlite3.Connection) -> list[TrapOutcome]:
    """Run every naive variant of one task and compare its answer with the truth's."""
    outcomes = []
    for trap in task.traps:
        try:
            columns, rows = run_query(conn, trap.naive_sql(task.witness_sql))
            naive_keys = entity_keys(task, columns, rows, "naive")
        except (sqlite3.Error, ValueError, TaskError) as exc:
            outcomes.append(
                TrapOutcome(
                    task_id=task.id,
                    family=trap.family,
                    bites=False,
                    verdict_flips=False,
                    missed=0,
                    extra=0,
                    error=str(exc),
                )
            )
            continue
        true_keys = entity_keys(task, truth.columns, [tuple(f) for f in truth.facts], "witness")
        flips = task.kind == "verdict" and verdict_of(task, bool(rows)) != truth.verdict
        outcomes.append(
            TrapOutcome(
                task_id=task.id,
                family=trap.family,
                bites=flips or naive_keys != true_keys,
                verdict_flips=flips,
                missed=len(true_keys - naive_keys),
                extra=len(naive_keys - true_keys),
            )
        )
    return outcomes


def trap_problems(outcomes: list[TrapOutcome]) -> list[str]:
    """One line per naive variant that does not bite: it fails, or gives the same answer as the truth."""
    return [
        f"task {o.task_id}: trap {o.family} does not bite: its naive variant "
        + (f"fails: {o.error}" if o.error else "gives the same answer as the truth")
        for o in outcomes
        if not o.bites
    ]


def tasks_per_family(outcomes: list[TrapOutcome]) -> dict[str, list[str]]:
    """For every trap family, the tasks whose naive variant for it bites (families that bite nowhere included)."""
    bitten: dict[str, list[str]] = {family: [] for family in TRAP_FAMILIES}
    for o in outcomes:
        if o.bites:
            bitten[o.family].append(o.task_id)
    return bitten
