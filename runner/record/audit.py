"""``ispm audit``: recompute every number of a run from its raw journal and fail loudly on any difference.

An audit of a run folder (or of a bundle, checked against its ``MANIFEST.json`` first) runs six checks:

1. **journal**: every line of ``journal.jsonl`` is a complete, valid entry (a damaged line is named by number);
2. **record**: the record rebuilt from the journal alone equals ``record.json`` field by field, compared as
   JSON so that every field, including ones added later, is covered without this module knowing of them;
3. **consensus**: the consensus recomputed from the journal's raw votes equals the record's per-task grades;
4. **replay**: each sample's declared and logged SQL, replayed on the pristine world, returns the row counts
   and digests that the SQL tool logged;
5. **coverage**: each graded sample's structural coverage, recomputed from its SQL and the task's witness,
   equals the coverage its grading journaled (the record check then holds ``record.json`` to the journal);
6. **digests**: the world (verified against its manifest), task set, ground truth and rubric set hash to what
   the record and the journal pinned, and every vote names its rubric's current sha256;
7. **transcripts**: every transcript part the journal names (docs/trace.md) is there, has the sha256 journaled
   with its sample, and reads back whole; a difference names the sample and the file.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from runner.errors import IspmError
from runner.grading.consensus import consensus
from runner.grading.coverage import CoverageError, CoverageReport
from runner.grading.grade import GradingContext
from runner.grading.rubric import load_rubrics
from runner.paths import world_dir
from runner.record.build import build_record
from runner.record.bundle import MANIFEST_NAME, BundleError, BundleRefused, unpack_checked
from runner.record.model import RECORD_NAME
from runner.run.digests import current_digests
from runner.run.journal import JOURNAL_NAME, Entry, RunStarted, SampleFinished, SampleGraded, scan_entries
from runner.sample_key import SampleKey
from runner.tasks.catalog import catalog
from runner.tasks.model import Task
from runner.transcript.storage import TranscriptError, read_part
from runner.world.verify import verify

# A tampered vote can change hundreds of derived fields; the first ones locate it, the rest are counted.
MAX_DIFFS = 200


class AuditError(IspmError):
    """The input cannot be audited at all: no such path, no journal, or an archive that is not a bundle."""


class AuditReport(BaseModel):
    """What an audit found. ``ok`` only when ``problems`` is empty."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    source: str
    """The run folder or bundle audited."""
    run_id: str | None = None
    checks: dict[str, int] = Field(default_factory=dict)
    """How many items each check compared: journal lines, record fields, consensus cells, queries, digests."""
    problems: list[str] = Field(default_factory=list)
    """Every difference, one line each, prefixed by its check."""
    notes: list[str] = Field(default_factory=list)
    """What could not be checked, and why (never a difference)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True when no check found a difference."""
        return not self.problems


def audit(path: Path) -> AuditReport:
    """Audit a run folder, or a bundle written by :func:`runner.record.bundle.bundle`.

    A bundle's files are first checked against its ``MANIFEST.json`` (a changed, missing or extra file is
    reported by name); the run inside is then audited like a folder.

    Raises:
        AuditError: ``path`` does not exist, a folder holds no ``journal.jsonl``, or a file is not a readable
            bundle (not a tar.gz, no ``MANIFEST.json``, an unsafe member name).
    """
    if path.is_dir():
        report = AuditReport(source=str(path))
        _audit_dir(path, report)
        return report
    if path.is_file():
        report = AuditReport(source=str(path))
        with tempfile.TemporaryDirectory(prefix="ispm-audit-") as scratch:
            run_dir = _unpack(path, Path(scratch), report)
            if run_dir is not None:
                _audit_dir(run_dir, report)
        return report
    raise AuditError(f"no run folder or bundle at {path}")


def _unpack(path: Path, into: Path, report: AuditReport) -> Path | None:
    """Stream the bundle at ``path`` into ``into``, checking every file against the manifest; ``None`` when the
    bundle was refused part way (the reason is among the problems, and the run inside is not audited)."""
    try:
        manifest, found = unpack_checked(path, into)
    except BundleRefused as exc:
        report.problems.append(f"bundle: {exc}")
        report.notes.append("the run inside the bundle was not audited: the bundle was refused")
        return None
    except BundleError as exc:
        raise AuditError(str(exc)) from exc
    for name in sorted(set(manifest.files) | set(found)):
        if name not in found:
            report.problems.append(f"bundle: {name} is listed in {MANIFEST_NAME} but missing from the archive")
        elif found[name] != manifest.files[name]:
            report.problems.append(f"bundle: {name} was modified: its sha256 differs from {MANIFEST_NAME}")
    report.checks["bundle_files"] = len(found)
    return into / manifest.run


