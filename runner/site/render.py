"""Every page of the site as HTML: pure functions of the sources, the published runs and the page's links.

The templates sit in ``templates/`` beside the report's (whose frame, look and autoescaping they share). Everything
a visitor, a submitter or an agent wrote reaches a page only through Jinja's autoescaping; the only markup inserted
unescaped is our own Markdown (the scoring page, the world's docs), rendered with raw HTML off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from jinja2 import ChoiceLoader, Environment, FileSystemLoader
from markdown_it import MarkdownIt
from markupsafe import Markup

from runner import __version__
from runner.contract import CLAUSES, CONTRACT_ID, CONTRACT_SUMMARY, RECORD_PARTS, REVISION_RULE, STRUCTURAL_COVERAGE
from runner.grading.grades import DIMENSIONS
from runner.prices import PRICES_LABEL
from runner.record.leaderboard import board_rows, cost_plot
from runner.record.report import TEMPLATES as REPORT_TEMPLATES
from runner.record.report import environment, render_markdown
from runner.site.errors import PageNotFound
from runner.site.filters import (
    AXES,
    MAX_QUERY_CHARS,
    filter_options,
    parse_query,
    search_text,
    select_tasks,
    unknown_values,
)
from runner.site.links import Links
from runner.site.model import BoardFacts, PublishedRun, SiteSources, TaskListPage, TaskResultCell, TaskRow
from runner.tasks.model import TRAP_FAMILIES
from runner.world.generate import VENDOR_PREFIXES

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_ECHO = 80
"""The most of a visitor's path a 404 page repeats."""
PageBuilder = Callable[[], str]
"""Renders one page when called."""
_INLINE = MarkdownIt("commonmark", {"html": False})
_TABLE_NAME = re.compile(r"\b([a-z]+_[a-z0-9_]+)\b")


def shown(value: str) -> str:
    """A visitor's value as a page may echo it: at most ``MAX_ECHO`` characters (escaping is the template's)."""
    return value if len(value) <= MAX_ECHO else value[:MAX_ECHO] + "…"


@lru_cache(maxsize=4096)
def inline_markdown(text: str) -> Markup:
    """One line of Markdown (code spans, emphasis), raw HTML escaped. Only our own definitions' text comes here
    (column and table docs): the cache is bounded by them, not by visitors."""
    return Markup(_INLINE.renderInline(text))


@lru_cache(maxsize=64)
def markdown(text: str) -> Markup:
    """A Markdown document (docs/scoring.md, a schema docs page), rendered once per text."""
    return render_markdown(text)


@cache
def site_environment() -> Environment:
    """The report's environment with the site's templates first, and the site's filters."""
    env = environment()
    env.loader = ChoiceLoader([FileSystemLoader(TEMPLATES), FileSystemLoader(REPORT_TEMPLATES)])
    env.filters["inline_md"] = inline_markdown
    env.filters["markdown"] = markdown
    env.globals.update(current="", crumbs=[], in_page_scoring=False, search_text=search_text, axes=AXES)
    return env


def _render(template: str, sources: SiteSources, links: Links, title: str, **values: Any) -> str:
    frame = {
        "links": links,
        "mode": links.mode,
        "title": title,
        "world_id": sources.manifest.dataset,
        "task_set_digest": sources.task_set_digest,
        "truth_digest": sources.truth_digest,
        "rubric_digest": sources.rubric_digest,
        "version": __version__,
    }
    return site_environment().get_template(template).render(**frame, **values)


def contract_page(sources: SiteSources, links: Links) -> str:
    """``/``: the clauses, the judged dimensions, structural coverage, the record's parts and the links to the parts."""
    dimensions = [
        (d, title, question, sources.rubric_versions[d], sources.rubric_texts[d])
        for d, (title, question) in sources.rubric_questions.items()
    ]
    return _render(
        "contract.html.j2", sources, links, "The contract", current="contract", contract_id=CONTRACT_ID,
        summary=CONTRACT_SUMMARY, revision_rule=REVISION_RULE, clauses=CLAUSES, dimensions=dimensions,
        coverage=STRUCTURAL_COVERAGE, record_parts=RECORD_PARTS, task_count=len(sources.tasks),
    )  # fmt: skip


def task_list(
    sources: SiteSources, results: Mapping[str, Sequence[TaskResultCell]], params: Mapping[str, str], runs: int
) -> TaskListPage:
    """The tasks that pass the filters in ``params``; none, with the reasons, when a value names nothing."""
    options = filter_options(sources.tasks)
    query, problems = parse_query(params)
    problems += unknown_values(query, options)
    chosen = [] if problems else select_tasks(sources.tasks, query)
    if not chosen and not problems:
        problems.append("no task passes every filter together")
    return TaskListPage(
        query=query,
        rows=tuple(TaskRow(task=t, results=tuple(results.get(t.id, ()))) for t in chosen),
        total=len(sources.tasks),
        options=options,
        problems=tuple(problems),
        runs=runs,
    )


