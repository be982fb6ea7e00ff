"""The published runs as every page shows them: each record read once, kept slim, in memory and on disk.

A published record never changes, but a full one holds every sample (megabytes for an official run), and no page
but the run's own report needs them. Each is read once and made a ``PublishedRun`` by the site's one rule
(``runner.site.results.published_run``: the record's summary and each task's consensus), kept in memory, and
written beside its bundle as ``<run folder>.entry.json``, so that the next board process reads the slim form at
once. The leaderboard, the task list, the task pages and the searches all read this one cache.
"""

from __future__ import annotations

import threading
from pathlib import Path

from pydantic import ValidationError

from runner import log
from runner.record.model import RunRecord
from runner.site.model import PublishedRun
from runner.site.results import published_run

ENTRY_SUFFIX = ".entry.json"

_log = log.get(__name__)


class PublishedRuns:
    """Published runs by run folder, kept in memory and beside each bundle in ``folder``."""

    def __init__(self, folder: Path) -> None:
        """Keep entry files in ``folder`` (the board's published bundles)."""
        self.folder = folder
        self._runs: dict[str, PublishedRun] = {}
        self._lock = threading.Lock()

    def read(self, run_dir: Path, *, label: str) -> PublishedRun | None:
        """The published run in ``run_dir``, labelled ``label``; ``None`` (logged) when its record is gone or
        damaged on disk, so that one broken folder does not take a page down."""
        key = str(run_dir)
        found = self._runs.get(key)
        if found is None:
            with self._lock:
                found = self._runs.get(key)
                if found is None:
                    try:
                        found = self._runs[key] = self._read(run_dir, label)
                    except (OSError, ValueError) as exc:
                        _log.warning("board.published_record_unreadable", run_dir=key, error=str(exc)[:500])
                        return None
        return found if found.label == label else found.model_copy(update={"label": label})

    def _read(self, run_dir: Path, label: str) -> PublishedRun:
        record_path = run_dir / "record.json"
        entry = self.folder / (run_dir.name + ENTRY_SUFFIX)
        if entry.is_file() and entry.stat().st_mtime >= record_path.stat().st_mtime:
            try:
                return PublishedRun.model_validate_json(entry.read_text(encoding="utf-8"))
            except ValidationError:
                pass  # an entry of an older board (a slim record): made again below
        record = RunRecord.model_validate_json(record_path.read_text(encoding="utf-8"))
        run = published_run(record, label=label, has_report=True)
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = entry.with_name(entry.name + ".partial")
        partial.write_text(run.model_dump_json(), encoding="utf-8")
        partial.replace(entry)
        return run
