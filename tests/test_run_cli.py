"""`ispm run` and `ispm demo` through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from runner.cli import main


def test_official_run_refuses_what_v1_does_not_allow(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [
        "run", "--agent-image", "null", "--judge", "ref#1", "--judge", "ref#2", "--backend", "local",
        "--task", "ispm-001", "--epochs", "1", "--official", "--run-dir", str(tmp_path / "run"),
    ])  # fmt: skip
    assert result.exit_code == 1
    for problem in (
        "the local backend isolates nothing",
        "a task filter",
        "no candidate model",
        "epochs is 1; v1 fixes it at 5",
        "the offline reference judge cannot fill an official judge slot",
    ):
        assert problem in result.output
    assert not (tmp_path / "run").exists(), "a refused run leaves nothing behind"


def test_run_needs_two_judges() -> None:
    result = CliRunner().invoke(main, ["run", "--agent-image", "null", "--judge", "ref"])
    assert result.exit_code == 2
    assert "give exactly two --judge options, got 1" in result.output


def replay_under_run(run_dir: Path, backend: str, *extra: str) -> tuple[int, str, dict[str, Any]]:
    result = CliRunner().invoke(main, [
        "run", "--agent-image", "replay", "--judge", "ref#1", "--judge", "ref#2", "--backend", backend,
        "--task", "ispm-001", "--epochs", "1", "--run-dir", str(run_dir), *extra,
    ])  # fmt: skip
    record = json.loads((run_dir / "record.json").read_text()) if (run_dir / "record.json").exists() else {}
    return result.exit_code, result.output, record


def test_run_replays_the_gold_answers_as_demo_does(tmp_path: Path) -> None:
    """`ispm run --agent-image replay` is a calibration run: the replay agent gets its recordings (issue 31)."""
    code, output, record = replay_under_run(tmp_path / "run", "local", "--candidate", "openai/gpt-4.1")
    assert code == 0, output
    assert "note: the replay agent uses no model; --candidate openai/gpt-4.1 is not used" in output
    assert (record["calibration"], record["official"], record["candidate_model"]) == ("replay", False, None)
    assert record["scores"]["dimensions"]["answer_correctness"]["mean"] == 1.0
    (sample,) = record["samples"]
    assert sample["status"] == "ok", sample


@pytest.mark.docker
def test_run_replays_the_gold_answers_in_docker(tmp_path: Path) -> None:
    code, output, record = replay_under_run(tmp_path / "run", "docker")
    assert code == 0, output
    assert record["calibration"] == "replay"
    assert record["scores"]["dimensions"]["answer_correctness"]["mean"] == 1.0


@pytest.mark.docker
def test_demo_gold_and_null_on_two_tasks(tmp_path: Path) -> None:
    for agent, expected in (("replay", 1.0), ("null", 0.0)):
        run_dir = tmp_path / agent
        result = CliRunner().invoke(
            main, ["demo", "--agent", agent, "--task", "ispm-001", "--task", "ispm-060", "--run-dir", str(run_dir)]
        )
        assert result.exit_code == 0, result.output
        assert "completed (non-official)" in result.output
        assert f"record: {run_dir / 'record.json'}" in result.output
        record = json.loads((run_dir / "record.json").read_text())
        assert record["calibration"] is not None and record["official"] is False
        assert record["scores"]["dimensions"]["answer_correctness"]["mean"] == expected


@pytest.mark.docker
def test_sandbox_try_prints_the_collected_sample() -> None:
    result = CliRunner().invoke(main, ["sandbox", "try", "--image", "null", "--task", "ispm-001"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ispm-001 epoch 1: ok"
    assert lines[1] == "exit code 0, oom killed false"
    assert lines[2] == "answer: verdict -, 0 evidence items, 0 queries, 0 characters of response"
    assert lines[3] == "query log: 0 entries; trace: 0 entries"
    assert lines[4].startswith("timings (s): create ")
    result = CliRunner().invoke(main, ["sandbox", "try", "--image", "null", "--task", "ispm-001", "--json"])
    assert json.loads(result.stdout)["status"] == "ok"


def test_schema_answer_is_the_contract_model() -> None:
    from runner.contract import Answer

    result = CliRunner().invoke(main, ["schema", "answer"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == Answer.model_json_schema()
