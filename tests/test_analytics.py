"""DuckDB analytics across real run records: two calibration runs, queried through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from pydantic import BaseModel

from runner.cli import main
from runner.record import model, store
from runner.run import spec

TASKS = ["ispm-002", "ispm-030", "ispm-079"]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    runs = {}
    for agent in ("replay", "null"):
        run_dir = tmp_path_factory.mktemp("runs") / agent
        args = ["demo", "--agent", agent, "--run-dir", str(run_dir)]
        for task in TASKS:
            args += ["--task", task]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        runs[agent] = run_dir
    return runs


def _rows(args: list[str]) -> list[dict[str, object]]:
    result = CliRunner().invoke(main, ["analytics", *args, "--json"])
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def _run_id(run_dir: Path) -> str:
    return str(json.loads((run_dir / "record.json").read_text())["run_id"])


@pytest.mark.docker
def test_dimensions_and_diff_across_runs(two_runs: dict[str, Path]) -> None:
    gold, null = _run_id(two_runs["replay"]), _run_id(two_runs["null"])
    dirs = [str(two_runs["replay"]), str(two_runs["null"])]
    means = {(r["run_id"], r["dimension"]): r["mean"] for r in _rows([*dirs, "--query", "dimensions"])}
    assert means[(gold, "answer_correctness")] == 1.0
    assert means[(null, "answer_correctness")] == 0.0
    diff = _rows([*dirs, "--query", "diff", "--run-a", gold, "--run-b", null])
    changed = {(r["task_id"], r["dimension"]) for r in diff}
    assert {(t, "answer_correctness") for t in TASKS} <= changed
    assert all(
        r["grade_a"] == "correct" and r["grade_b"] == "incorrect"
        for r in diff
        if r["dimension"] == "answer_correctness"
    )
    by_category = _rows([*dirs, "--query", "by-category"])
    assert {r["run_id"] for r in by_category} == {gold, null}


@pytest.mark.docker
def test_calibration_runs_stay_off_the_leaderboard_and_parquet_exports(
    two_runs: dict[str, Path], tmp_path: Path
) -> None:
    dirs = [str(two_runs["replay"]), str(two_runs["null"])]
    assert _rows([*dirs, "--query", "leaderboard"]) == []
    expected = sum(
        len(task["grades"])
        for d in dirs
        for task in json.loads((Path(d) / "record.json").read_text())["scores"]["tasks"]
    )
    out = tmp_path / "parquet"
    rows = _rows([*dirs, "--sql", "SELECT count(*) AS n FROM task_grades", "--parquet", str(out)])
    assert rows == [{"n": expected}]
    assert duckdb.sql(f"SELECT count(*) FROM '{out / 'task_grades.parquet'}'").fetchall() == [(expected,)]


def test_bad_input_is_named(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["analytics", str(tmp_path)])
    assert result.exit_code == 1
    assert "record.json: not a readable run record" in result.output


# Each summary model against the record model it reads a part of.
SUMMARIES = [
    (store.RunSummary, model.RunRecord),
    (store.SpecSummary, spec.RunSpec),
    (store.DigestsSummary, spec.Digests),
    (store.DimensionSummary, model.DimensionScore),
    (store.TaskSummary, model.TaskResult),
    (store.ScoresSummary, model.Scores),
    (store.SampleSummary, model.SampleRecord),
]
_FULL_NAME = {summary.__name__: full.__name__ for summary, full in SUMMARIES}


def _as_full(annotation: object) -> str:
    text = str(annotation).replace("runner.record.store.", "").replace("runner.record.model.", "")
    text = text.replace("runner.run.spec.", "")
    for summary, full in _FULL_NAME.items():
        text = text.replace(summary, full)
    return text


@pytest.mark.parametrize(("summary", "full"), SUMMARIES, ids=[s.__name__ for s, _ in SUMMARIES])
def test_every_summary_field_is_the_record_field_of_that_name(summary: type[BaseModel], full: type[BaseModel]) -> None:
    fields = summary.model_fields
    assert fields, summary
    for name, field in fields.items():
        assert name in full.model_fields, f"{summary.__name__}.{name} is not a field of {full.__name__}"
        theirs = full.model_fields[name].annotation
        assert _as_full(field.annotation) == _as_full(theirs), f"{summary.__name__}.{name}"


@pytest.mark.docker
def test_a_summary_reads_the_same_rows_as_the_whole_record(two_runs: dict[str, Path]) -> None:
    for run_dir in two_runs.values():
        (summary,) = store.load_summaries([run_dir])
        (record,) = store.load_records([run_dir])
        assert summary == store.RunSummary.model_validate(record.model_dump())
        assert summary.samples and summary.scores is not None and summary.scores.tasks
