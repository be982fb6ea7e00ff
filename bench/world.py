"""Benchmark: world build and verify times, against baselines run alongside.

Baselines: for build, only writing the already-generated rows into SQLite (the floor any builder
pays); for verify, only hashing the snapshot file (the floor any integrity check pays).
Targets on a 2-core machine: build < 20 s, verify < 2 s, snapshot <= 40 MB.

Run: .venv/bin/python bench/world.py
"""

from __future__ import annotations

import hashlib
import sqlite3
import tempfile
from pathlib import Path

from timing import median_seconds  # bench/ is the script's folder: sys.path[0]

from runner.paths import world_dir
from runner.world.build import build
from runner.world.generate import all_tables, generate
from runner.world.verify import verify


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

        build_s = median_seconds(lambda: build(out / "world"))
        write_s = median_seconds(write_only)
    snapshot = world_dir() / "ispm-crossvendor-v1.sqlite"
    verify_s = median_seconds(lambda: verify(world_dir()))
    hash_s = median_seconds(lambda: hashlib.sha256(snapshot.read_bytes()).hexdigest())
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
