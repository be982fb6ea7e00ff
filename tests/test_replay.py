"""Query replay: digests identical to the in-container SQL tool, log comparison, refusals, the time budget."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.contract import Answer, QueryLogEntry, SampleOutput
from runner.grading.replay import Replayer, canonical_rows, result_digest
from runner.paths import world_dir
from runner.world import SNAPSHOT_NAME

TOOL = Path(__file__).resolve().parents[1] / "images" / "base" / "ispm-sql"
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _load_tool() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("ispm_sql_for_replay", str(TOOL))
    spec = importlib.util.spec_from_loader("ispm_sql_for_replay", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ispm_sql_for_replay"] = module  # dataclasses resolves annotations through sys.modules
    loader.exec_module(module)
    return module


ispm_sql = _load_tool()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "world.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, score REAL, badge BLOB);
        INSERT INTO people VALUES (1, 'Ann Lee', 'ann@corp.example', 1.5, x'00ff');
        INSERT INTO people VALUES (2, 'Bo "B" O''Neil', 'bo@corp.example', -0.1, NULL);
        INSERT INTO people VALUES (3, 'Cé Zhu', NULL, 1e300, NULL);
        INSERT INTO people VALUES (4, CAST(x'41ff42' AS TEXT), 'bad-utf8@corp.example', NULL, x'');
        """
    )
    conn.commit()
    conn.close()
    return path


@pytest.fixture
def replayer(db: Path) -> Iterator[Replayer]:
    with Replayer(db, budget_s=5.0) as r:
        yield r


def tool_log(db: Path, sql: str, max_rows: int = 1000) -> QueryLogEntry:
    """What ispm-sql itself would append to queries.jsonl for ``sql``."""
    conn = ispm_sql.open_world(db)
    try:
        result = ispm_sql.run_query(conn, sql, max_rows=max_rows, timeout_s=5.0)
    finally:
        conn.close()
    return QueryLogEntry.model_validate(ispm_sql.log_record(sql, result))


# ---------------------------------------------------------------- digests agree with ispm-sql

values = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(max_size=16),
)


@given(st.lists(st.lists(values, max_size=5), max_size=8))
@settings(max_examples=300, deadline=None)
def test_digest_is_the_sql_tools_digest(rows: list[list[Any]]) -> None:
    assert canonical_rows(rows) == ispm_sql.canonical_rows(rows)
    assert result_digest(rows) == ispm_sql.result_digest(rows)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM people ORDER BY id",
        "SELECT name, badge FROM people WHERE badge IS NOT NULL ORDER BY id",
        "SELECT count(*) FROM people",
        "SELECT * FROM people WHERE id > 100",
        "SELECT 1.0 / 3, 2e-300, 'x' || char(0) || 'y'",
    ],
)
def test_replay_of_a_tool_logged_query_matches_its_log(db: Path, replayer: Replayer, sql: str) -> None:
    entry = tool_log(db, sql)
    report = replayer.replay([], [entry])
    (query,) = report.queries
    assert query.status == "ok"
    assert (query.row_count, query.result_digest) == (entry.row_count, entry.result_digest)
    assert query.log_match is True and report.log_mismatches == 0


def test_a_truncated_log_line_is_compared_on_the_rows_the_tool_kept(db: Path, replayer: Replayer) -> None:
    sql = "SELECT id, name FROM people ORDER BY id"
    entry = tool_log(db, sql, max_rows=2)
    assert entry.truncated and entry.row_count == 2
    (query,) = replayer.replay([], [entry]).queries
    assert query.row_count == 4 and query.log_match is True


def test_a_logged_error_matches_a_replayed_error(db: Path, replayer: Replayer) -> None:
    entry = tool_log(db, "SELECT nope FROM people")
    assert entry.error is not None
    (query,) = replayer.replay([], [entry]).queries
    assert query.status == "error" and "no such column" in str(query.error)
    assert query.log_match is True


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"result_digest": "sha256:" + "0" * 64}, "digest"),
        ({"row_count": 3}, "row(s)"),
        ({"error": "made up", "result_digest": None}, "records an error"),
        ({"truncated": True, "row_count": 9}, "(truncated)"),
    ],
)
def test_a_doctored_log_line_is_a_mismatch(db: Path, replayer: Replayer, change: dict[str, Any], reason: str) -> None:
    entry = tool_log(db, "SELECT id FROM people ORDER BY id").model_copy(update=change)
    report = replayer.replay([], [entry])
    assert report.queries[0].log_match is False
    assert reason in str(report.queries[0].log_mismatch)
    assert report.log_mismatches == 1


def test_a_log_line_without_result_fields_is_not_comparable(replayer: Replayer) -> None:
    entry = QueryLogEntry(ts="2026-01-01T00:00:00Z", sql="SELECT 1")
    (query,) = replayer.replay([], [entry]).queries
    assert query.status == "ok" and query.log_match is None and query.logged == 1