def tasks_page(
    sources: SiteSources,
    links: Links,
    results: Mapping[str, Sequence[TaskResultCell]],
    params: Mapping[str, str],
    runs: int = 0,
) -> str:
    """``/tasks``: the filtered list (a static site passes no parameters and filters in the browser)."""
    page = task_list(sources, results, params, runs)
    return _render(
        "tasks.html.j2", sources, links, "Tasks", current="tasks", page=page, max_query=MAX_QUERY_CHARS,
        crumbs=[(links.page("contract"), "Contract")],
    )  # fmt: skip


def task_page(sources: SiteSources, links: Links, results: Mapping[str, Sequence[TaskResultCell]], task_id: str) -> str:
    """``/tasks/<id>``: one task, its traps, ground truth, witnesses, history and results.

    Raises:
        PageNotFound: no task has that id.
    """
    task = next((t for t in sources.tasks if t.id == task_id), None)
    if task is None:
        raise PageNotFound(f"There is no task {shown(task_id)!r} in the v1 task set.")
    return _render(
        "task.html.j2", sources, links, task.id, current="tasks", task=task, truth=sources.truth.get(task.id),
        results=results.get(task.id, ()), trap_families=TRAP_FAMILIES,
        crumbs=[(links.page("contract"), "Contract"), (links.page("tasks"), "Tasks")],
    )  # fmt: skip


def dataset_page(sources: SiteSources, links: Links) -> str:
    """``/dataset``: the manifest, every table, the files to download and the vendor docs."""
    return _render(
        "dataset.html.j2", sources, links, "Dataset", current="dataset", m=sources.manifest,
        tables=sources.tables, total_rows=sum(t.rows for t in sources.tables), vendors=list(VENDOR_PREFIXES.items()),
        downloads=sources.downloads, docs=sources.docs, crumbs=[(links.page("contract"), "Contract")],
    )  # fmt: skip


def table_page(sources: SiteSources, links: Links, name: str) -> str:
    """``/dataset/<table>``: its columns, its first rows, and the tasks whose witness reads it.

    Raises:
        PageNotFound: the world has no table of that name.
    """
    table = next((t for t in sources.tables if t.name == name), None)
    if table is None:
        raise PageNotFound(f"There is no table {shown(name)!r} in {sources.manifest.dataset}.")
    readers = [t for t in sources.tasks if name in _TABLE_NAME.findall(t.witness_sql)]
    return _render(
        "table.html.j2", sources, links, table.name, current="dataset", t=table, tasks=readers,
        vendor_name=VENDOR_PREFIXES[table.vendor],
        crumbs=[(links.page("contract"), "Contract"), (links.page("dataset"), "Dataset")],
    )  # fmt: skip


def scoring_page(sources: SiteSources, links: Links) -> str:
    """``/scoring``: docs/scoring.md, rendered."""
    return _render(
        "doc.html.j2", sources, links, "How a run becomes a score", current="scoring", source="docs/scoring.md",
        body=markdown(sources.scoring_markdown), crumbs=[(links.page("contract"), "Contract")],
    )  # fmt: skip


def submit_page(sources: SiteSources, links: Links, board: BoardFacts | None, board_url: str = "BOARD-URL") -> str:
    """``/submit``: how to get a token, and ``ispm submit`` (to ``board_url``, with the board's candidates)."""
    return _render(
        "submit.html.j2", sources, links, "Submit a run", current="submit", board=board, board_url=board_url,
        contract_id=CONTRACT_ID,
        crumbs=[(links.page("contract"), "Contract")],
    )  # fmt: skip


def local_page(sources: SiteSources, links: Links) -> str:
    """A static site's "Run it locally" (a board serves its own, with its binary and its key)."""
    return _render(
        "local.html.j2", sources, links, "Run it locally", current="local",
        crumbs=[(links.page("contract"), "Contract")],
    )  # fmt: skip


def leaderboard_page(
    sources: SiteSources, links: Links, runs: Sequence[PublishedRun], panel: Markup | None = None
) -> str:
    """``/leaderboard``: the record's leaderboard of ``runs`` in the site's frame, ``panel`` (the board's) on top."""
    rows = board_rows([(run.record, links.run_report(run.record.run_id) if run.has_report else None) for run in runs])
    return (
        site_environment()
        .get_template("site_leaderboard.html.j2")
        .render(
            rows=rows, dimensions=DIMENSIONS, prices=PRICES_LABEL, plot=cost_plot(rows),
            scoring=markdown(sources.scoring_markdown), links=links, panel=panel or Markup(""),
        )
    )  # fmt: skip


def not_found_page(sources: SiteSources, links: Links, message: str) -> str:
    """The 404 page, saying what was not found."""
    return _render("not_found.html.j2", sources, links, "Not found", message=message)
