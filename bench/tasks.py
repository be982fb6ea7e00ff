"""Benchmark: deriving all ground truth, against running each witness query once.

The derivation verifies the world, loads every task, runs both witnesses and compares them; the
baseline runs only the witness queries. Target: derivation under 5 s.

Run: .venv/bin/python bench/tasks.py
"""

from __future__ import annotations

import time

from timing import median_seconds  # bench/ is the script's folder: sys.path[0]

from runner.paths import tasks_dir, world_dir
from runner.tasks.catalog import catalog, derive_all
from runner.world.digest import open_readonly


def main() -> None:
    tasks = catalog().tasks
    conn = open_readonly(world_dir() / "ispm-crossvendor-v1.sqlite")

    def witnesses_only() -> None:
        for task in tasks:
            conn.execute(task.witness_sql).fetchall()

    derive_s = median_seconds(lambda: derive_all(tasks_dir(), world_dir()))
    base_s = median_seconds(witnesses_only)
    slowest = sorted(((timed_one(conn, t.witness_sql), t.id) for t in tasks), reverse=True)[:3]
    print(
        f"derive all ground truth ({len(tasks)} tasks)  {derive_s:6.3f} s   baseline (witnesses only) "
        f"{base_s:6.3f} s   ratio {derive_s / base_s:4.1f}x   target < 5 s: {'ok' if derive_s < 5 else 'MISSED'}"
    )
    print("slowest witnesses: " + ", ".join(f"{task_id} {s * 1000:.0f} ms" for s, task_id in slowest))


def timed_one(conn: object, sql: str) -> float:
    start = time.perf_counter()
    conn.execute(sql).fetchall()  # type: ignore[attr-defined]
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
