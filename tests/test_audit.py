"""``audit`` and ``bundle``: a clean run audits ok, and each kind of tampering is caught and located.

The run is the session's shared gold calibration run (``gold_run`` in conftest); each test tampers with its own
copy.
"""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import GOLD_RUN_EPOCHS, GOLD_RUN_TASKS

from runner.record.audit import AuditError, audit
from runner.record.bundle import MANIFEST_NAME, BundleError, bundle
from runner.run.journal import JOURNAL_NAME

TASKS = GOLD_RUN_TASKS


@pytest.fixture(scope="module")
def finished_run(gold_run: Path) -> Path:
    return gold_run


@pytest.fixture()
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / finished_run.name
    shutil.copytree(finished_run, target)
    return target


def _tamper_first_vote(journal: Path) -> int:
    """Flip the first vote's grade in place; return the line number it was on."""
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines, start=1):
        entry = json.loads(line)
        if entry["kind"] == "sample_graded":
            vote = entry["votes"][0]
            vote["grade"] = "incorrect" if vote["grade"] == "correct" else "correct"
            lines[number - 1] = json.dumps(entry) + "\n"
            journal.write_text("".join(lines), encoding="utf-8")
            return number
    raise AssertionError("no sample_graded entry")


@pytest.mark.docker
def test_a_clean_run_audits_ok(finished_run: Path) -> None:
    report = audit(finished_run)
    assert report.ok, report.problems
    assert report.checks["record_fields"] > 0
    assert report.checks["consensus_cells"] >= len(TASKS) * GOLD_RUN_EPOCHS
    assert report.checks["replayed_queries"] > 0
    assert report.checks["coverage_samples"] == len(TASKS) * GOLD_RUN_EPOCHS