def _audit_dir(run_dir: Path, report: AuditReport) -> None:
    entries = _read_journal(run_dir / JOURNAL_NAME, report)
    recorded = _read_record(run_dir / RECORD_NAME, report)
    starts = [e for e in entries if isinstance(e, RunStarted)]
    report.run_id = starts[0].run_id if starts else None

    rebuilt: dict[str, Any] | None = None
    try:
        rebuilt = build_record(entries, catalog().tasks).model_dump(mode="json")
    except IspmError as exc:
        report.problems.append(f"record: cannot rebuild the record from the journal: {exc}")
    if rebuilt is not None and recorded is not None:
        diffs = list(_diff(rebuilt, recorded, ""))
        report.checks["record_fields"] = _count_leaves(rebuilt)
        report.problems += [f"record: {d}" for d in diffs[:MAX_DIFFS]]
        if len(diffs) > MAX_DIFFS:
            report.problems.append(f"record: ... and {len(diffs) - MAX_DIFFS} more differences")

    _check_consensus(entries, recorded, report)
    _check_replay_and_coverage(entries, catalog().by_id, report)
    _check_digests(entries, starts, recorded, report)
    _check_transcripts(run_dir, entries, report)


def _check_transcripts(run_dir: Path, entries: Sequence[Entry], report: AuditReport) -> None:
    """Each transcript part the journal names: present, the journaled bytes, and whole (every reference resolves)."""
    checked = 0
    for e in entries:
        if isinstance(e, SampleFinished):
            key, ref = e.output.key, e.transcript
        elif isinstance(e, SampleGraded):
            key, ref = e.key, e.transcript
        else:
            continue
        if ref is None:
            continue
        checked += 1
        try:
            read_part(run_dir, ref, key)
        except TranscriptError as exc:
            report.problems.append(f"transcript: {exc}")
    if checked:
        report.checks["transcripts"] = checked


def _read_journal(path: Path, report: AuditReport) -> list[Entry]:
    """Every valid entry; each damaged line (unparseable, or an unterminated last line) becomes a problem."""
    try:
        scan = scan_entries(path.read_bytes())
    except OSError as exc:
        raise AuditError(f"cannot read the journal {path}: {exc}") from exc
    report.problems += [f"journal: line {number}: {why}" for number, why in scan.damaged]
    if scan.torn is not None:
        # A finished run's journal ends with a newline; anything after it is a torn or appended write.
        report.problems.append(f"journal: line {scan.torn}: unterminated last line (torn write)")
    report.checks["journal_lines"] = scan.lines
    return scan.entries


def _read_record(path: Path, report: AuditReport) -> dict[str, Any] | None:
    """``record.json`` as raw JSON, not validated, so a tampered or malformed field is diffed, not refused."""
    try:
        raw = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        report.problems.append(f"record: cannot read {RECORD_NAME}: {exc}")
        return None
    if not isinstance(raw, dict):
        report.problems.append(f"record: {RECORD_NAME} is not a JSON object")
        return None
    return raw


def _diff(expected: Any, actual: Any, path: str) -> list[str]:
    """Every JSON path where ``actual`` (record.json) differs from ``expected`` (rebuilt), as ``path: a != e``."""
    where = path or "<root>"
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in actual:
                out.append(f"{sub}: missing from {RECORD_NAME} (recomputed {_short(expected[key])})")
            elif key not in expected:
                out.append(f"{sub}: in {RECORD_NAME} ({_short(actual[key])}) but not recomputed")
            else:
                out += _diff(expected[key], actual[key], sub)
        return out
    if isinstance(expected, list) and isinstance(actual, list):
        out = []
        if len(expected) != len(actual):
            out.append(f"{where}: {len(actual)} items != {len(expected)} recomputed")
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            out += _diff(e, a, f"{path}[{i}]")
        return out
    # bool is an int in Python: compare types too, so True never passes for 1.
    if (type(expected) is not type(actual) and not _both_numbers(expected, actual)) or expected != actual:
        return [f"{where}: {_short(actual)} != {_short(expected)}"]
    return []


def _both_numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def _count_leaves(value: Any) -> int:
    if isinstance(value, dict):
        return sum(_count_leaves(v) for v in value.values())
    if isinstance(value, list):
        return sum(_count_leaves(v) for v in value)
    return 1


def _check_consensus(entries: Sequence[Entry], recorded: dict[str, Any] | None, report: AuditReport) -> None:
    """Recompute consensus from every raw vote in the journal and compare it with the record's task grades."""
    votes = [v.to_vote() for e in entries if isinstance(e, SampleGraded) for v in e.votes]
    try:
        results = consensus(votes)
    except IspmError as exc:
        report.problems.append(f"consensus: cannot recompute from the journal's votes: {exc}")
        return
    scores = recorded.get("scores") if recorded is not None else None
    if not isinstance(scores, dict):
        report.notes.append("consensus: the record has no scores (the run did not complete); nothing to compare")
        return
    tasks = scores.get("tasks")
    rows = {r.get("task_id"): r for r in (tasks if isinstance(tasks, list) else []) if isinstance(r, dict)}
    cells = 0
    for c in results:
        row = rows.get(c.task_id)
        if row is None:
            report.problems.append(f"consensus: task {c.task_id} has votes but no row in {RECORD_NAME}")
            continue
        got = _obj(row.get("grades")).get(c.dimension)
        if got != c.grade:
            report.problems.append(f"consensus: {c.task_id} {c.dimension}: recorded {got} != recomputed {c.grade}")
        epochs = _obj(_obj(row.get("epochs")).get(c.dimension))
        for epoch, grade in c.epochs.items():
            cells += 1
            if epochs.get(str(epoch)) != grade:
                report.problems.append(
                    f"consensus: {c.task_id} {c.dimension} epoch {epoch}: "
                    f"recorded {epochs.get(str(epoch))} != recomputed {grade}"
                )
    voted = {c.task_id for c in results}
    for task_id in sorted(set(rows) - voted, key=str):
        report.problems.append(f"consensus: {RECORD_NAME} grades task {task_id}, which has no votes in the journal")
    report.checks["consensus_cells"] = cells


