"""A sample's own page: its timeline read as a conversation (docs/trace.md, "Reading a trace").

The run report links each sample to ``samples/<task>.e<epoch>.html`` beside it, and never inlines a transcript, so
the summary page stays the same size however long the conversations were. A page shows, in time order:

- each model call as a card: its tokens, time and how it ended; the messages the agent added (the task, tool
  results), by role; the reply, with its reasoning folded and its tool calls, SQL laid out as it ran (``sql_text``);
- the SQL the tool ran, from the host's query log, between the calls where it ran;
- the agent's own ``trace.jsonl`` entries, marked as reported by the agent (folded: Claude Code writes many);
- the answer, then the judges' calls (folded) and every vote with its rationale.

Long content is folded behind ``<details>``; content beyond :data:`MAX_SHOWN_CHARS` is cut with a count. Everything a
model or an agent wrote reaches the page through Jinja's autoescaping only: a reply carrying a script tag renders as
text. The page needs nothing from outside (inline CSS, no script), so it opens from the file system, and the board
serves the same files for published runs.

:func:`render_sample_page` is pure; :func:`write_sample_pages` is the edge that reads the run and writes the pages,
and :func:`write_report_and_pages` writes them and the report that links them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment

from runner import log
from runner.errors import IspmError
from runner.record.model import RunRecord
from runner.record.report import REPORT_NAME, environment, write_report
from runner.sample_key import SampleKey
from runner.tasks.catalog import catalog
from runner.tasks.model import Task
from runner.trace.sql_text import SqlLayout, sql_of_call
from runner.trace.text import PROVENANCE
from runner.trace.timeline import RunSamples, SampleTimeline, read_run, sample_timeline

_log = log.get(__name__)

SAMPLES_DIR = "samples"
"""The folder beside the report that holds the sample pages."""
FOLD_CHARS = 1_200
"""Text longer than this (or longer than :data:`FOLD_LINES` lines) is folded behind its first lines."""
FOLD_LINES = 16
MAX_SHOWN_CHARS = 100_000
"""Characters of one piece of content put on the page; the rest is counted, and ``ispm trace --json`` has it all."""
_PAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,150}\.e[0-9]{1,6}\.html")


@dataclass(frozen=True)
class Shown:
    """A piece of text as the page shows it: cut to a bound, and folded when long."""

    text: str
    """What is shown (at most :data:`MAX_SHOWN_CHARS` characters)."""
    head: str
    """The first lines, shown when folded."""
    folded: bool
    """Whether it is folded behind ``head``."""
    cut: int
    """Characters left out past the bound."""
    size: int
    """Characters in all."""


def shown(text: str) -> Shown:
    """``text`` bounded and, when long, folded behind its first lines."""
    kept = text[:MAX_SHOWN_CHARS]
    lines = kept.splitlines()
    folded = len(kept) > FOLD_CHARS or len(lines) > FOLD_LINES
    head = "\n".join(lines[:6])[:400] if folded else kept
    return Shown(text=kept, head=head, folded=folded, cut=len(text) - len(kept), size=len(text))


def page_name(key: SampleKey) -> str | None:
    """The file name of a sample's page, or ``None`` when its task id is unfit for one (a tampered journal)."""
    name = f"{key.label()}.html"
    return name if _PAGE_NAME.fullmatch(name) else None


def sample_page_path(run_dir: Path, name: str) -> Path | None:
    """The page ``name`` of the run in ``run_dir`` when it is a sample page's name and the file exists, else
    ``None``; what the board serves, so a request names no other file."""
    if not _PAGE_NAME.fullmatch(name):
        return None
    path = run_dir / SAMPLES_DIR / name
    return path if path.is_file() else None


def pretty_json(value: object) -> str:
    """A value as indented JSON (an agent's trace entry, a tool call's arguments)."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def render_sample_page(env: Environment, timeline: SampleTimeline, title: str) -> str:
    """The page of one sample's timeline; ``env`` is the report's Jinja environment (autoescaping on)."""
    layout = SqlLayout()
    return env.get_template("sample.html.j2").render(
        t=timeline,
        title=title,
        shown=shown,
        pretty_json=pretty_json,
        sql_of_call=sql_of_call,
        layout_sql=layout,
        provenance=PROVENANCE,
        report_href=f"../report.html#task-{timeline.task_id}",
    )


def write_sample_pages(
    env: Environment, run_dir: Path, out_dir: Path, titles: dict[str, str]
) -> tuple[dict[SampleKey, str], list[str]]:
    """Write the page of every sample of the run in ``run_dir`` into ``out_dir/samples/``.

    Returns each sample's page, relative to ``out_dir`` (what the report links), and a note for each sample that
    has no page. A run folder without a journal gets no pages (its report then links none).
    """
    try:
        run: RunSamples = read_run(run_dir)
    except IspmError as exc:
        return {}, [f"no sample pages: {exc}"]
    folder = out_dir / SAMPLES_DIR
    links: dict[SampleKey, str] = {}
    notes: list[str] = []
    for key in run.order:
        name = page_name(key)
        if name is None:
            notes.append(f"no page for a sample whose task id is unfit for a file name: {key.task_id!r}")
            continue
        timeline = sample_timeline(run_dir, run, key)
        page = render_sample_page(env, timeline, titles.get(key.task_id, ""))
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / name
        scratch = target.with_name(target.name + ".tmp")
        scratch.write_text(page, encoding="utf-8")
        os.replace(scratch, target)
        links[key] = f"{SAMPLES_DIR}/{name}"
    return links, notes


def write_report_and_pages(
    run_dir: Path, record: RunRecord | None = None, out: Path | None = None, tasks: Sequence[Task] | None = None
) -> Path:
    """Write each sample's page into ``samples/`` beside the report, then the report of the run in ``run_dir``
    (``report.html`` beside ``record.json`` by default) linking them; return the report's path.

    ``record`` and ``tasks`` save re-reading ``record.json`` and the task set when the caller just did.

    Raises:
        RunError: ``record.json`` is missing or unreadable.
    """
    task_set = tasks if tasks is not None else catalog().tasks
    target = out or run_dir / REPORT_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    links, notes = write_sample_pages(environment(), run_dir, target.parent, {t.id: t.title for t in task_set})
    for note in notes:
        _log.warning("report.sample_page_skipped", reason=note)
    return write_report(run_dir, record, target, task_set, sample_links=links)
