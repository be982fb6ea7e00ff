"""Structural coverage: table-driven cases from tests/fixtures/coverage/*.sql, plus the API's edges."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.errors import GradingError
from runner.grading.coverage import (
    MAX_STATEMENT_TOKENS,
    MAX_TEXT_CHARS,
    CoverageError,
    CoverageReport,
    JoinEdge,
    SqlSchema,
    coverage,
    coverage_from_files,
    extract_structures,
)
from runner.paths import tasks_dir
from runner.tasks.load import load_tasks
from runner.world.generate import all_tables

FIXTURES = Path(__file__).parent / "fixtures" / "coverage"
SCHEMA: dict[str, list[str]] = json.loads((FIXTURES / "schema.json").read_text())
REPORT_FIELDS = set(CoverageReport.model_fields)
JOIN_FIELDS = {"witness_joins", "agent_joins"}


@dataclass(frozen=True)
class Case:
    name: str
    witness: str
    agent: str
    expect: dict[str, Any]
    use_schema: bool


def _load_cases() -> list[Case]:
    cases = []
    for path in sorted(FIXTURES.glob("*.sql")):
        for block in path.read_text().split("\n-- case: ")[1:]:
            name, _, body = block.partition("\n")
            sections: dict[str, list[str]] = {}
            current = None
            use_schema = True
            for line in body.splitlines():
                if line == "-- schema: none":
                    use_schema = False
                elif line in ("-- witness", "-- agent", "-- expect"):
                    current = line[3:]
                    sections[current] = []
                elif current is not None:
                    sections[current].append(line)
            assert set(sections) == {"witness", "agent", "expect"}, f"{path.name}: case {name} is incomplete"
            expect = json.loads("\n".join(sections["expect"]))
            assert {"agent_tables", "agent_joins"} <= set(expect) <= REPORT_FIELDS, name
            cases.append(Case(name, "\n".join(sections["witness"]), "\n".join(sections["agent"]), expect, use_schema))
    return cases


CASES = _load_cases()


def _compact(joins: list[JoinEdge]) -> list[str]:
    return [f"{a[0]}.{a[1]}={b[0]}.{b[1]}" for a, b in joins]


def test_the_fixtures_hold_enough_cases() -> None:
    names = [c.name for c in CASES]
    assert len(names) >= 25
    assert len(set(names)) == len(names), "case names must be unique"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_coverage_case(case: Case) -> None:
    report = coverage(case.witness, case.agent, SCHEMA if case.use_schema else None)
    got = report.model_dump()
    for field in JOIN_FIELDS:
        got[field] = _compact(got[field])
    assert {k: got[k] for k in case.expect} == case.expect


def test_json_output_has_exactly_the_issue_fields_and_nested_join_lists() -> None:
    report = coverage(
        "SELECT 1 FROM okta_users u JOIN okta_group_memberships m ON u.id = m.user_id",
        "SELECT 1 FROM okta_group_memberships m JOIN okta_users u ON m.user_id = u.id",
        SCHEMA,
    )
    data = json.loads(report.model_dump_json())
    assert set(data) == {
        "witness_tables",
        "agent_tables",
        "witness_joins",
        "agent_joins",
        "table_recall",
        "join_recall",
        "extra_tables",
        "unparsed",
        "unparsed_reasons",
    }
    edge = [["okta_group_memberships", "user_id"], ["okta_users", "id"]]
    assert data["witness_joins"] == [edge]
    assert data["agent_joins"] == [edge]
    assert data["join_recall"] == 1.0


def test_joins_are_sorted_inside_and_across_pairs() -> None:
    [s] = extract_structures(
        "SELECT 1 FROM okta_users u, okta_group_memberships m, okta_groups g, hibob_people h "
        "WHERE u.id = m.user_id AND g.id = m.group_id AND u.login = h.email",
        SCHEMA,
    )
    assert s.joins == sorted(s.joins)
    assert all(a <= b for a, b in s.joins)
    assert len(s.joins) == 3


def test_statements_keep_their_original_text() -> None:
    text = "select  Login from OKTA_USERS -- why\n;\n\n  SELEC oops ;select 1"
    structures = extract_structures(text)
    assert [s.sql for s in structures] == ["select  Login from OKTA_USERS -- why", "SELEC oops", "select 1"]
    assert [s.parsed for s in structures] == [True, False, True]
    assert structures[1].error


def test_statements_end_where_sqlite_ends_them() -> None:
    text = 'SELECT "a;b" FROM okta_users; SELECT [x;y] FROM okta_groups /* ; */ ; -- ;\nSELECT 1;'
    structures = extract_structures(text)
    assert [s.sql for s in structures] == [
        'SELECT "a;b" FROM okta_users',
        "SELECT [x;y] FROM okta_groups /* ; */",
        "-- ;\nSELECT 1",
    ]


def test_a_statement_over_the_token_limit_is_unparsed_unanalysed() -> None:
    def chain(terms: int) -> str:
        return "SELECT login FROM okta_users WHERE " + " OR ".join(["id = 1"] * terms)

    # 5 tokens before the chain, 3 per term and 1 per OR: 4n + 4.
    n = (MAX_STATEMENT_TOKENS - 4) // 4
    [fits] = extract_structures(chain(n), SCHEMA)
    assert (fits.parsed, fits.tables) == (True, ["okta_users"])
    report = coverage("SELECT login FROM okta_users", [chain(n + 1), "SELECT 1 FROM okta_groups"], SCHEMA)
    assert report.agent_tables == ["okta_groups"]
    assert report.unparsed_reasons == [f"too large to analyse: {4 * n + 8} tokens (limit {MAX_STATEMENT_TOKENS})"]


def test_a_text_over_the_character_limit_or_with_a_nul_is_one_unparsed_statement() -> None:
    long = "SELECT login FROM okta_users; " + "-" * MAX_TEXT_CHARS
    report = coverage(
        "SELECT login FROM okta_users", [long, "SELECT login FROM okta_users WHERE id = '\x00'; SELECT 1"]
    )
    assert (report.agent_tables, report.unparsed) == ([], 2)
    assert report.unparsed_reasons == [
        f"too large to analyse: {len(long)} characters (limit {MAX_TEXT_CHARS})",
        "the text holds a NUL character, which SQLite rejects",
    ]


def test_every_witness_and_dual_covers_itself_fully() -> None:
    schema = SqlSchema({t.name: t.column_names for t in all_tables()})
    for task in load_tasks(tasks_dir()):
        for sql in (task.witness_sql, task.dual_sql):
            report = coverage(sql, sql, schema)
            assert report.table_recall == 1.0, task.id
            assert report.join_recall in (1.0, None), task.id
            assert (report.unparsed, report.extra_tables) == (0, []), task.id


def test_agent_sql_may_be_a_list_of_logged_queries() -> None:
    report = coverage(
        "SELECT 1 FROM okta_users u JOIN okta_group_memberships m ON m.user_id = u.id",
        [
            "SELECT * FROM okta_users",
            "SELECT * FROM okta_group_memberships; SELECT (",
            "SELECT 1 FROM x y z w",
        ],
        SCHEMA,
    )
    assert report.agent_tables == ["okta_group_memberships", "okta_users"]
    assert report.table_recall == 1.0
    assert report.join_recall == 0.0
    assert report.unparsed == 2


def test_a_prepared_schema_gives_the_same_answer_as_a_mapping() -> None:
    sql = "SELECT login FROM okta_users, okta_group_memberships WHERE user_id = id"
    assert extract_structures(sql, SqlSchema(SCHEMA)) == extract_structures(sql, SCHEMA)
    assert extract_structures(sql, SCHEMA)[0].joins == [(("okta_group_memberships", "user_id"), ("okta_users", "id"))]


def test_schema_names_are_case_insensitive() -> None:
    upper = {t.upper(): [c.upper() for c in cols] for t, cols in SCHEMA.items()}
    [s] = extract_structures("SELECT login FROM okta_users, okta_group_memberships WHERE user_id = id", upper)
    assert s.joins == [(("okta_group_memberships", "user_id"), ("okta_users", "id"))]


@pytest.mark.parametrize(
    ("witness", "message"),
    [
        ("", "holds no statement"),
        ("-- only a comment\n;", "holds no statement"),
        ("SELECT login FROM okta_users; SELECT FROM WHERE", "witness statement 2 cannot be parsed"),
    ],
)
def test_witness_that_cannot_be_analysed_raises(witness: str, message: str) -> None:
    with pytest.raises(CoverageError, match=message) as info:
        coverage(witness, "SELECT 1", SCHEMA)
    assert isinstance(info.value, GradingError)


def test_coverage_from_files(tmp_path: Path) -> None:
    witness = tmp_path / "witness.sql"
    agent = tmp_path / "agent.sql"
    witness.write_text("SELECT u.login FROM okta_users u JOIN hibob_people h ON h.email = u.login;\n")
    agent.write_text("SELECT login FROM okta_users;\nSELECT email FROM hibob_people;\nSELEC;\n")
    report = coverage_from_files(witness, agent, SCHEMA)
    assert report.agent_tables == ["hibob_people", "okta_users"]
    assert (report.table_recall, report.join_recall, report.unparsed) == (1.0, 0.0, 1)


def test_coverage_from_files_reports_an_unreadable_file(tmp_path: Path) -> None:
    witness = tmp_path / "witness.sql"
    witness.write_text("SELECT 1 FROM okta_users")
    with pytest.raises(CoverageError, match=r"missing\.sql"):
        coverage_from_files(witness, tmp_path / "missing.sql")
    (tmp_path / "latin1.sql").write_bytes(b"SELECT '\xe9' FROM okta_users")
    with pytest.raises(CoverageError, match=r"latin1\.sql"):
        coverage_from_files(witness, tmp_path / "latin1.sql")


SQLISH = st.lists(
    st.sampled_from(
        ["SELECT", "FROM", "WHERE", "JOIN", "ON", "USING", "(", ")", ",", ";", "=", "'", '"', "--", "\n", "*",
         "okta_users", "u", "u.id", "m.user_id", "IN", "EXISTS", "WITH", "AS", "NATURAL", "1", "/*", "*/"]
    ),
    max_size=30,
).map(" ".join)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.one_of(SQLISH, st.text(max_size=80)))
def test_extraction_never_raises_on_arbitrary_text(text: str) -> None:
    for schema in (None, SCHEMA):
        structures = extract_structures(text, schema)
        for s in structures:
            assert s.sql and s.sql in text
            assert s.parsed or not (s.tables or s.joins)
        report = coverage("SELECT login FROM okta_users", text, schema)
        assert report.unparsed == sum(not s.parsed for s in structures)
