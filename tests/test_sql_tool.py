"""The in-container SQL tool (images/base/ispm-sql), run on the host as a subprocess on a real SQLite file."""

from __future__ import annotations

import datetime
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "images" / "base" / "ispm-sql"
LOG_FIELDS = {"ts", "sql", "row_count", "truncated", "result_digest", "duration_ms", "error"}
FOREVER = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


def _load_tool() -> ModuleType:
    # The tool has no .py suffix (it is a command in the image), so name the loader explicitly.
    loader = importlib.machinery.SourceFileLoader("ispm_sql", str(TOOL))
    spec = importlib.util.spec_from_loader("ispm_sql", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolves the string annotations through sys.modules while the class is made.
    sys.modules["ispm_sql"] = module
    loader.exec_module(module)
    return module


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """A folder holding one small world database."""
    folder = tmp_path / "world"
    folder.mkdir()
    conn = sqlite3.connect(folder / "snapshot.sqlite")
    conn.executescript(
        """
        CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, email TEXT, mfa INTEGER, badge BLOB);
        INSERT INTO people VALUES (1, 'Ann Lee', 'ann@corp.example', 1, x'00ff');
        INSERT INTO people VALUES (2, 'Bo', 'bo@corp.example', 0, NULL);
        INSERT INTO people VALUES (3, 'Cé Zhu', NULL, 1, NULL);
        """
    )
    conn.commit()
    conn.close()
    return folder


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "output" / "queries.jsonl"


def run_tool(world: Path, log_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ISPM_WORLD": str(world), "ISPM_QUERY_LOG": str(log_path)}
    return subprocess.run(
        [sys.executable, str(TOOL), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def log_lines(log_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log_path.read_text(encoding="utf-8").splitlines()]


def test_table_output_is_aligned_with_footer(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "SELECT id, name, email FROM people ORDER BY id")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split(" | ") == ["id", "name   ", "email"]
    assert set(lines[1]) <= {"-", "+"}
    assert lines[2] == " 1 | Ann Lee | ann@corp.example"
    assert lines[4] == " 3 | Cé Zhu  | NULL"
    assert lines[-1] == "(3 rows)"


def test_json_output(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "--json", "SELECT id, name, badge FROM people ORDER BY id")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["columns"] == ["id", "name", "badge"]
    assert payload["rows"][0] == [1, "Ann Lee", {"$blob": "00ff"}]
    assert payload["rows"][2] == [3, "Cé Zhu", None]
    assert payload["row_count"] == 3
    assert payload["truncated"] is False


def test_sql_from_stdin_is_logged_exactly(world: Path, log_path: Path) -> None:
    sql = "SELECT count(*) AS n\n  FROM people;  -- trailing comment\n"
    done = run_tool(world, log_path, "--json", stdin=sql)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["rows"] == [[3]]
    assert log_lines(log_path)[0]["sql"] == sql


def test_row_budget_truncates(world: Path, log_path: Path) -> None:
    many = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 100000) SELECT x FROM c"
    done = run_tool(world, log_path, "--json", "--max-rows", "5", many)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["rows"] == [[1], [2], [3], [4], [5]]
    assert payload["truncated"] is True
    table = run_tool(world, log_path, "--max-rows", "2", "SELECT id FROM people")
    assert table.stdout.splitlines()[-1] == "(2 rows; truncated at --max-rows 2)"
    first, second = log_lines(log_path)
    assert (first["row_count"], first["truncated"]) == (5, True)
    assert (second["row_count"], second["truncated"]) == (2, True)


def test_exact_fit_is_not_truncated(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "--json", "--max-rows", "3", "SELECT id FROM people")
    assert json.loads(done.stdout)["truncated"] is False


def test_time_budget_stops_a_query_that_never_ends(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "--timeout", "0.5", FOREVER)
    assert done.returncode == 1
    assert "time budget of 0.5 s exceeded" in done.stderr
    assert done.stdout == ""
    entry = log_lines(log_path)[0]
    assert entry["error"] is not None and "time budget" in str(entry["error"])
    assert entry["result_digest"] is None
    assert entry["row_count"] == 0
    assert isinstance(entry["duration_ms"], float) and entry["duration_ms"] >= 500


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM people",
        "INSERT INTO people (id, name) VALUES (9, 'Eve')",
        "UPDATE people SET mfa = 0",
        "DROP TABLE people",
        "CREATE TABLE loot (x)",
        "CREATE TEMP TABLE loot (x)",
        "PRAGMA user_version = 7",
    ],
)
def test_writes_are_rejected(world: Path, log_path: Path, sql: str) -> None:
    db = world / "snapshot.sqlite"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    done = run_tool(world, log_path, sql)
    assert done.returncode == 1
    assert "read-only" in done.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in world.iterdir()) == ["snapshot.sqlite"]


