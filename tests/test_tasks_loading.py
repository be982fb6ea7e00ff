"""The task loader and ground-truth derivation against bad input: each error names file and task."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from runner.cli import main
from runner.errors import TaskError
from runner.paths import tasks_dir
from runner.tasks.catalog import catalog, check_traps, derive_all, verify_all
from runner.tasks.load import load_tasks
from runner.tasks.traps import trap_problems
from runner.tasks.truth import GROUND_TRUTH_NAME, write_ground_truth

ENUMERATION = {
    "id": "ispm-001",
    "title": "Leavers whose Okta account is still active",
    "kind": "enumeration",
    "category": "offboarding",
    "vendors": ["hibob", "okta"],
    "hops": 2,
    "difficulty": "medium",
    "prompt": "Which people who have left the company still have an active Okta account? Give name and login.",
    "witness_sql": "SELECT h.id AS person_id, h.display_name, o.login FROM hibob_people h "
    "JOIN okta_users o ON lower(o.login) = h.email "
    "WHERE h.status = 'terminated' AND o.status = 'ACTIVE'",
    "dual_sql": "SELECT o.login, (SELECT id FROM hibob_people WHERE email = lower(o.login)) AS person_id "
    "FROM okta_users o WHERE o.status = 'ACTIVE' AND lower(o.login) IN "
    "(SELECT email FROM hibob_people WHERE status = 'terminated')",
    "entity_columns": [
        {"column": "person_id", "vendor": "hibob", "type": "person", "label": "display_name"},
        {"column": "login", "vendor": "okta", "type": "account"},
    ],
}
VERDICT = {
    "id": "ispm-002",
    "title": "Internet-open Atlas access lists",
    "kind": "verdict",
    "category": "network_exposure",
    "vendors": ["atlas"],
    "hops": 1,
    "difficulty": "easy",
    "prompt": "Does any MongoDB Atlas project accept connections from the whole internet? Name the projects.",
    "yes_when": "rows",
    "witness_sql": "SELECT p.name, l.cidr_block FROM atlas_ip_access_list l JOIN atlas_projects p "
    "ON p.id = l.project_id WHERE l.cidr_block = '0.0.0.0/0'",
    "dual_sql": "SELECT (SELECT name FROM atlas_projects WHERE id = project_id) AS name, cidr_block "
    "FROM atlas_ip_access_list WHERE cidr_block LIKE '0.0.0.0/0'",
    "entity_columns": [{"column": "name", "vendor": "atlas", "type": "resource"}],
}


def _write(root: Path, *tasks: dict[str, object], names: list[str] | None = None) -> Path:
    folder = root / "v1"
    folder.mkdir(parents=True, exist_ok=True)
    for i, task in enumerate(tasks):
        name = names[i] if names else f"{task['id']}.yaml"
        (folder / name).write_text(yaml.safe_dump(task, sort_keys=False))
    return root


def test_valid_tasks_derive_truth(tmp_path: Path, world_path: Path) -> None:
    root = _write(tmp_path, ENUMERATION, VERDICT)
    truth = derive_all(root, world_path)
    assert truth.tasks["ispm-001"].row_count >= 5
    assert {e.vendor for e in truth.tasks["ispm-001"].entities} == {"hibob", "okta"}
    assert truth.tasks["ispm-002"].verdict == "yes"
    assert any(e.identifier == "prod-analytics" for e in truth.tasks["ispm-002"].entities)


def _with(base: dict[str, object], **changes: object) -> dict[str, object]:
    return {**base, **changes}


# A naive variant that ignores the Okta status, so it also finds leavers whose account is deprovisioned.
_TRAP_STATUS = {
    "family": "suspended_vs_deprovisioned",
    "why": "Ignoring the account status lists leavers who cannot sign in.",
    "naive": [{"old": " AND o.status = 'ACTIVE'", "new": ""}],
}
# A "naive" variant that only swaps the sides of the join: same answer, so the trap decides nothing.
_TRAP_NO_BITE = {
    "family": "alias",
    "why": "Swapping the sides of a join changes nothing.",
    "naive": [{"old": "lower(o.login) = h.email", "new": "h.email = lower(o.login)"}],
}


BAD = [
    ("unknown vendor", [_with(ENUMERATION, vendors=["hibob", "salesforce"])], "vendors"),
    ("unknown category", [_with(ENUMERATION, category="phishing")], "category"),
    ("verdict without yes_when", [_with(VERDICT, yes_when=None)], "yes_when"),
    ("missing witness", [{k: v for k, v in ENUMERATION.items() if k != "witness_sql"}], "witness_sql"),
    ("duplicate id", [ENUMERATION, ENUMERATION], "duplicate id"),
    ("file named after another id", [ENUMERATION], "file name must be ispm-001.yaml"),
    (
        "unknown trap family",
        [
            _with(
                ENUMERATION,
                traps=[{"family": "typo", "why": "not a family at all", "naive": [{"old": "h", "new": ""}]}],
            )
        ],
        "traps.0.family",
    ),
    (
        "naive edit not in the witness",
        [
            _with(
                ENUMERATION,
                traps=[
                    {
                        "family": "alias",
                        "why": "edit text is missing",
                        "naive": [{"old": "gws_user_aliases", "new": ""}],
                    }
                ],
            )
        ],
        "naive edit text does not occur in the witness: 'gws_user_aliases'",
    ),
    (
        "one family twice",
        [_with(ENUMERATION, traps=[_TRAP_STATUS, _TRAP_STATUS])],
        "traps lists a family twice",
    ),
]


@pytest.mark.parametrize(("tasks", "expected"), [(b[1], b[2]) for b in BAD], ids=[b[0] for b in BAD])
def test_bad_task_files_are_rejected_whole(tmp_path: Path, tasks: list[dict[str, object]], expected: str) -> None:
    names = (
        [f"ispm-00{i + 1}.yaml" for i in range(len(tasks))]
        if expected != "file name must be ispm-001.yaml"
        else ["ispm-009.yaml"]
    )
    root = _write(tmp_path, *tasks, names=names)
    with pytest.raises(TaskError) as caught:
        load_tasks(root)
    message = str(caught.value)
    assert expected in message
    assert "ispm-00" in message and ".yaml" in message, "the error names the file"


def test_malformed_yaml_names_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "v1"
    folder.mkdir()
    (folder / "ispm-001.yaml").write_text("id: ispm-001\ntitle: [unclosed\n")
    with pytest.raises(TaskError, match=r"ispm-001\.yaml: malformed YAML"):
        load_tasks(tmp_path)


DERIVE_BAD = [
    ("witness fails", _with(ENUMERATION, witness_sql="SELECT nope FROM okta_users"), "witness query fails"),
    (
        "enumeration returns nothing",
        _with(ENUMERATION, witness_sql=ENUMERATION["witness_sql"] + " AND 0"),
        "returns no rows for an enumeration",
    ),
    (
        "witnesses disagree",
        _with(ENUMERATION, dual_sql="SELECT login, NULL AS person_id FROM okta_users LIMIT 3"),
        "witness and dual witness disagree",
    ),
    (
        "entity column missing",
        _with(ENUMERATION, entity_columns=[{"column": "upn", "vendor": "azure", "type": "account"}]),
        "no output column(s) ['upn']",
    ),
    ("dual witness fails", _with(VERDICT, dual_sql="SELEC 1"), "dual witness query fails"),
]


@pytest.mark.parametrize(("task", "expected"), [(b[1], b[2]) for b in DERIVE_BAD], ids=[b[0] for b in DERIVE_BAD])
def test_derivation_errors_name_the_task(
    tmp_path: Path, world_path: Path, task: dict[str, object], expected: str
) -> None:
    root = _write(tmp_path, task)
    with pytest.raises(TaskError) as caught:
        derive_all(root, world_path)
    assert expected in str(caught.value)
    assert f"task {task['id']}" in str(caught.value)


def test_verify_catches_truth_that_no_longer_matches_the_world(tmp_path: Path, world_path: Path) -> None:
    root = _write(tmp_path, ENUMERATION, VERDICT)
    truth = derive_all(root, world_path)
    write_ground_truth(root / GROUND_TRUTH_NAME, truth)
    assert verify_all(root, world_path).ground_truth_digest == truth.ground_truth_digest
    # The world "changes": one more leaver is still active in Okta.
    changed = tmp_path / "world"
    shutil.copytree(world_path, changed)
    import sqlite3

    conn = sqlite3.connect(changed / "ispm-crossvendor-v1.sqlite")
    conn.execute(
        "UPDATE okta_users SET status = 'ACTIVE' WHERE lower(login) IN "
        "(SELECT email FROM hibob_people WHERE status = 'terminated') AND status = 'DEPROVISIONED'"
    )
    conn.commit()
    conn.close()
    # Re-pin the manifest to the changed world, as someone rebuilding the world would.
    from runner.world.digest import digest_database, file_sha256, logical_digest
    from runner.world.manifest import TableEntry, load_manifest, write_manifest

    manifest = load_manifest(changed / "manifest.json")
    tables = digest_database(changed / "ispm-crossvendor-v1.sqlite")
    manifest.tables = {
        n: TableEntry(vendor=manifest.tables[n].vendor, rows=d.rows, digest=d.digest) for n, d in tables.items()
    }
    manifest.logical_digest = logical_digest(tables)
    manifest.snapshot.sha256 = file_sha256(changed / "ispm-crossvendor-v1.sqlite")
    manifest.snapshot.bytes = (changed / "ispm-crossvendor-v1.sqlite").stat().st_size
    write_manifest(changed / "manifest.json", manifest)
    with pytest.raises(TaskError) as caught:
        verify_all(root, changed)
    message = str(caught.value)
    assert "task ispm-001: ground truth no longer matches the world" in message
    assert "ispm-002" not in message


def test_verify_catches_an_edited_ground_truth_file(tmp_path: Path, world_path: Path) -> None:
    root = _write(tmp_path, ENUMERATION, VERDICT)
    write_ground_truth(root / GROUND_TRUTH_NAME, derive_all(root, world_path))
    raw = json.loads((root / GROUND_TRUTH_NAME).read_text())
    raw["tasks"]["ispm-002"]["verdict"] = "no"
    (root / GROUND_TRUTH_NAME).write_text(json.dumps(raw))
    with pytest.raises(TaskError, match="task ispm-002: ground truth no longer matches the world"):
        verify_all(root, world_path)


def test_tasks_check_command_reports_rows(tmp_path: Path) -> None:
    root = _write(tmp_path, ENUMERATION)
    result = CliRunner().invoke(main, ["tasks", "check", str(root / "v1" / "ispm-001.yaml")])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ispm-001: ")
    bad = _write(tmp_path / "bad", _with(ENUMERATION, witness_sql="SELECT 1 AS person_id, 2 AS login WHERE 0"))
    result = CliRunner().invoke(main, ["tasks", "check", str(bad / "v1" / "ispm-001.yaml")])
    assert result.exit_code == 1
    assert "task ispm-001: witness query returns no rows" in result.output


def test_verify_passes_when_every_trap_bites(tmp_path: Path, world_path: Path) -> None:
    root = _write(tmp_path, _with(ENUMERATION, traps=[_TRAP_STATUS]), VERDICT)
    write_ground_truth(root / GROUND_TRUTH_NAME, derive_all(root, world_path))
    [outcome] = check_traps(root, world_path, verify_all(root, world_path))
    assert (outcome.task_id, outcome.family, outcome.bites, outcome.verdict_flips) == (
        "ispm-001",
        "suspended_vs_deprovisioned",
        True,
        False,
    )
    assert outcome.missed == 0 and outcome.extra > 0


def test_verify_fails_on_a_trap_that_decides_nothing(tmp_path: Path, world_path: Path) -> None:
    root = _write(tmp_path, _with(ENUMERATION, traps=[_TRAP_STATUS, _TRAP_NO_BITE]), VERDICT)
    write_ground_truth(root / GROUND_TRUTH_NAME, derive_all(root, world_path))
    with pytest.raises(TaskError) as caught:
        verify_all(root, world_path)
    assert str(caught.value) == (
        "traps that decide nothing:\n"
        "  - task ispm-001: trap alias does not bite: its naive variant gives the same answer as the truth"
    )


def test_a_naive_variant_that_flips_the_verdict_bites(tmp_path: Path, world_path: Path) -> None:
    trap = {
        "family": "revoked_grant",
        "why": "Looking at the wrong block makes the answer empty.",
        "naive": [{"old": "'0.0.0.0/0'", "new": "'192.0.2.0/24'"}],
    }
    root = _write(tmp_path, _with(VERDICT, traps=[trap]))
    truth = derive_all(root, world_path)
    [outcome] = check_traps(root, world_path, truth)
    assert (outcome.bites, outcome.verdict_flips, outcome.extra) == (True, True, 0)


def test_a_naive_variant_that_fails_does_not_bite(tmp_path: Path, world_path: Path) -> None:
    trap = {"family": "nesting", "why": "This edit breaks the SQL.", "naive": [{"old": "FROM", "new": "FORM"}]}
    root = _write(tmp_path, _with(VERDICT, traps=[trap]))
    outcomes = check_traps(root, world_path, derive_all(root, world_path))
    assert trap_problems(outcomes) == [
        'task ispm-002: trap nesting does not bite: its naive variant fails: near "atlas_ip_access_list": syntax error'
    ]


CATALOG_PROBE = """
import json, sys
from pathlib import Path

