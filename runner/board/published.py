"""The published runs as the leaderboard shows them: each record read once and kept slim.

A published record never changes, but a full one holds every sample (megabytes for an official run), and the
leaderboard needs only its summary. Each is read once, stripped of its samples and per-task results, kept in
memory, and written beside its bundle as ``<run id>.entry.json`` so that the next board process reads the slim
form at once.
"""

from __future__ import annotations

import threading
from pathlib import Path

from runner.record.model import RunRecord

ENTRY_SUFFIX = ".entry.json"


def slim(record: RunRecord) -> RunRecord:
    """``record`` without what only its own report shows: samples, per-task results and breakdowns."""
    scores = record.scores.model_copy(update={"tasks": [], "breakdowns": {}}) if record.scores else None
    return record.model_copy(update={"samples": [], "scores": scores})


class PublishedRecords:
    """Slim records of published runs by run id, kept in memory and beside each bundle in ``folder``."""

    def __init__(self, folder: Path) -> None:
        """Keep entry files in ``folder`` (the board's published bundles)."""
        self.folder = folder
        self._records: dict[str, RunRecord] = {}
        self._lock = threading.Lock()

    def get(self, run_dir: Path) -> RunRecord:
        """The slim record of the published run in ``run_dir``."""
        key = str(run_dir)
        found = self._records.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._records.get(key)
            if found is None:
                found = self._read(run_dir)
                self._records[key] = found
        return found

    def _read(self, run_dir: Path) -> RunRecord:
        record_path = run_dir / "record.json"
        entry = self.folder / (run_dir.name + ENTRY_SUFFIX)
        if entry.is_file() and entry.stat().st_mtime >= record_path.stat().st_mtime:
            return RunRecord.model_validate_json(entry.read_text(encoding="utf-8"))
        record = slim(RunRecord.model_validate_json(record_path.read_text(encoding="utf-8")))
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = entry.with_name(entry.name + ".partial")
        partial.write_text(record.model_dump_json(), encoding="utf-8")
        partial.replace(entry)
        return record
