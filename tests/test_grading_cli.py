"""The grader's auditor commands, through the real CLI: rubrics, grade, consensus, coverage."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from runner.cli import main
from runner.contract import SampleOutput
from runner.grading.reference_judge import gold_answer
from runner.paths import tasks_dir
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth


def _sample(tmp_path: Path, task_id: str, *, gold: bool) -> Path:
    task = next(t for t in load_tasks(tasks_dir()) if t.id == task_id)
    truth = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks[task_id]
    answer = gold_answer(task, truth) if gold else None
    sample = SampleOutput(
        task_id=task_id,
        epoch=1,
        status="ok" if gold else "invalid_answer",
        error=None if gold else "answer.json missing",
        answer=answer,
    )
    path = tmp_path / f"{task_id}.json"
    path.write_text(sample.model_dump_json())
    return path


def test_rubrics_lists_six_versioned_dimensions() -> None:
    result = CliRunner().invoke(main, ["rubrics", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert len(payload["rubrics"]) == 6
    assert all(r["version"] >= 1 and len(r["sha256"]) == 64 for r in payload["rubrics"].values())
    assert len(payload["digest"]) == 64


def test_grade_a_gold_sample_with_the_reference_judge(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["grade", str(_sample(tmp_path, "ispm-002", gold=True)), "--json"])
    assert result.exit_code == 0, result.output
    graded = json.loads(result.output)
    assert graded["graded"] is True
    grades = {v["dimension"]: v["grade"] for v in graded["votes"]}
    assert grades["answer_correctness"] == "correct"
    assert grades["reasoning_utility"] == "abstain"
    assert {g for d, g in grades.items() if d != "reasoning_utility"} == {"correct"}


def test_grade_a_broken_sample_is_incorrect_not_crashed(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["grade", str(_sample(tmp_path, "ispm-010", gold=False))])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ispm-010 epoch 1: not graded:")
    assert "answer_correctness               incorrect" in result.output


def test_grade_rejects_a_file_that_is_not_a_sample(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"task_id": "ispm-001"}')
    result = CliRunner().invoke(main, ["grade", str(bad)])
    assert result.exit_code == 1
    assert "not a sample output" in result.output


def test_consensus_command_recomputes_and_rejects_bad_lines(tmp_path: Path) -> None:
    votes = tmp_path / "votes.jsonl"
    lines = [
        {"task_id": "ispm-001", "epoch": 1, "judge": "a", "dimension": "answer_correctness", "grade": "correct"},
        {"task_id": "ispm-001", "epoch": 1, "judge": "b", "dimension": "answer_correctness", "grade": "partial"},
        {"task_id": "ispm-001", "epoch": 2, "judge": "a", "dimension": "answer_correctness", "grade": "correct"},
        {"task_id": "ispm-001", "epoch": 2, "judge": "b", "dimension": "answer_correctness", "grade": "abstain"},
    ]
    votes.write_text("\n".join(json.dumps(v) for v in lines) + "\n")
    result = CliRunner().invoke(main, ["consensus", str(votes), "--json"])
    assert result.exit_code == 0, result.output
    # Epoch 1: min(correct, partial) = partial; epoch 2: correct; tie between them goes down.
    assert json.loads(result.output) == {
        "task_id": "ispm-001",
        "dimension": "answer_correctness",
        "grade": "partial",
        "epochs": {"1": "partial", "2": "correct"},
    }
    votes.write_text(
        votes.read_text() + '{"task_id": "ispm-001", "epoch": 3, "judge": "a", '
        '"dimension": "answer_correctness", "grade": "great"}\n'
    )
    result = CliRunner().invoke(main, ["consensus", str(votes)])
    assert result.exit_code == 1
    assert "line 5" in result.output and "great" in result.output


def test_coverage_command_prints_the_documented_json(tmp_path: Path) -> None:
    witness = tmp_path / "w.sql"
    agent = tmp_path / "a.sql"
    witness.write_text("SELECT o.login FROM okta_users o JOIN hibob_people h ON lower(o.login) = h.email;")
    agent.write_text("SELECT login FROM okta_users; SELEC nonsense")
    result = CliRunner().invoke(main, ["coverage", "--witness", str(witness), "--agent", str(agent), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report == {
        "witness_tables": ["hibob_people", "okta_users"],
        "agent_tables": ["okta_users"],
        "witness_joins": [[["hibob_people", "email"], ["okta_users", "login"]]],
        "agent_joins": [],
        "table_recall": 0.5,
        "join_recall": 0.0,
        "extra_tables": [],
        "unparsed": 1,
        "unparsed_reasons": ["sqlglot does not understand this statement"],
    }
