"""Benchmark: world build and verify times, against baselines run alongside.

Baselines: for build, only writing the already-generated rows into SQLite (the floor any builder
pays); for verify, only hashing the snapshot file (the floor any integrity check pays).
Targets on a 2-core machine: build < 20 s, verify < 2 s, snapshot <= 40 MB.

Run: .venv/bin/python bench/world.py
"""

from __future__ import annotations

import hashlib
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from runner.paths import world_dir
from runner.world.build import build
from runner.world.generate import all_tables, generate
from runner.world.verify import verify

REPEATS = 3


def timed(action: Callable[[], object]) -> float:
    """Median wall time of ``REPEATS`` runs, in seconds."""
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    rows = generate()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)

        def write_only() -> None:
            path = out / "rows-only.sqlite"
            path.unlink(missing_ok=True)
            conn = sqlite3.connect(path)
            for table in all_tables():
                conn.execute(table.ddl())
                conn.executemany(
                    f"INSERT INTO {table.name} VALUES ({', '.join('?' * len(table.columns))})",
                    rows[table.name],
                )
            conn.commit()
            conn.close()

        build_s = timed(lambda: build(out / "world"))
        write_s = timed(write_only)
    snapshot = world_dir() / "ispm-crossvendor-v1.sqlite"
    verify_s = timed(lambda: verify(world_dir()))
    hash_s = timed(lambda: hashlib.sha256(snapshot.read_bytes()).hexdigest())
    size_mb = snapshot.stat().st_size / 1e6
    print(
        f"build   {build_s:7.3f} s   baseline (write rows only) {write_s:7.3f} s   ratio {build_s / write_s:5.1f}x"
        f"   target < 20 s: {'ok' if build_s < 20 else 'MISSED'}"
    )
    print(
        f"verify  {verify_s:7.3f} s   baseline (sha256 only)     {hash_s:7.3f} s   ratio {verify_s / hash_s:5.1f}x"
        f"   target < 2 s: {'ok' if verify_s < 2 else 'MISSED'}"
    )
    print(f"size    {size_mb:7.2f} MB  target <= 40 MB: {'ok' if size_mb <= 40 else 'MISSED'}")


if __name__ == "__main__":
    main()