# ---------------------------------------------------------------- sources, dedupe, original text


def test_identical_texts_replay_once_and_keep_both_sources(db: Path, replayer: Replayer) -> None:
    sql = "SELECT name\n  FROM people  -- who\n WHERE id = 1;"
    log = [tool_log(db, sql), tool_log(db, sql), tool_log(db, "SELECT 2")]
    sample = SampleOutput(
        task_id="ispm-001",
        epoch=1,
        status="ok",
        answer=Answer(response="r", queries=[sql, "SELECT 3", sql]),
        queries=log,
    )
    report = replayer.replay_sample(sample)
    assert [(q.sql, q.sources, q.logged) for q in report.queries] == [
        (sql, ["declared", "logged"], 2),
        ("SELECT 3", ["declared"], 0),
        ("SELECT 2", ["logged"], 1),
    ]
    assert (report.declared, report.logged_lines, report.ok) == (2, 3, 3)
    assert report.declared_ok()


def test_the_cache_answers_repeats_without_executing(replayer: Replayer) -> None:
    first = replayer.execute("SELECT count(*) FROM people")
    second = replayer.execute("SELECT count(*) FROM people")
    assert first.result_digest == second.result_digest
    assert second.duration_ms == 0.0


# ---------------------------------------------------------------- refusals, errors, budget


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT 1; SELECT 2", "more than one statement"),
        ("SELECT 1; DELETE FROM people", "more than one statement"),
        ("INSERT INTO people (id) VALUES (9)", "'INSERT'"),
        ("  -- hi\n  UPDATE people SET name = 'x'", "'UPDATE'"),
        ("DROP TABLE people", "'DROP'"),
        ("ATTACH DATABASE '/tmp/x.db' AS x", "'ATTACH'"),
        ("CREATE TEMP TABLE t (x)", "'CREATE'"),
        ("PRAGMA query_only = OFF", "PRAGMA query_only"),
        ("PRAGMA writable_schema = ON", "PRAGMA writable_schema"),
        ("WITH x AS (SELECT 1) DELETE FROM people", "DELETE"),
        ("EXPLAIN INSERT INTO people (id) VALUES (9)", "INSERT"),
        ("", "empty statement"),
        ("  /* only a comment */ -- and another", "empty statement"),
    ],
)
def test_anything_but_one_read_is_refused_with_a_reason(replayer: Replayer, sql: str, reason: str) -> None:
    query = replayer.execute(sql)
    assert query.status == "refused"
    assert reason in str(query.error)
    assert query.result_digest is None and query.row_count is None


def test_refused_statements_change_nothing(db: Path, replayer: Replayer) -> None:
    replayer.execute("SELECT 1; DELETE FROM people")
    replayer.execute("WITH x AS (SELECT 1) DELETE FROM people")
    assert replayer.execute("SELECT count(*) AS n FROM people WHERE 1").row_count == 1
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM people").fetchone() == (4,)
    conn.close()


@pytest.mark.parametrize(
    "sql",
    [
        "PRAGMA table_info(people)",
        "SELECT name FROM pragma_table_info('people')",
        "SELECT name FROM sqlite_master WHERE type = 'table'",
        "EXPLAIN QUERY PLAN SELECT * FROM people",
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 5) SELECT x FROM c",
        "VALUES (1), (2)",
        "SELECT 1;  -- a trailing comment after the semicolon",
    ],
)
def test_reads_and_schema_introspection_execute(replayer: Replayer, sql: str) -> None:
    query = replayer.execute(sql)
    assert query.status == "ok", query.error


def test_a_query_past_its_budget_is_interrupted(db: Path) -> None:
    with Replayer(db, budget_s=0.2) as short:
        query = short.execute(FOREVER)
    assert query.status == "timeout"
    assert "time budget of 0.2 s" in str(query.error)
    assert 150 <= query.duration_ms < 5000


def test_replay_keeps_at_most_max_rows(db: Path) -> None:
    many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 50) SELECT x FROM c"
    with Replayer(db, max_rows=10) as small:
        query = small.execute(many)
    assert (query.status, query.row_count, query.truncated) == ("ok", 10, True)


def test_the_bundled_world_replays_read_only() -> None:
    with Replayer(world_dir() / SNAPSHOT_NAME) as r:
        assert r.execute("SELECT count(*) FROM hibob_people").status == "ok"
        assert r.execute("DELETE FROM hibob_people").status == "refused"
        assert (
            r.execute("SELECT count(*) FROM hibob_people").result_digest
            == r.execute("SELECT count(*) FROM hibob_people").result_digest
        )


def test_a_log_longer_than_replays_row_budget_cannot_match(db: Path) -> None:
    entry = tool_log(db, "SELECT id FROM people ORDER BY id", max_rows=3)
    with Replayer(db, max_rows=2) as small:
        (query,) = small.replay([], [entry]).queries
    assert query.log_match is False and "kept only 2" in str(query.log_mismatch)
