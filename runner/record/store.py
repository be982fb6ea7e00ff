"""DuckDB over run records: load many runs, answer questions across them in SQL, export Parquet.

Records stay the source of truth (JSON, recomputable from each run's journal); the store is a
disposable, query-friendly projection of them. Rows go in as NDJSON through DuckDB's own reader,
which is far faster than row-by-row inserts.

Analytics reads each record as a :class:`RunSummary`: the fields the store's tables hold, validated with the
record's own types, everything else skipped. Most of a record is per-vote rationales and per-sample SQL and
coverage, which no table holds; skipping them makes reading a record ten times cheaper. A test holds every
summary field to the record model's field of the same name.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import duckdb
from pydantic import BaseModel, ConfigDict, Field

from runner.contract import SampleStatus
from runner.errors import IspmError
from runner.grading.grades import Dimension, Grade, score
from runner.record.cost import run_cost
from runner.record.model import RECORD_NAME, RecordedCall, RunRecord, RunStatus, TokenCount

# Each named query is one question people ask across runs. ``$run_a``/``$run_b`` are bound for ``diff``.
QUERIES: dict[str, str] = {
    "leaderboard": """
        SELECT run_id, agent_image, candidate_model, official, status, epochs,
               round(answer_correctness, 4) AS answer_correctness,
               round(strict_success_rate, 4) AS strict_success_rate, round(cost_usd, 6) AS cost_usd, started_at
        FROM runs
        WHERE status = 'completed' AND calibration IS NULL AND unranked_reason IS NULL
        ORDER BY official DESC, answer_correctness DESC NULLS LAST, run_id""",
    "unranked": """
        SELECT run_id, agent_image, candidate_model, official, status, calibration, unranked_reason
        FROM runs WHERE unranked_reason IS NOT NULL ORDER BY run_id""",
    "dimensions": """
        SELECT run_id, dimension, round(mean, 4) AS mean, graded, abstained
        FROM dimension_scores ORDER BY run_id, dimension""",
    "by-category": """
        SELECT run_id, category, count(*) AS tasks, round(avg(score), 4) AS answer_correctness
        FROM task_grades WHERE dimension = 'answer_correctness'
        GROUP BY run_id, category ORDER BY run_id, category""",
    "by-vendor": """
        SELECT run_id, vendor, count(*) AS tasks, round(avg(score), 4) AS answer_correctness
        FROM (SELECT run_id, unnest(vendors) AS vendor, score FROM task_grades
              WHERE dimension = 'answer_correctness')
        GROUP BY run_id, vendor ORDER BY run_id, vendor""",
    "failures": """
        SELECT run_id, status, count(*) AS samples FROM samples WHERE status <> 'ok'
        GROUP BY run_id, status ORDER BY run_id, samples DESC""",
    "cost": """
        SELECT run_id, candidate_model, round(agent_cost_usd, 6) AS agent_cost_usd,
               round(judge_cost_usd, 6) AS judge_cost_usd, round(cost_usd, 6) AS cost_usd, cost_note, prices
        FROM runs ORDER BY run_id""",
    "cost-by-task": """
        SELECT run_id, task_id, count(*) AS samples, round(sum(agent_cost_usd), 6) AS agent_cost_usd,
               round(sum(judge_cost_usd), 6) AS judge_cost_usd, round(sum(cost_usd), 6) AS cost_usd
        FROM samples GROUP BY run_id, task_id ORDER BY run_id, task_id""",
    "diff": """
        SELECT a.task_id, a.dimension, a.grade AS grade_a, b.grade AS grade_b
        FROM task_grades a JOIN task_grades b USING (task_id, dimension)
        WHERE a.run_id = $run_a AND b.run_id = $run_b AND a.grade IS DISTINCT FROM b.grade
        ORDER BY a.task_id, a.dimension""",
}

_SCHEMA = """
CREATE TABLE runs (run_id VARCHAR, status VARCHAR, official BOOLEAN, calibration VARCHAR, agent_image VARCHAR,
    candidate_model VARCHAR, epochs INTEGER, started_at VARCHAR, run_s DOUBLE, world_digest VARCHAR,
    answer_correctness DOUBLE, strict_success_rate DOUBLE, unranked_reason VARCHAR, agent_cost_usd DOUBLE,
    judge_cost_usd DOUBLE, cost_usd DOUBLE, cost_note VARCHAR, prices VARCHAR);
