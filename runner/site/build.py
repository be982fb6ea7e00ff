"""``ispm site build DIR``: the site as static files, with relative links, that opens from the file system.

The same renderers as the board's, with ``Links("static", depth)``: the task list holds every task and its filters
run in the browser (reading the address's query, as a board's would). Published runs come from run folders; each
one's ``report.html`` and its sample pages are copied under ``runs/<run id>/``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from runner.record.report import REPORT_NAME
from runner.record.store import load_records
from runner.site import render
from runner.site.links import DOWNLOADS_DIR, PAGES, Links
from runner.site.model import PublishedRun, SiteBuild, SiteSources
from runner.site.results import published_run, task_results
from runner.trace.sample_page import SAMPLES_DIR
from runner.world import MANIFEST_NAME, SNAPSHOT_NAME


def _write(path: Path, text: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    path.write_bytes(data)
    return len(data)


def build_site(
    sources: SiteSources, out: Path, runs: Sequence[PublishedRun] = (), reports: dict[str, Path] | None = None
) -> SiteBuild:
    """Write every page of the site under ``out``, the dataset's files and each run's report (``reports``, by run).

    ``out`` is written into, not cleared: pages are replaced, other files are left alone.

    Raises:
        OSError: ``out`` cannot be written.
    """
    started = time.perf_counter()
    reports = reports or {}
    results = task_results(runs)
    top, below = Links("static"), Links("static", depth=1)
    pages = {
        PAGES["contract"][1]: render.contract_page(sources, top),
        PAGES["tasks"][1]: render.tasks_page(sources, top, results, {}, runs=len(runs)),
        PAGES["dataset"][1]: render.dataset_page(sources, top),
        PAGES["leaderboard"][1]: render.leaderboard_page(sources, top, runs),
        PAGES["scoring"][1]: render.scoring_page(sources, top),
        PAGES["submit"][1]: render.submit_page(sources, top, None),
        PAGES["local"][1]: render.local_page(sources, top),
    }
    for task in sources.tasks:
        pages[f"tasks/{task.id}.html"] = render.task_page(sources, below, results, task.id)
    for table in sources.tables:
        pages[f"dataset/{table.name}.html"] = render.table_page(sources, below, table.name)
    written = sum(_write(out / name, html) for name, html in pages.items())
    files = out / "dataset" / DOWNLOADS_DIR
    files.mkdir(parents=True, exist_ok=True)
    for name in (SNAPSHOT_NAME, MANIFEST_NAME):
        shutil.copyfile(sources.world / name, files / name)
        written += (files / name).stat().st_size
    for run_id, report in reports.items():
        # The report and its sample pages, as they sit in the run folder, so the report's relative links hold.
        target = out / "runs" / run_id
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(report, target / REPORT_NAME)
        samples = report.parent / SAMPLES_DIR
        if samples.is_dir():
            shutil.copytree(samples, target / SAMPLES_DIR, dirs_exist_ok=True)
        written += sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    return SiteBuild(
        out=str(out), index=str(out / PAGES["contract"][1]), pages=len(pages), runs=len(runs), bytes=written,
        seconds=round(time.perf_counter() - started, 3),
    )  # fmt: skip


def published_from_folders(run_dirs: Sequence[Path]) -> tuple[list[PublishedRun], dict[str, Path]]:
    """Each run folder's record as a published run (labelled by its candidate or agent image), and its report.

    Raises:
        AnalyticsError: a folder has no readable record.
    """
    records = load_records(list(run_dirs))
    runs, reports = [], {}
    for folder, record in zip(run_dirs, records, strict=True):
        base = folder.parent if folder.is_file() else folder
        report = base / REPORT_NAME
        if report.is_file():
            reports[record.run_id] = report
        label = record.candidate_model or record.spec.agent_image
        runs.append(published_run(record, label=label, has_report=report.is_file()))
    return runs, reports


__all__ = ["SiteBuild", "build_site", "published_from_folders"]
