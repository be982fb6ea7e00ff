"""Benchmark: ``ispm analytics`` over 100 synthetic runs, against only parsing their JSON.

The 100 runs are copies of one real calibration record (made here if ``runs/`` has none) with grades
shuffled and fresh run ids. Target: under 2 s for loading plus the leaderboard and a breakdown.

Run: .venv/bin/python bench/analytics.py
"""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from records import seed_record, synthetic_runs  # bench/ is the script's folder: sys.path[0]
from timing import median_seconds

from runner.record.store import QUERIES, load_summaries, open_store, run_query

RUNS = 100


def main() -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folders = synthetic_runs(seed_record(tmp), RUNS, tmp, "synthetic", rng)

        def analytics() -> None:
            conn = open_store(load_summaries(folders))
            run_query(conn, QUERIES["leaderboard"])
            run_query(conn, QUERIES["by-vendor"])

        def parse_only() -> None:
            for folder in folders:
                json.loads((folder / "record.json").read_text())

        took = median_seconds(analytics)
        base = median_seconds(parse_only)
    print(
        f"analytics over {RUNS} runs  {took:6.3f} s   baseline (json.loads only) {base:6.3f} s   "
        f"ratio {took / base:5.1f}x   target < 2 s: {'ok' if took < 2 else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