def _obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else empty: a tampered record must yield differences, not a crash."""
    return value if isinstance(value, dict) else {}


def _check_replay_and_coverage(entries: Sequence[Entry], tasks: Mapping[str, Task], report: AuditReport) -> None:
    """Replay every sample's SQL on the verified world, then recompute each graded sample's coverage from it.

    A logged row count or digest that differs is a replay problem; a journaled coverage that differs from the
    recomputed one is a coverage problem.
    """
    samples: dict[SampleKey, SampleFinished] = {}
    graded: dict[SampleKey, SampleGraded] = {}
    for e in entries:
        if isinstance(e, SampleFinished):
            samples.setdefault(e.output.key, e)
        elif isinstance(e, SampleGraded):
            graded.setdefault(e.key, e)
    try:
        snapshot = verify(world_dir()).snapshot
    except IspmError as exc:
        report.problems.append(f"replay: the world cannot be verified, so no query was replayed: {exc}")
        return
    compared = covered = 0
    with GradingContext(snapshot) as context:
        for key, finished in sorted(samples.items()):
            task_id, epoch = key.task_id, key.epoch
            replay = context.replayer.replay_sample(finished.output)
            for q in replay.queries:
                compared += q.log_match is not None
                if q.log_match is False:
                    report.problems.append(f"replay: {task_id} epoch {epoch}: {q.log_mismatch} ({_short_sql(q.sql)})")
            grade = graded.get(key)
            task = tasks.get(task_id)
            if grade is None or not grade.graded or task is None:
                continue
            covered += 1
            problem = _coverage_difference(context, task, [q.sql for q in replay.queries], grade)
            if problem:
                report.problems.append(f"coverage: {task_id} epoch {epoch}: {problem}")
    report.checks["replayed_queries"] = compared
    report.checks["coverage_samples"] = covered


def _coverage_difference(context: GradingContext, task: Task, agent_sql: list[str], grade: SampleGraded) -> str:
    """What differs between the journaled coverage of a graded sample and the one recomputed now; empty if none."""
    try:
        recomputed: CoverageReport | None = context.coverage(task.witness_sql, agent_sql)
        error = None
    except CoverageError as exc:
        recomputed, error = None, str(exc)
    if error != grade.coverage_error:
        return f"journaled coverage error {grade.coverage_error!r} != recomputed {error!r}"
    if recomputed is None or grade.coverage is None:
        return "" if recomputed == grade.coverage else "journaled no coverage, but it recomputes"
    theirs, ours = grade.coverage.model_dump(mode="json"), recomputed.model_dump(mode="json")
    fields = [k for k in ours if theirs.get(k) != ours[k]]
    return "; ".join(f"{k} journaled {_short(theirs.get(k))} != recomputed {_short(ours[k])}" for k in fields)


def _short_sql(sql: str) -> str:
    flat = " ".join(sql.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."


def _check_digests(
    entries: Sequence[Entry], starts: Sequence[RunStarted], recorded: dict[str, Any] | None, report: AuditReport
) -> None:
    """The world, task set, ground truth and rubrics now must hash to what the journal and the record pinned."""
    try:
        rubrics = load_rubrics()
        now = current_digests(rubrics).model_dump(mode="json")
    except IspmError as exc:
        report.problems.append(f"digests: cannot compute the current digests: {exc}")
        return
    pinned: list[tuple[str, Any]] = [(f"journal run_started #{i + 1}", s.digests) for i, s in enumerate(starts)]
    if recorded is not None:
        pinned.append((RECORD_NAME, recorded.get("digests")))
    compared = 0
    for where, digests in pinned:
        theirs = digests.model_dump(mode="json") if isinstance(digests, BaseModel) else digests
        if not isinstance(theirs, dict):
            report.problems.append(f"digests: {where} has no digests")
            continue
        for name, value in now.items():
            compared += 1
            if theirs.get(name) != value:
                report.problems.append(f"digests: {where} {name} {theirs.get(name)} != current {value}")
    shas = {d: r.sha256 for d, r in rubrics.rubrics.items()}
    for e in entries:
        if isinstance(e, SampleGraded):
            for v in e.votes:
                compared += 1
                if v.rubric_sha256 is not None and v.rubric_sha256 != shas.get(v.dimension):
                    report.problems.append(
                        f"digests: {v.task_id} epoch {v.epoch} {v.judge} {v.dimension}: "
                        f"rubric sha256 {v.rubric_sha256} is not the current {shas.get(v.dimension)}"
                    )
    report.checks["digests"] = compared