CREATE TABLE dimension_scores (run_id VARCHAR, dimension VARCHAR, mean DOUBLE, graded INTEGER, abstained INTEGER);
CREATE TABLE task_grades (run_id VARCHAR, task_id VARCHAR, kind VARCHAR, category VARCHAR, hops INTEGER,
    vendors VARCHAR[], dimension VARCHAR, grade VARCHAR, score DOUBLE);
CREATE TABLE samples (run_id VARCHAR, task_id VARCHAR, epoch INTEGER, status VARCHAR, queries_logged INTEGER,
    grade_s DOUBLE, agent_cost_usd DOUBLE, judge_cost_usd DOUBLE, cost_usd DOUBLE);
"""


class AnalyticsError(IspmError):
    """A run folder has no readable record, or a query is unknown or fails."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)


class SpecSummary(_Part):
    """The part of ``RunSpec`` the store reads."""

    agent_image: str
    epochs: int


class DigestsSummary(_Part):
    """The part of ``Digests`` the store reads."""

    world_logical: str


class DimensionSummary(_Part):
    """``DimensionScore``, whole."""

    mean: float | None
    graded: int
    abstained: int


class TaskSummary(_Part):
    """The part of ``TaskResult`` the store reads."""

    task_id: str
    kind: str
    category: str
    vendors: list[str]
    hops: int
    grades: dict[Dimension, Grade]


class ScoresSummary(_Part):
    """The part of ``Scores`` the store reads."""

    dimensions: dict[Dimension, DimensionSummary]
    strict_success_rate: float | None
    tasks: list[TaskSummary]


class SampleSummary(_Part):
    """The part of ``SampleRecord`` the store reads."""

    task_id: str
    epoch: int
    status: SampleStatus
    queries_logged: int
    grade_s: float
    agent: TokenCount | None = None
    judges: dict[str, TokenCount] = Field(default_factory=dict)
    agent_calls: list[RecordedCall] = Field(default_factory=list)


class RunSummary(_Part):
    """The part of :class:`RunRecord` the store reads, with the same names and types."""

    run_id: str
    status: RunStatus
    official: bool
    calibration: str | None
    spec: SpecSummary
    candidate_model: str | None
    resolved_models: dict[str, str]
    started_at: str
    run_s: float
    agent_tokens: TokenCount | None
    judge_tokens: dict[str, TokenCount]
    digests: DigestsSummary
    unranked_reason: str | None = None
    scores: ScoresSummary | None
    samples: list[SampleSummary]


_Read = TypeVar("_Read", RunRecord, RunSummary)


def load_records(run_dirs: Iterable[Path]) -> list[RunRecord]:
    """Read ``record.json`` from each run folder (or a record file given directly), whole.

    Raises:
        AnalyticsError: naming the first folder without a valid record.
    """
    return _load(run_dirs, RunRecord)


def load_summaries(run_dirs: Iterable[Path]) -> list[RunSummary]:
    """Read the part of ``record.json`` the store holds from each run folder (or a record file given directly).

    Raises:
        AnalyticsError: naming the first folder without a valid record.
    """
    return _load(run_dirs, RunSummary)


def summaries_under(folder: Path) -> list[RunSummary]:
    """Every run under ``folder`` (``runs/``) whose record reads, oldest first; a folder without a readable record
    (a run still going, one from another version) is skipped, not an error."""
    found = []
    for run_dir in sorted(p for p in folder.glob("*") if (p / RECORD_NAME).is_file()):
        try:
            found += load_summaries([run_dir])
        except AnalyticsError:
            continue
    return found


def _load(run_dirs: Iterable[Path], model: type[_Read]) -> list[_Read]:
    found = []
    for run_dir in run_dirs:
        path = run_dir if run_dir.is_file() else run_dir / RECORD_NAME
        try:
            found.append(model.model_validate_json(path.read_bytes()))
        except (OSError, ValueError) as exc:
            raise AnalyticsError(f"{path}: not a readable run record ({exc})") from exc
    return found