def _edit_first_graded(journal: Path, edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``edit`` to the first ``sample_graded`` entry in place; return the entry as edited."""
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    for number, line in enumerate(lines):
        entry = json.loads(line)
        if entry["kind"] == "sample_graded":
            edit(entry)
            lines[number] = json.dumps(entry) + "\n"
            journal.write_text("".join(lines), encoding="utf-8")
            return entry
    raise AssertionError("no sample_graded entry")


@pytest.mark.docker
def test_the_gold_replay_journals_full_coverage_and_the_record_carries_it(finished_run: Path) -> None:
    record = json.loads((finished_run / "record.json").read_text(encoding="utf-8"))
    assert len(record["samples"]) == len(TASKS) * GOLD_RUN_EPOCHS
    for sample in record["samples"]:
        # The replay agent runs the witness itself, so it covers every witness table.
        assert sample["coverage"]["table_recall"] == 1.0, sample["task_id"]
        assert sample["coverage"]["witness_tables"], sample["task_id"]
        assert sample["coverage_error"] is None


def test_a_real_run_journals_what_the_host_replay_found_of_each_logged_statement(finished_run: Path) -> None:
    from runner.grading.replay import sql_key
    from runner.run.journal import SampleFinished, SampleGraded, read_entries
    from runner.trace.timeline import QueryStep, read_timeline

    entries = read_entries(finished_run / JOURNAL_NAME)
    collected = {(e.output.task_id, e.output.epoch): e.output for e in entries if isinstance(e, SampleFinished)}
    graded = [e for e in entries if isinstance(e, SampleGraded)]
    assert len(graded) == len(TASKS) * GOLD_RUN_EPOCHS
    for g in graded:
        logged = {sql_key(q.sql) for q in collected[(g.task_id, g.epoch)].queries}
        # The gold replay agent logs the witness through ispm-sql; the host's replay finds the same rows.
        assert logged and set(g.replay_checks) == logged, g.task_id
        assert {c.finding for c in g.replay_checks.values()} == {"same"}, g.task_id
    steps = [e for e in read_timeline(finished_run, TASKS[0], 1).events if isinstance(e, QueryStep)]
    assert steps and all(s.replay is not None and s.replay.finding == "same" for s in steps)


# Each row: how the journaled coverage is tampered with, and a phrase the audit's problem must contain.
COVERAGE_TAMPERING = [
    ("table_recall", lambda c: c.update(table_recall=0.25), "table_recall journaled 0.25 != recomputed 1.0"),
    ("agent_tables", lambda c: c.update(agent_tables=["hibob_people"]), "agent_tables journaled"),
    ("unparsed", lambda c: c.update(unparsed=3), "unparsed journaled 3 != recomputed 0"),
]


@pytest.mark.docker
@pytest.mark.parametrize(("field", "tamper", "phrase"), COVERAGE_TAMPERING, ids=[r[0] for r in COVERAGE_TAMPERING])
def test_tampered_journaled_coverage_is_caught(
    run_copy: Path, field: str, tamper: Callable[[dict[str, Any]], None], phrase: str
) -> None:
    entry = _edit_first_graded(run_copy / JOURNAL_NAME, lambda e: tamper(e["coverage"]))
    report = audit(run_copy)
    coverage = [p for p in report.problems if p.startswith("coverage:")]
    assert coverage == [p for p in coverage if f"{entry['task_id']} epoch {entry['epoch']}" in p]
    assert len(coverage) == 1 and phrase in coverage[0], report.problems


@pytest.mark.docker
def test_dropped_coverage_and_an_edited_record_coverage_are_caught(run_copy: Path) -> None:
    _edit_first_graded(run_copy / JOURNAL_NAME, lambda e: e.update(coverage=None))
    record_path = run_copy / "record.json"
    record = json.loads(record_path.read_text(encoding="utf-8"))
    record["samples"][-1]["coverage"]["join_recall"] = 0.0
    record_path.write_text(json.dumps(record), encoding="utf-8")
    report = audit(run_copy)
    assert any(p.startswith("coverage:") and "journaled no coverage" in p for p in report.problems), report.problems
    assert any(p.startswith("record: samples[") and "coverage.join_recall" in p for p in report.problems)


@pytest.mark.docker
def test_one_tampered_vote_is_caught(run_copy: Path) -> None:
    _tamper_first_vote(run_copy / JOURNAL_NAME)
    report = audit(run_copy)
    assert not report.ok
    assert any(p.startswith("record: samples[") and ".grade" in p for p in report.problems), report.problems


@pytest.mark.docker
def test_an_edited_record_is_caught_with_its_json_path(run_copy: Path) -> None:
    path = run_copy / "record.json"
    record = json.loads(path.read_text())
    record["scores"]["dimensions"]["answer_correctness"]["mean"] = 0.95
    path.write_text(json.dumps(record, indent=2))
    report = audit(run_copy)
    assert not report.ok
    assert "record: scores.dimensions.answer_correctness.mean: 0.95 != 1.0" in report.problems


@pytest.mark.docker
def test_a_damaged_and_a_torn_journal_line_are_named_by_number(run_copy: Path) -> None:
    journal = run_copy / JOURNAL_NAME
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace('"kind"', '"kinx"', 1)
    journal.write_text("".join(lines) + '{"kind": "run_fin', encoding="utf-8")
    report = audit(run_copy)
    assert any(p.startswith("journal: line 2: not a journal entry") for p in report.problems), report.problems
    assert f"journal: line {len(lines) + 1}: unterminated last line (torn write)" in report.problems


@pytest.mark.docker
def test_a_bundle_round_trip_audits_ok_and_is_deterministic(finished_run: Path, tmp_path: Path) -> None:
    first = bundle(finished_run, tmp_path / "a.tar.gz")
    second = bundle(finished_run, tmp_path / "b.tar.gz")
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        names = tar.getnames()
        assert names[0] == MANIFEST_NAME and names[1:] == sorted(names[1:])
        assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in tar.getmembers())
    report = audit(first)
    assert report.ok, report.problems
    assert report.checks["bundle_files"] == len(names) - 1


@pytest.mark.docker
def test_a_file_modified_inside_a_bundle_is_named(finished_run: Path, tmp_path: Path) -> None:
    original = bundle(finished_run, tmp_path / "run.tar.gz")
    tampered = tmp_path / "tampered.tar.gz"
    with tarfile.open(original) as src, tarfile.open(tampered, "w:gz") as dst:
        for member in src.getmembers():
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name.endswith("/log.jsonl"):
                data += b'{"event": "inserted"}\n'
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    report = audit(tampered)
    assert not report.ok
    assert report.problems == [f"bundle: log.jsonl was modified: its sha256 differs from {MANIFEST_NAME}"]


def test_unreadable_input_raises_audit_error(tmp_path: Path) -> None:
    with pytest.raises(AuditError):
        audit(tmp_path / "nothing-here")
    with pytest.raises(AuditError):
        audit(tmp_path)  # a folder without a journal
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive")
    with pytest.raises(AuditError):
        audit(junk)


def test_bundling_a_missing_or_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BundleError):
        bundle(tmp_path / "missing", tmp_path / "out.tar.gz")
    (tmp_path / "empty").mkdir()
    with pytest.raises(BundleError):
        bundle(tmp_path / "empty", tmp_path / "out.tar.gz")


@pytest.mark.docker
def test_a_record_with_the_wrong_shapes_is_reported_not_crashed_on(run_copy: Path) -> None:
    path = run_copy / "record.json"
    record = json.loads(path.read_text())
    record["scores"]["tasks"][0]["grades"] = "all correct"
    record["digests"] = None
    path.write_text(json.dumps(record))
    report = audit(run_copy)
    assert any(p.startswith("consensus: ispm-001 ") for p in report.problems), report.problems
    assert "digests: record.json has no digests" in report.problems