from click.testing import CliRunner

from runner.paths import tasks_dir

root = tasks_dir().resolve()
opened = []


def count(event, args):
    # Every open of a task file or of the ground truth, by whatever stage asks.
    if event == "open" and isinstance(args[0], (str, Path)):
        path = Path(args[0]).resolve()
        if path.parent == root / "v1" or path == root / "ground_truth.json":
            opened.append(path.relative_to(root).as_posix())


sys.addaudithook(count)

from runner.cli import main
from runner.inspect_eval.task_set import task_by_id, truths
from runner.pipeline import planned_samples
from runner.run.digests import current_digests
from runner.run.spec import RunSpec

spec = RunSpec(agent_image="example/agent:1", judges=("ref#1", "ref#2"), epochs=2, backend="local")
assert planned_samples(spec) == 254
current_digests()
assert task_by_id("ispm-002").kind == "verdict" and "ispm-002" in truths()
for args in (["tasks", "list", "--json"], ["tasks", "show", "ispm-001", "--with-truth", "--json"]):
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 0, done.output
print(json.dumps(opened))
"""


def test_the_task_set_and_its_ground_truth_are_read_once_per_process_whoever_asks() -> None:
    # A run's plan, its digests, the Inspect task's set, and two commands, in one fresh interpreter.
    done = subprocess.run([sys.executable, "-c", CATALOG_PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    opened = json.loads(done.stdout.splitlines()[-1])
    task_files = sorted(p.name for p in (tasks_dir() / "v1").glob("*.yaml"))
    assert len(task_files) == 127
    assert sorted(opened) == sorted([f"v1/{name}" for name in task_files] + ["ground_truth.json"])


def test_the_catalog_it_shares_cannot_be_changed_by_one_caller() -> None:
    shared = catalog()
    assert catalog() is shared
    with pytest.raises(TypeError):
        shared.by_id["ispm-001"] = shared.by_id["ispm-002"]  # type: ignore[index]
    with pytest.raises(TypeError):
        del shared.truths["ispm-001"]  # type: ignore[attr-defined]
    assert "ispm-001" in shared.by_id and "ispm-001" in shared.truths
