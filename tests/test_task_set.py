"""The published v1 task set: its mix, its ground truth against the world, and what an agent can see."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main
from runner.tasks.catalog import check_traps, mix, verify_all
from runner.tasks.load import load_tasks
from runner.tasks.model import CATEGORIES, TRAP_FAMILIES, VENDORS, Task, TrapFamily
from runner.tasks.traps import MIN_TASKS_PER_FAMILY, tasks_per_family, trap_problems
from runner.tasks.truth import GROUND_TRUTH_NAME, GroundTruth, load_ground_truth
from runner.tasks.view import agent_files
from runner.world.generate import all_tables


@pytest.fixture(scope="module")
def task_set(tasks_path: Path) -> list[Task]:
    return load_tasks(tasks_path)


@pytest.fixture(scope="module")
def truth(tasks_path: Path) -> GroundTruth:
    return load_ground_truth(tasks_path / GROUND_TRUTH_NAME)


@pytest.fixture(scope="module")
def docs_text(world_path: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((world_path / "docs").glob("*.md")))


def test_published_ground_truth_matches_the_world(tasks_path: Path, world_path: Path) -> None:
    derived = verify_all(tasks_path, world_path)
    assert len(derived.tasks) == 127


def test_mix_meets_the_v1_targets(task_set: list[Task], truth: GroundTruth) -> None:
    m = mix(task_set, truth)
    assert m.total == 127
    assert [t.id for t in task_set] == [f"ispm-{i:03d}" for i in range(1, 128)]
    assert m.verdict >= 0.40 * m.total
    assert 0.35 * m.verdict <= m.verdict_yes <= 0.65 * m.verdict
    assert m.multi_vendor >= 0.60 * m.total
    assert m.three_hop >= 25
    assert set(m.per_vendor) == set(VENDORS)
    assert min(m.per_vendor.values()) >= 10
    assert set(m.per_category) == set(CATEGORIES)
    assert set(m.per_difficulty) == {"easy", "medium", "hard", "expert"}


def test_titles_and_prompts_are_unique(task_set: list[Task]) -> None:
    assert len({t.title for t in task_set}) == len(task_set)
    assert len({t.prompt for t in task_set}) == len(task_set)


def test_every_witness_is_parseable_for_coverage(task_set: list[Task]) -> None:
    from runner.grading.coverage import SqlSchema, extract_structures

    schema = SqlSchema({t.name: t.column_names for t in all_tables()})
    for task in task_set:
        for sql in (task.witness_sql, task.dual_sql):
            structures = extract_structures(sql, schema)
            assert structures and all(s.parsed for s in structures), task.id
            assert all(s.tables for s in structures), task.id


# ------------------------------------------------------------------------------------ traps
def test_every_trap_family_decides_at_least_five_tasks(tasks_path: Path, world_path: Path, truth: GroundTruth) -> None:
    outcomes = check_traps(tasks_path, world_path, truth)
    assert trap_problems(outcomes) == []
    bitten = tasks_per_family(outcomes)
    assert set(bitten) == set(TrapFamily.__args__)  # type: ignore[attr-defined]
    thin = {family: tasks for family, tasks in bitten.items() if len(tasks) < MIN_TASKS_PER_FAMILY}
    assert thin == {}


def test_every_trap_family_is_documented() -> None:
    assert set(TRAP_FAMILIES) == set(TrapFamily.__args__)  # type: ignore[attr-defined]
    assert all(len(doc) > 60 for doc in TRAP_FAMILIES.values())


def test_the_traps_the_issue_named_bite_where_it_said_they_did_not(task_set: list[Task]) -> None:
    by_id = {t.id: set(t.trap_families) for t in task_set}
    # Azure AD nesting in the identity-admin tasks, and the alias / Lumen login hints in the leaver tasks.
    for task_id in ("ispm-012", "ispm-098", "ispm-124", "ispm-127"):
        assert "nesting" in by_id[task_id], task_id
    assert "alias" in by_id["ispm-008"]
    assert {"lumen_login"} <= by_id["ispm-012"] & by_id["ispm-124"] & by_id["ispm-113"]


# ------------------------------------------------------------------------------------ no leakage
TABLE_NAMES = sorted((t.name for t in all_tables()), key=len, reverse=True)


def test_agent_files_hold_no_sql_and_no_schema_names(task_set: list[Task]) -> None:
    for task in task_set:
        for name, text in agent_files(task).items():
            lowered = text.lower()
            assert not re.search(r"\bselect\b.*\bfrom\b", lowered, re.S), f"{task.id} {name} holds SQL"
            for table in TABLE_NAMES:
                assert table not in lowered, f"{task.id} {name} names table {table}"
            for line in (task.witness_sql + "\n" + task.dual_sql).splitlines():
                if len(line.strip()) >= 25:
                    assert line.strip() not in text, f"{task.id} {name} holds witness SQL"


def test_task_json_holds_only_the_agent_fields(task_set: list[Task]) -> None:
    for task in task_set:
        task_json = json.loads(agent_files(task)["task.json"])
        assert set(task_json) == {"task_id", "kind", "answer_format", "time_limit_seconds", "world", "docs"}


def _identifiers(truth: GroundTruth, task_id: str) -> set[str]:
    found = set()
    for entity in truth.tasks[task_id].entities:
        if entity.type == "role":
            continue  # role names are schema vocabulary (e.g. `SUPER_ADMIN`), not findings
        for value in (entity.identifier, entity.label):
            if value and len(value) >= 6:
                found.add(value)
    return found


# Values the docs must name because they are a column's vocabulary, not because any task finds them.
DOCUMENTED_VOCABULARY = {"0.0.0.0/0", "allUsers", "allAuthenticatedUsers", "sandbox"}


def _names(text: str, ident: str) -> bool:
    """Whether ``text`` names ``ident`` as a whole token (``corvid-prod`` is not in ``corvid-prod-api``)."""
    return re.search(rf"(?<![\w.@/-]){re.escape(ident)}(?![\w.@/-])", text) is not None


def test_no_ground_truth_identifier_is_visible_unless_the_prompt_names_it(
    task_set: list[Task], truth: GroundTruth, docs_text: str
) -> None:
    leaks = []
    for task in task_set:
        files = agent_files(task)
        for ident in _identifiers(truth, task.id) - DOCUMENTED_VOCABULARY:
            if _names(files["prompt.md"], ident):
                continue
            if _names(files["task.json"], ident) or _names(docs_text, ident):
                leaks.append(f"{task.id}: {ident}")
    assert leaks == []


def test_the_leak_check_can_fail() -> None:
    assert _names("see `corvid-prod` here", "corvid-prod")
    assert not _names("see `corvid-prod-api` here", "corvid-prod")
    assert _names("user jdoe@corvid.io left", "jdoe@corvid.io")


def test_docs_hold_no_witness_sql(task_set: list[Task], docs_text: str) -> None:
    for task in task_set:
        for line in (task.witness_sql + "\n" + task.dual_sql).splitlines():
            if len(line.strip()) >= 25:
                assert line.strip() not in docs_text, task.id


# ------------------------------------------------------------------------------------ CLI
def test_tasks_list_filters_and_prints_json(task_set: list[Task]) -> None:
    result = CliRunner().invoke(main, ["tasks", "list", "--vendor", "atlas", "--kind", "verdict", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)
    expected = [t.id for t in task_set if "atlas" in t.vendors and t.kind == "verdict"]
    assert [row["id"] for row in listed] == expected
    assert all("witness_sql" not in row and "prompt" not in row for row in listed)
    assert all(
        set(row) == {"id", "title", "kind", "category", "vendors", "hops", "difficulty", "traps"} for row in listed
    )
    result = CliRunner().invoke(main, ["tasks", "list", "--vendor", "azure", "--json"])
    by_id = {row["id"]: row["traps"] for row in json.loads(result.output)}
    assert by_id["ispm-012"] == ["nesting", "lumen_login", "revoked_grant", "pim_eligible"]
    assert by_id["ispm-002"] == []
    result = CliRunner().invoke(main, ["tasks", "list", "--hops", "3", "--category", "offboarding"])
    expected_ids = [t.id for t in task_set if t.hops == 3 and t.category == "offboarding"]
    assert result.exit_code == 0
    assert result.output.splitlines()[-1] == f"{len(expected_ids)} tasks"
    assert [line.split()[0] for line in result.output.splitlines()[:-1]] == expected_ids


def test_tasks_show_prints_exactly_the_container_files(task_set: list[Task]) -> None:
    task = task_set[0]
    result = CliRunner().invoke(main, ["tasks", "show", task.id, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == {"agent_files": agent_files(task)}
    result = CliRunner().invoke(main, ["tasks", "show", task.id, "--with-truth", "--json"])
    host = json.loads(result.output)["host"]
    assert host["witness_sql"] == task.witness_sql
    assert host["ground_truth"]["task_id"] == task.id
    result = CliRunner().invoke(main, ["tasks", "show", "ispm-999"])
    assert result.exit_code == 1 and "no such task: ispm-999" in result.output


def test_tasks_verify_command(task_set: list[Task]) -> None:
    result = CliRunner().invoke(main, ["tasks", "verify", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["total"] == len(task_set)
