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

from timing import median_seconds  # bench/ is the script's folder: sys.path[0]

from runner.pipeline import run_calibration
from runner.record.store import QUERIES, load_summaries, open_store, run_query

RUNS = 100


def _seed_record(tmp: Path) -> dict[str, object]:
    existing = sorted(Path("runs").glob("*/record.json"))
    for path in existing:
        record = json.loads(path.read_text())
        if record.get("scores"):
            return dict(record)
    result = run_calibration("replay", epochs=1, run_dir=tmp / "seed")
    return dict(json.loads(result.record_path.read_text()))


def main() -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        seed = _seed_record(tmp)
        folders = []
        for i in range(RUNS):
            record = json.loads(json.dumps(seed))
            record["run_id"] = f"synthetic-{i:03d}"
            record["calibration"] = None
            for task in record["scores"]["tasks"]:
                for dim in task["grades"]:
                    task["grades"][dim] = rng.choice(("correct", "partial", "incorrect"))
            folder = tmp / record["run_id"]
            folder.mkdir()
            (folder / "record.json").write_text(json.dumps(record))
            folders.append(folder)

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