def test_attach_is_refused(world: Path, log_path: Path, tmp_path: Path) -> None:
    target = tmp_path / "output" / "smuggled.sqlite"
    done = run_tool(world, log_path, f"ATTACH DATABASE '{target}' AS x")
    assert done.returncode == 1
    assert "ATTACH" in done.stderr
    assert not target.exists()


def test_multiple_statements_are_refused(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "SELECT 1; SELECT 2")
    assert done.returncode == 1
    assert "only one SQL statement" in done.stderr
    assert log_lines(log_path)[0]["error"] == "only one SQL statement is allowed per call"


def test_sql_error_is_clear_and_logged(world: Path, log_path: Path) -> None:
    done = run_tool(world, log_path, "SELECT nope FROM people")
    assert done.returncode == 1
    assert done.stderr.startswith("ispm-sql: error: no such column: nope")
    assert log_lines(log_path)[0]["error"] == "no such column: nope"


def test_query_log_line_fields(world: Path, log_path: Path) -> None:
    sql = "SELECT id FROM people WHERE mfa = 1 ORDER BY id"
    run_tool(world, log_path, sql)
    run_tool(world, log_path, "SELECT broken FROM")
    ok, failed = log_lines(log_path)
    assert set(ok) == LOG_FIELDS
    assert set(failed) == LOG_FIELDS
    assert ok["sql"] == sql
    assert ok["row_count"] == 2
    assert ok["truncated"] is False
    assert ok["error"] is None
    assert isinstance(ok["duration_ms"], float) and ok["duration_ms"] >= 0
    ts = str(ok["ts"])
    assert ts.endswith("Z")
    assert datetime.datetime.fromisoformat(ts).tzinfo is not None
    assert str(ok["result_digest"]).startswith("sha256:")
    assert failed["result_digest"] is None and failed["error"]


def test_result_digest_is_stable_and_canonical(world: Path, log_path: Path) -> None:
    run_tool(world, log_path, "SELECT id, name, badge FROM people ORDER BY id")
    run_tool(world, log_path, "SELECT id AS i, name AS n, badge AS b FROM people ORDER BY id")
    run_tool(world, log_path, "SELECT id, name, badge FROM people ORDER BY id DESC")
    first, aliased, reversed_ = log_lines(log_path)
    # Recomputed independently: compact, key-sorted JSON of the row lists, BLOBs as {"$blob": hex}.
    rows = [[1, "Ann Lee", {"$blob": "00ff"}], [2, "Bo", None], [3, "Cé Zhu", None]]
    canonical = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert first["result_digest"] == expected
    assert aliased["result_digest"] == expected  # column names are not part of the result
    assert reversed_["result_digest"] != expected  # row order is


def test_world_must_hold_exactly_one_database(world: Path, log_path: Path) -> None:
    (world / "second.sqlite").write_bytes((world / "snapshot.sqlite").read_bytes())
    done = run_tool(world, log_path, "SELECT 1")
    assert done.returncode == 2
    assert "exactly one *.sqlite" in done.stderr
    single = run_tool(world / "second.sqlite", log_path, "--json", "SELECT count(*) FROM people")
    assert json.loads(single.stdout)["rows"] == [[3]]


def test_unwritable_log_is_an_error_but_the_result_is_printed(world: Path, tmp_path: Path) -> None:
    # A folder where the log file should be: appending fails even as root, which ignores modes.
    blocked = tmp_path / "output" / "queries.jsonl"
    blocked.mkdir(parents=True)
    done = run_tool(world, blocked, "--json", "SELECT 1")
    assert done.returncode == 3
    assert "cannot append to query log" in done.stderr
    assert json.loads(done.stdout)["rows"] == [[1]]


def test_budgets_must_be_positive(world: Path, log_path: Path) -> None:
    assert run_tool(world, log_path, "--max-rows", "0", "SELECT 1").returncode == 2
    assert run_tool(world, log_path, "--timeout", "-1", "SELECT 1").returncode == 2


def test_importable_functions() -> None:
    tool = _load_tool()
    assert tool.canonical_rows([[1, b"\x01", None, "é"]]) == '[[1,{"$blob":"01"},null,"é"]]'
    assert tool.result_digest([]) == "sha256:" + hashlib.sha256(b"[]").hexdigest()
