"""Shared by the benches that need published runs: a real calibration record, copied into synthetic runs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from runner.pipeline import run_calibration

GRADES = ("correct", "partial", "incorrect")


def seed_record(tmp: Path, tasks: list[str] | None = None) -> dict[str, Any]:
    """The first scored ``runs/*/record.json`` here, else a replay calibration of ``tasks`` (all: None) made in
    ``tmp``."""
    for path in sorted(Path("runs").glob("*/record.json")):
        record = json.loads(path.read_text())
        if record.get("scores"):
            return dict(record)
    result = run_calibration("replay", epochs=1, tasks=tasks, run_dir=tmp / "seed")
    return dict(json.loads(result.record_path.read_text()))


def synthetic_runs(seed: dict[str, Any], count: int, folder: Path, prefix: str, rng: random.Random) -> list[Path]:
    """``count`` run folders under ``folder``, each a copy of ``seed`` with a fresh run id and shuffled grades."""
    folders = []
    for i in range(count):
        record = json.loads(json.dumps(seed))
        record["run_id"] = f"{prefix}-{i:03d}"
        record["calibration"] = None
        for task in record["scores"]["tasks"]:
            for dim in task["grades"]:
                task["grades"][dim] = rng.choice(GRADES)
        run_folder = folder / record["run_id"]
        run_folder.mkdir()
        (run_folder / "record.json").write_text(json.dumps(record))
        folders.append(run_folder)
    return folders
