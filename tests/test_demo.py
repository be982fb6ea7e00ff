"""``make demo`` in full: every one of the 127 tasks in Docker, gold replay scores 1.0 and the null agent 0.0.

This is the harness validating itself, as the SWE-bench harness does with gold patches: each task's gold answer
must survive the whole path (sandbox, SQL tool, collection, replay, coverage, the reference judge, consensus, the
record and the report), and an empty answer must score nothing on every task.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main

TASKS = 127
pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize(("agent", "expected"), [("replay", 1.0), ("null", 0.0)])
def test_the_demo_on_every_task(agent: str, expected: float, tmp_path: Path) -> None:
    run_dir = tmp_path / agent
    result = CliRunner().invoke(main, ["demo", "--agent", agent, "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert f"record: {run_dir / 'record.json'}" in result.output
    assert f"report: {run_dir / 'report.html'}" in result.output
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    assert record["status"] == "completed" and record["calibration"] == agent and not record["official"]
    assert record["samples_planned"] == record["samples_graded"] == TASKS
    assert set(record["failures"].values()) == {0}
    scores = record["scores"]
    assert scores["dimensions"]["answer_correctness"] == {"mean": expected, "graded": TASKS, "abstained": 0}
    per_task = {t["task_id"]: t["grades"]["answer_correctness"] for t in scores["tasks"]}
    assert len(per_task) == TASKS
    assert set(per_task.values()) == {"correct" if expected == 1.0 else "incorrect"}
    if agent == "replay":
        # The gold replay runs each witness itself, so it covers every witness table.
        assert all(s["coverage"]["table_recall"] == 1.0 for s in record["samples"])
