"""``make demo`` in full: every one of the 127 tasks in Docker, where gold replay scores 1.0; and the null agent 0.0.

This is the harness validating itself, as the SWE-bench harness does with gold patches: each task's gold answer
must survive the whole path (sandbox, SQL tool, collection, replay, coverage, the reference judge, consensus, the
record and the report). The demo runs once per suite: that an empty answer scores nothing on every task is graded
without Docker (``test_reference_judge``), so the null agent's demo here runs a few tasks of both kinds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main

TASKS = 127
NULL_TASKS = ("ispm-001", "ispm-060", "ispm-127")
"""Tasks of both kinds (enumeration, verdict) for the null agent's demo."""
pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.mark.parametrize(("agent", "expected", "only"), [("replay", 1.0, ()), ("null", 0.0, NULL_TASKS)])
def test_the_demo(agent: str, expected: float, only: tuple[str, ...], tmp_path: Path) -> None:
    run_dir = tmp_path / agent
    chosen = [arg for task in only for arg in ("--task", task)]
    result = CliRunner().invoke(main, ["demo", "--agent", agent, "--run-dir", str(run_dir), *chosen])
    tasks = len(only) or TASKS
    assert result.exit_code == 0, result.output
    assert f"record: {run_dir / 'record.json'}" in result.output
    assert f"report: {run_dir / 'report.html'}" in result.output
    record = json.loads((run_dir / "record.json").read_text(encoding="utf-8"))
    assert record["status"] == "completed" and record["calibration"] == agent and not record["official"]
    assert record["samples_planned"] == record["samples_graded"] == tasks
    assert set(record["failures"].values()) == {0}
    scores = record["scores"]
    assert scores["dimensions"]["answer_correctness"] == {"mean": expected, "graded": tasks, "abstained": 0}
    per_task = {t["task_id"]: t["grades"]["answer_correctness"] for t in scores["tasks"]}
    assert len(per_task) == tasks
    assert set(per_task.values()) == {"correct" if expected == 1.0 else "incorrect"}
    if agent == "replay":
        # The gold replay runs each witness itself, so it covers every witness table.
        assert all(s["coverage"]["table_recall"] == 1.0 for s in record["samples"])
