"""Ground truth, derived by running each task's witness query against the snapshot.

The dual witness (an independent formulation) must return the same entities, which catches
witness bugs. The result is written to ``tasks/ground_truth.json`` with digests of the task set
and of the truth itself; ``verify_ground_truth`` re-derives everything and names any task that
no longer matches.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner.errors import TaskError
from runner.tasks.model import Task

GROUND_TRUTH_NAME = "ground_truth.json"
QUERY_BUDGET_SECONDS = 10.0
Scalar = str | int | None


class Entity(BaseModel):
    """One finding: a person, account, resource, policy or configuration item."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vendor: str
    type: str
    identifier: str
    label: str | None = None


class TaskTruth(BaseModel):
    """What the world says the answer to one task is."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    kind: Literal["verdict", "enumeration"]
    verdict: Literal["yes", "no"] | None
    row_count: int
    entities: list[Entity]
    columns: list[str]
    facts: list[list[Scalar]]


class GroundTruth(BaseModel):
    """``tasks/ground_truth.json``: public, but host-only during a run."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    world_logical_digest: str
    task_set_digest: str
    ground_truth_digest: str
    tasks: dict[str, TaskTruth]


def _canonical(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def task_set_digest(tasks: Sequence[Task]) -> str:
    """sha256 over every task definition in canonical JSON, in id order."""
    return hashlib.sha256(
        _canonical([t.model_dump(mode="json") for t in sorted(tasks, key=lambda t: t.id)])
    ).hexdigest()


def truth_digest(truths: dict[str, TaskTruth]) -> str:
    """sha256 over the derived truth of every task, in id order."""
    return hashlib.sha256(_canonical({k: truths[k].model_dump(mode="json") for k in sorted(truths)})).hexdigest()


def run_query(
    conn: sqlite3.Connection, sql: str, budget: float = QUERY_BUDGET_SECONDS
) -> tuple[list[str], list[tuple[Scalar, ...]]]:
    """Run one read-only query under a time budget; returns column names and rows."""
    deadline = time.monotonic() + budget
    conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        cur = conn.execute(sql)
        columns = [d[0] for d in cur.description or ()]
        return columns, [tuple(r) for r in cur.fetchall()]
    finally:
        conn.set_progress_handler(None, 0)


def entity_keys(task: Task, columns: list[str], rows: list[tuple[Scalar, ...]], which: str) -> set[tuple[str, ...]]:
    """The identifying columns of every row, as strings (``''`` for NULL).

    Raises:
        TaskError: ``which`` query lacks one of the task's entity columns.
    """
    index = {c: i for i, c in enumerate(columns)}
    missing = [e.column for e in task.entity_columns if e.column not in index]
    if missing:
        raise TaskError(f"{which} query has no output column(s) {missing}; it returns {columns}", task_id=task.id)
    return {
        tuple("" if r[index[e.column]] is None else str(r[index[e.column]]) for e in task.entity_columns) for r in rows
    }


def verdict_of(task: Task, has_rows: bool) -> Literal["yes", "no"] | None:
    """The verdict a witness gives by returning rows or none; ``None`` for enumeration tasks."""
    if task.kind != "verdict":
        return None
    return "yes" if has_rows == (task.yes_when == "rows") else "no"


def derive_task(task: Task, conn: sqlite3.Connection) -> TaskTruth:
    """Run both witnesses and build the task's truth.

    Raises:
        TaskError: the witness fails, returns nothing for an enumeration, lacks an entity column, or
            disagrees with the dual witness.
    """
    try:
        columns, rows = run_query(conn, task.witness_sql)
    except sqlite3.Error as exc:
        raise TaskError(f"witness query fails: {exc}", task_id=task.id) from exc
    if task.kind == "enumeration" and not rows:
        raise TaskError("witness query returns no rows for an enumeration task", task_id=task.id)
    try:
        dual_columns, dual_rows = run_query(conn, task.dual_sql)
    except sqlite3.Error as exc:
        raise TaskError(f"dual witness query fails: {exc}", task_id=task.id) from exc
    witness_keys = entity_keys(task, columns, rows, "witness")
    dual_keys = entity_keys(task, dual_columns, dual_rows, "dual witness")
    if witness_keys != dual_keys:
        only_w = sorted(witness_keys - dual_keys)[:3]
        only_d = sorted(dual_keys - witness_keys)[:3]
        raise TaskError(
            f"witness and dual witness disagree: only in witness {only_w}, only in dual {only_d}",
            task_id=task.id,
        )
    index = {c: i for i, c in enumerate(columns)}
    entities = {
        Entity(
            vendor=e.vendor,
            type=e.type,
            identifier=str(r[index[e.column]]),
            label=None if e.label is None or r[index[e.label]] is None else str(r[index[e.label]]),
        )
        for r in rows
        for e in task.entity_columns
        if r[index[e.column]] is not None
    }
    verdict = verdict_of(task, bool(rows))
    facts = sorted(([v for v in r] for r in rows), key=lambda r: _canonical(r))
    return TaskTruth(
        task_id=task.id,
        kind=task.kind,
        verdict=verdict,
        row_count=len(rows),
        entities=sorted(entities, key=lambda e: (e.vendor, e.type, e.identifier, e.label or "")),
        columns=columns,
        facts=facts,
    )


def derive(tasks: Sequence[Task], conn: sqlite3.Connection, world_logical_digest: str) -> GroundTruth:
    """Derive the truth of every task. Stops at the first failing task, naming it."""
    truths = {t.id: derive_task(t, conn) for t in tasks}
    return GroundTruth(
        world_logical_digest=world_logical_digest,
        task_set_digest=task_set_digest(tasks),
        ground_truth_digest=truth_digest(truths),
        tasks=truths,
    )


def write_ground_truth(path: Path, truth: GroundTruth) -> None:
    """Write the ground truth as stable, diff-friendly JSON."""
    path.write_text(json.dumps(truth.model_dump(mode="json"), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_ground_truth(path: Path) -> GroundTruth:
    """Read the published ground truth. Raises ``TaskError`` if missing or malformed."""
    if not path.is_file():
        raise TaskError(f"ground truth file not found: {path}")
    try:
        return GroundTruth.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TaskError(f"ground truth file is malformed: {path}: {exc}") from exc


def compare(published: GroundTruth, derived: GroundTruth) -> list[str]:
    """Every difference between published and freshly derived truth, one line each, naming the task."""
    problems = []
    if published.world_logical_digest != derived.world_logical_digest:
        problems.append("ground truth was derived from a different world (logical digest differs)")
    if published.task_set_digest != derived.task_set_digest:
        problems.append("task set digest differs: a task definition changed since the truth was derived")
    for task_id in sorted(set(published.tasks) | set(derived.tasks)):
        old, new = published.tasks.get(task_id), derived.tasks.get(task_id)
        if old is None:
            problems.append(f"task {task_id}: no published ground truth")
        elif new is None:
            problems.append(f"task {task_id}: ground truth published for a task that does not exist")
        elif old != new:
            fields = [
                f
                for f in ("verdict", "row_count", "entities", "columns", "facts")
                if getattr(old, f) != getattr(new, f)
            ]
            problems.append(f"task {task_id}: ground truth no longer matches the world ({', '.join(fields)} differ)")
    if not problems and published.ground_truth_digest != derived.ground_truth_digest:
        problems.append("ground truth digest differs")
    return problems
