"""Gold recordings for the replay agent: the harness's own calibration, as SWE-bench's gold patches are.

Each recording is ``<task_id>.json`` with ``queries`` (the witness SQL, replayed through the SQL tool so it
lands in the query log) and ``answer`` (the gold answer). They hold ground truth, so they are written only
into calibration runs' folders, and official runs refuse calibration.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from runner.grading.reference_judge import gold_answer
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth


def write_recordings(tasks: Iterable[Task], truths: Mapping[str, TaskTruth], folder: Path) -> Path:
    """Write one gold recording per task into ``folder`` (readable by the agent's uid) and return it."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    for task in tasks:
        answer = gold_answer(task, truths[task.id])
        path = folder / f"{task.id}.json"
        path.write_text(
            json.dumps({"queries": [task.witness_sql], "answer": answer.model_dump(mode="json")}, indent=2) + "\n",
            encoding="utf-8",
        )
        path.chmod(0o644)
    return folder
