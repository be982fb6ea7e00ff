"""The world: determinism, tamper detection, docs coverage, key consistency, and the snapshot's shape."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from runner.cli import main
from runner.errors import WorldError
from runner.world import SNAPSHOT_NAME
from runner.world.build import build
from runner.world.generate import all_tables, vendor_of
from runner.world.manifest import load_manifest
from runner.world.verify import verify


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    first = tmp_path_factory.mktemp("build1")
    second = tmp_path_factory.mktemp("build2")
    build(first)
    build(second)
    return first, second


def test_two_builds_give_identical_digests(two_builds: tuple[Path, Path]) -> None:
    a, b = (load_manifest(d / "manifest.json") for d in two_builds)
    assert a.logical_digest == b.logical_digest
    assert a.tables == b.tables
    assert a.docs == b.docs
    # Same machine, same SQLite: the bytes agree too.
    assert a.snapshot.sha256 == b.snapshot.sha256


def test_bundled_world_is_what_the_generator_builds(two_builds: tuple[Path, Path], world_path: Path) -> None:
    built = load_manifest(two_builds[0] / "manifest.json")
    bundled = load_manifest(world_path / "manifest.json")
    assert built.logical_digest == bundled.logical_digest
    assert built.docs == bundled.docs


def test_bundled_world_verifies(world_path: Path) -> None:
    check = verify(world_path)
    assert check.manifest.dataset == "ispm-crossvendor-v1"
    assert check.manifest.as_of == "2026-06-30T00:00:00Z"


def test_snapshot_shape(world_path: Path) -> None:
    snapshot = world_path / SNAPSHOT_NAME
    header = snapshot.read_bytes()[:100]
    assert header[18] == 1 and header[19] == 1, "journal mode must be DELETE (legacy), not WAL"
    assert snapshot.stat().st_size <= 40 * 1024 * 1024
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro&immutable=1", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0, "snapshot must be VACUUMed"
    with pytest.raises(sqlite3.OperationalError):
        conn.execute("DELETE FROM hibob_people")
    conn.close()


# ------------------------------------------------------------------------------------ tampering
def _flip_byte(world: Path) -> None:
    snapshot = world / SNAPSHOT_NAME
    raw = bytearray(snapshot.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    snapshot.write_bytes(bytes(raw))


def _sql(world: Path, *statements: str) -> None:
    conn = sqlite3.connect(world / SNAPSHOT_NAME)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


TAMPERING = [
    ("flipped byte", _flip_byte, "sha256"),
    (
        "changed row",
        lambda w: _sql(
            w,
            "UPDATE okta_users SET status = 'ACTIVE' WHERE status = 'DEPROVISIONED' "
            "AND rowid = (SELECT min(rowid) FROM okta_users WHERE status = 'DEPROVISIONED')",
        ),
        "table okta_users: content digest differs",
    ),
    (
        "missing table",
        lambda w: _sql(w, "DROP TABLE atlas_ip_access_list"),
        "table atlas_ip_access_list: missing",
    ),
    ("missing snapshot", lambda w: (w / SNAPSHOT_NAME).unlink(), f"missing file: {SNAPSHOT_NAME}"),
    ("missing docs page", lambda w: (w / "docs" / "okta.md").unlink(), "missing file: docs/okta.md"),
    ("WAL mode", lambda w: _sql(w, "PRAGMA journal_mode = WAL"), "WAL journal mode"),
    ("manifest does not parse", lambda w: (w / "manifest.json").write_text("{not json"), "does not parse"),
    (
        "manifest missing a field",
        lambda w: (w / "manifest.json").write_text(json.dumps({"dataset": "x"})),
        "not a valid world manifest",
    ),
    ("edited docs", lambda w: (w / "docs" / "aws.md").write_text("# leaked findings\n"), "docs/aws.md"),
]


@pytest.mark.parametrize(("damage", "expected"), [(t[1], t[2]) for t in TAMPERING], ids=[t[0] for t in TAMPERING])
def test_verify_names_the_difference(world_copy: Path, damage, expected: str) -> None:  # type: ignore[no-untyped-def]
    damage(world_copy)
    with pytest.raises(WorldError) as caught:
        verify(world_copy)
    assert expected in str(caught.value)
    result = CliRunner().invoke(main, ["world", "verify", "--dir", str(world_copy)])
    assert result.exit_code == 1
    assert expected in result.output


def test_verify_json_lists_problems(world_copy: Path) -> None:
    _sql(world_copy, "DROP TABLE gcp_projects")
    result = CliRunner().invoke(main, ["world", "verify", "--dir", str(world_copy), "--json"])
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["ok"] is False
    assert "table gcp_projects: missing from the snapshot" in payload["problems"]


# ------------------------------------------------------------------------------------ docs
def _doc_section(world_path: Path, table: str) -> str:
    page = (world_path / "docs" / f"{vendor_of(table)}.md").read_text()
    start = page.index(f"### `{table}`")
    end = page.find("\n### ", start + 1)
    return page[start:] if end == -1 else page[start:end]


def test_docs_cover_every_table_and_column(world_db: sqlite3.Connection, world_path: Path) -> None:
    tables = [r[0] for r in world_db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert len(tables) == len(all_tables())
    for table in tables:
        section = _doc_section(world_path, table)
        for _, column, sql_type, *_rest in world_db.execute(f'PRAGMA table_info("{table}")'):
            assert re.search(rf"\| `{column}` \| {sql_type}", section), f"{table}.{column} is not documented"


def test_docs_state_the_as_of_date(world_path: Path) -> None:
    for page in (world_path / "docs").glob("*.md"):
        assert "2026-06-30T00:00:00Z" in page.read_text(), page.name


def test_world_info_lists_every_vendor() -> None:
    result = CliRunner().invoke(main, ["world", "info", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert [v["prefix"] for v in summary["vendors"]] == [
        "hibob",
        "okta",
        "azure",
        "aws",
        "gcp",
        "gws",
        "github",
        "atlas",
    ]
    assert all(v["tables"] for v in summary["vendors"])
    assert summary["vendors"][0]["tables"]["hibob_people"] >= 1500


# ------------------------------------------------------------------------------------ keys and values
def test_keys_within_each_vendor_hold(world_db: sqlite3.Connection) -> None:
    assert world_db.execute("PRAGMA foreign_key_check").fetchall() == []


def test_no_key_crosses_vendors() -> None:
    for table in all_tables():
        for _cols, ref_table, _ref_cols in table.foreign_keys:
            assert vendor_of(ref_table) == vendor_of(table.name), f"{table.name} -> {ref_table}"


def test_primary_keys_are_unique(world_db: sqlite3.Connection) -> None:
    for table in all_tables():
        if not table.primary_key:
            continue
        cols = ", ".join(table.primary_key)
        dupes = world_db.execute(f"SELECT {cols}, count(*) FROM {table.name} GROUP BY {cols} HAVING count(*) > 1")
        assert dupes.fetchall() == [], table.name


ISO = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?$")
TIME_COLUMN = re.compile(
    r"(date|time|_at|created|activated|changed|login|last_used|last_auth|updated|joined"
    r"|timestamp)$"
)


def test_timestamps_are_iso8601_utc(world_db: sqlite3.Connection) -> None:
    checked = 0
    for table in all_tables():
        for column in table.columns:
            if column.type != "TEXT" or not TIME_COLUMN.search(column.name) or column.name == "login":
                continue
            for (value,) in world_db.execute(
                f"SELECT DISTINCT {column.name} FROM {table.name} WHERE {column.name} IS NOT NULL"
            ):
                assert ISO.match(value), f"{table.name}.{column.name} = {value!r}"
                checked += 1
    assert checked > 1000


def test_nothing_is_after_the_as_of_date_except_expiries(world_db: sqlite3.Connection) -> None:
    future_ok = {"end_date_time", "valid_before_time", "delete_after_date", "contract_end_date"}
    for table in all_tables():
        for column in table.columns:
            if (
                column.type == "TEXT"
                and TIME_COLUMN.search(column.name)
                and column.name not in future_ok
                and column.name != "login"
            ):
                late = world_db.execute(
                    f"SELECT count(*) FROM {table.name} WHERE {column.name} > '2026-06-30T00:00:00Z'"
                ).fetchone()[0]
                assert late == 0, f"{table.name}.{column.name} has {late} values after the as-of date"


def test_realistic_volumes(world_db: sqlite3.Connection) -> None:
    def count(sql: str) -> int:
        return int(world_db.execute(sql).fetchone()[0])

    assert count("SELECT count(*) FROM hibob_people") >= 1500
    assert count("SELECT count(*) FROM hibob_people WHERE status = 'terminated'") >= 200
    assert count("SELECT count(*) FROM hibob_people WHERE employment_type = 'Contractor'") >= 50
    assert count("SELECT count(DISTINCT manager_id) FROM hibob_people") >= 30
    assert count("SELECT count(*) FROM okta_users") >= 1200
    assert count("SELECT count(*) FROM github_org_members") >= 300
    assert count("SELECT count(*) FROM gws_oauth_tokens") >= 1000


def test_cli_logs_json_to_the_log_file(tmp_path: Path, world_copy: Path) -> None:
    log_file = tmp_path / "logs" / "ispm.jsonl"
    result = CliRunner().invoke(main, ["--log-file", str(log_file), "world", "verify", "--dir", str(world_copy)])
    assert result.exit_code == 0, result.output
    (world_copy / "docs" / "okta.md").unlink()
    CliRunner().invoke(main, ["--log-file", str(log_file), "world", "verify", "--dir", str(world_copy)])
    events = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert [e["event"] for e in events] == ["world.verified", "world.verify_failed"]
    assert events[1]["problems"] == ["missing file: docs/okta.md"]
    assert events[0]["level"] == "info" and "timestamp" in events[0]


# ------------------------------------------------------------------------------------ remembered passes
def test_a_remembered_pass_skips_only_the_tables_digests(
    world_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    passes = tmp_path / "passes"
    verify(world_copy, passes=passes)
    assert len(list(passes.iterdir())) == 1

    def not_again(snapshot: Path) -> None:
        raise AssertionError("the tables were digested again for bytes that passed")

    monkeypatch.setattr("runner.world.verify.digest_database", not_again)
    assert verify(world_copy, passes=passes).snapshot == world_copy / SNAPSHOT_NAME
    # Every other check still runs.
    (world_copy / "docs" / "aws.md").write_text("# leaked findings\n")
    with pytest.raises(WorldError, match=re.escape("docs/aws.md")):
        verify(world_copy, passes=passes)


def test_changed_bytes_are_checked_in_full_though_the_manifest_vouches_for_them(
    world_copy: Path, tmp_path: Path
) -> None:
    passes = tmp_path / "passes"
    verify(world_copy, passes=passes)
    # A changed row, and the manifest's sha256 made to match it: only the tables' digests can tell.
    _sql(world_copy, "UPDATE okta_users SET status = 'ACTIVE' WHERE rowid = (SELECT min(rowid) FROM okta_users)")
    manifest = json.loads((world_copy / "manifest.json").read_text())
    manifest["snapshot"]["sha256"] = hashlib.sha256((world_copy / SNAPSHOT_NAME).read_bytes()).hexdigest()
    (world_copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(WorldError, match="table okta_users: content digest differs"):
        verify(world_copy, passes=passes)
    assert len(list(passes.iterdir())) == 1