def _rows(record: RunSummary) -> dict[str, list[dict[str, Any]]]:
    scores = record.scores
    correctness = scores.dimensions.get("answer_correctness") if scores else None
    cost = run_cost(record)
    out: dict[str, list[dict[str, Any]]] = {
        "runs": [{
            "run_id": record.run_id, "status": record.status, "official": record.official,
            "calibration": record.calibration, "agent_image": record.spec.agent_image,
            "candidate_model": record.candidate_model, "epochs": record.spec.epochs, "started_at": record.started_at,
            "run_s": record.run_s, "world_digest": record.digests.world_logical,
            "answer_correctness": correctness.mean if correctness else None,
            "strict_success_rate": scores.strict_success_rate if scores else None,
            "unranked_reason": record.unranked_reason, "agent_cost_usd": cost.agent_cost.usd,
            "judge_cost_usd": cost.judge_cost.usd, "cost_usd": cost.total.usd,
            "cost_note": "; ".join(cost.notes()) or None, "prices": cost.prices,
        }],
        "dimension_scores": [], "task_grades": [], "samples": [],
    }  # fmt: skip
    if scores is not None:
        for dim, s in scores.dimensions.items():
            out["dimension_scores"].append(
                {"run_id": record.run_id, "dimension": dim, "mean": s.mean, "graded": s.graded,
                 "abstained": s.abstained})  # fmt: skip
        for t in scores.tasks:
            for dim, grade in t.grades.items():
                out["task_grades"].append({
                    "run_id": record.run_id, "task_id": t.task_id, "kind": t.kind, "category": t.category,
                    "hops": t.hops, "vendors": t.vendors, "dimension": dim, "grade": grade, "score": score(grade),
                })  # fmt: skip
    for sample, priced in zip(record.samples, cost.samples, strict=True):
        out["samples"].append({
            "run_id": record.run_id, "task_id": sample.task_id, "epoch": sample.epoch, "status": sample.status,
            "queries_logged": sample.queries_logged, "grade_s": sample.grade_s, "agent_cost_usd": priced.agent.usd,
            "judge_cost_usd": priced.judges.usd, "cost_usd": priced.total.usd,
        })  # fmt: skip
    return out


def open_store(records: Iterable[RunSummary], database: str = ":memory:") -> duckdb.DuckDBPyConnection:
    """A DuckDB connection holding the ``runs``, ``dimension_scores``, ``task_grades`` and ``samples`` tables."""
    conn = duckdb.connect(database)
    conn.execute(_SCHEMA)
    with tempfile.TemporaryDirectory() as tmp:
        files = {name: (Path(tmp) / f"{name}.ndjson").open("w", encoding="utf-8") for name in
                 ("runs", "dimension_scores", "task_grades", "samples")}  # fmt: skip
        for record in records:
            for table, rows in _rows(record).items():
                files[table].writelines(json.dumps(row) + "\n" for row in rows)
        for table, handle in files.items():
            handle.close()
            columns = [r[0] for r in conn.execute(f"DESCRIBE {table}").fetchall()]
            types = {r[0]: r[1] for r in conn.execute(f"DESCRIBE {table}").fetchall()}
            spec = "{" + ", ".join(f"'{c}': '{types[c]}'" for c in columns) + "}"
            conn.execute(f"INSERT INTO {table} SELECT * FROM read_json('{handle.name}', format = 'newline_delimited', "
                         f"columns = {spec})")  # fmt: skip
    return conn


def run_query(conn: duckdb.DuckDBPyConnection, sql: str, params: dict[str, str] | None = None) -> tuple[
        list[str], list[tuple[Any, ...]]]:  # fmt: skip
    """Run SQL on the store; returns column names and rows.

    Raises:
        AnalyticsError: the SQL fails.
    """
    try:
        cursor = conn.execute(sql, params or {})
        return [d[0] for d in cursor.description or ()], cursor.fetchall()
    except duckdb.Error as exc:
        raise AnalyticsError(f"query failed: {exc}") from exc


def export_parquet(conn: duckdb.DuckDBPyConnection, out_dir: Path) -> list[Path]:
    """Write every store table as ``<table>.parquet`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (table,) in conn.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
        target = out_dir / f"{table}.parquet"
        conn.execute(f"COPY {table} TO '{target}' (FORMAT parquet)")
        written.append(target)
    return written
