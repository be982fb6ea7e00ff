"""The site's typed inputs and page models: what each page shows, before it is HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from runner.grading.grades import Dimension, Grade
from runner.record.model import RunRecord
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth
from runner.world.manifest import WorldManifest

SiteMode = Literal["server", "static"]
"""``server``: the board serves the pages at absolute paths; ``static``: files with relative links."""


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True, arbitrary_types_allowed=True)


# ------------------------------------------------------------------------------------------------ inputs
class ColumnSpec(_Model):
    """One column of a world table, as its spec declares it."""

    name: str
    """The column's name."""
    type: str
    """Its SQL type, with ``NOT NULL`` when it is required."""
    doc: str
    """What an analyst needs to know to use it (Markdown inline code allowed)."""


class TableSpec(_Model):
    """One world table: its spec, its manifest entry and its first rows."""

    name: str
    """The table's name."""
    vendor: str
    """The vendor prefix (``okta``, ``aws`` ...)."""
    doc: str
    """What the table holds."""
    rows: int
    """Row count, from the manifest."""
    digest: str
    """The table's logical digest, from the manifest."""
    primary_key: tuple[str, ...]
    """Its primary key's columns (may be empty)."""
    columns: tuple[ColumnSpec, ...]
    """Every column, in table order."""
    first_rows: tuple[tuple[str | int | float | None, ...], ...]
    """The first rows in rowid order (at most ``sources.FIRST_ROWS``)."""


class DocPage(_Model):
    """One agent-visible schema docs page."""

    name: str
    """Its file name under ``world/docs`` (``okta.md``)."""
    title: str
    """Its first heading."""
    markdown: str
    """Its text."""
    sha256: str
    """Its digest, from the manifest."""


class Download(_Model):
    """A file the dataset page offers, with its digest."""

    name: str
    """The file's name (``ispm-crossvendor-v1.sqlite``, ``manifest.json``)."""
    bytes: int
    """Its size."""
    sha256: str
    """sha256 of its bytes."""


class TaskGrades(_Model):
    """One task's consensus in one published run."""

    grades: dict[Dimension, Grade]
    """The consensus across epochs, per dimension."""
    strict_success: bool | None
    """Whether every non-abstaining dimension was correct."""


class PublishedRun(_Model):
    """One published run, as the site shows it: the record's summary and each task's consensus, no samples.

    Made by ``runner.site.results.published_run``: an official run's record holds every sample (megabytes), which
    no site page shows, so a board keeps this instead.
    """

    record: RunRecord
    """The run's record without its samples and per-task results (what the leaderboard ranks by)."""
    tasks: dict[str, TaskGrades]
    """Each graded task's consensus, by task id (empty for a run without a score)."""
    label: str
    """Who ran what: the submission's name and candidate, or the candidate model."""
    has_report: bool
    """Whether the site links the run's report page (``Links.run_report``)."""


class SiteSources(_Model):
    """Everything the pages are made of, read once (``runner.site.sources.load_sources``)."""

    world: Path
    """The world folder the snapshot, manifest and docs were read from (the downloads are served from it)."""
    tasks: tuple[Task, ...]
    """The task set, by id."""
    truth: dict[str, TaskTruth]
    """Each task's published ground truth."""
    truth_digest: str
    """The published ground truth's digest."""
    task_set_digest: str
    """The task-set digest the ground truth names."""
    manifest: WorldManifest
    """The world's manifest."""
    tables: tuple[TableSpec, ...]
    """Every table, in the docs' vendor order."""
    docs: tuple[DocPage, ...]
    """The schema docs, overview first."""
    downloads: tuple[Download, ...]
    """The snapshot and the manifest."""
    rubric_questions: dict[Dimension, tuple[str, str]]
    """Each dimension's rubric title and the question it asks, in the contract's order."""
    rubric_texts: dict[Dimension, str]
    """Each dimension's rubric as the judges read it (Markdown)."""
    rubric_versions: dict[Dimension, int]
    """Each rubric's version."""
    rubric_digest: str
    """The rubric set's digest."""
    scoring_markdown: str
    """``docs/scoring.md``."""


# ------------------------------------------------------------------------------------------------ tasks page
class TaskQuery(_Model):
    """The filters of ``/tasks``, as query parameters give them (each empty when not set)."""

    vendor: str = ""
    """A vendor the task touches."""
    kind: str = ""
    """``verdict`` or ``enumeration``."""
    category: str = ""
    """The task's category."""
    hops: str = ""
    """1, 2 or 3."""
    difficulty: str = ""
    """easy, medium, hard or expert."""
    trap: str = ""
    """A trap family the task sets, or ``none`` for tasks with no trap."""
    q: str = ""
    """Words that must all occur in the task's id, title or prompt (case-insensitive)."""


class TaskResultCell(_Model):
    """How one published run did on one task."""

    run_id: str
    """The run."""
    label: str
    """Who ran what."""
    has_report: bool
    """Whether the site links the run's report page."""
    grades: dict[Dimension, Grade]
    """The task's consensus grade per dimension in that run."""
    strict_success: bool | None
    """Whether every non-abstaining dimension was correct."""
    correctness: Grade | None
    """The ``answer_correctness`` consensus (``None`` when the run has no score)."""


class TaskRow(_Model):
    """One task in the list."""

    task: Task
    """The task."""
    results: tuple[TaskResultCell, ...]
    """How each published run did on it."""


class TaskListPage(_Model):
    """``/tasks``: the filtered task list."""

    query: TaskQuery
    """The filters as given."""
    rows: tuple[TaskRow, ...]
    """The tasks that pass every filter, by id."""
    total: int
    """Tasks in the set."""
    options: dict[str, tuple[str, ...]]
    """Each filter's possible values, for the form."""
    problems: tuple[str, ...]
    """Why the result is empty when a filter value names nothing (one line each)."""
    runs: int
    """Published runs the result columns summarise."""


# ------------------------------------------------------------------------------------------------ the site's edges
class BoardFacts(_Model):
    """What the submit page says about the board serving it (a static site has none)."""

    board_id: str
    """The board's id."""
    candidates: tuple[str, ...]
    """The candidate models it serves."""
    judges: tuple[str, ...]
    """Its two judges."""


class SiteBuild(_Model):
    """What ``ispm site build`` wrote."""

    out: str
    """The site's folder."""
    index: str
    """The page to open: the contract."""
    pages: int
    """HTML pages written."""
    runs: int
    """Published runs shown."""
    bytes: int
    """Bytes written, downloads and reports included."""
    seconds: float
    """Wall time of the build."""
