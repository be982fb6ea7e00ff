"""The run report: one self-contained static HTML page per run, built from its record and nothing else live.

Everything the page shows comes from ``record.json`` (plus each task's title and labels from the task set, and
``docs/scoring.md``, which every report embeds so "How a run becomes a score" is one click away, offline). The page
has no external URL: CSS and a little vanilla JavaScript are inline and the charts are SVG drawn here, server-side.

Everything an agent or a judge wrote (answers, SQL, rationales, error text) is hostile. It reaches the page only
through Jinja's autoescaping; the only markup inserted unescaped is our own scoring page, rendered with raw HTML off.

The functions here are pure (record in, view or HTML out) except :func:`write_report`, the edge that reads the
run folder and writes ``report.html`` beside ``record.json``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

from jinja2 import BytecodeCache, Environment, FileSystemBytecodeCache, FileSystemLoader, StrictUndefined
from markdown_it import MarkdownIt
from markupsafe import Markup

from runner.grading.coverage import CoverageReport, JoinEdge
from runner.grading.grades import DIMENSIONS, Dimension, Grade
from runner.grading.model import JudgeVote
from runner.paths import cache_dir, scoring_doc
from runner.prices import Cost, usd_text
from runner.record.build import load_record
from runner.record.cost import RunCost, run_cost
from runner.record.model import FAILURE_KINDS, RunRecord, SampleRecord, TokenCount
from runner.record.standing import no_score_reason, unranked_reason
from runner.sample_key import SampleKey
from runner.tasks.catalog import catalog
from runner.tasks.model import Task

REPORT_NAME = "report.html"
SCORING_ANCHOR = "scoring"
"""The id of the embedded "How a run becomes a score" section; every page links to it."""
TEMPLATES = Path(__file__).resolve().parent / "templates"

# Short column heads for the six dimensions; the full id is in each cell's title.
DIMENSION_LABELS: dict[Dimension, str] = {
    "answer_correctness": "correctness",
    "answer_verdict": "verdict",
    "evidence_completeness": "evidence",
    "contextual_evidence_relevancy": "relevancy",
    "reasoning_utility": "reasoning",
    "sql_semantic_appropriateness": "SQL",
}
RunClass = Literal["official", "non-official", "calibration"]
# markdown-it logs every rule it tries at DEBUG: hundreds of lines per page that would flood a run's log.jsonl.
logging.getLogger("markdown_it").setLevel(logging.WARNING)
FILTER_AXES = ("vendor", "kind", "category", "hops")
PHASES = ("create", "start", "agent", "collect", "remove", "grade")
_V = TypeVar("_V")


def in_contract_order(by_dimension: Mapping[Dimension, _V]) -> list[tuple[Dimension, _V]]:
    """The entries of a per-dimension mapping in the contract's order.

    A record read back from ``record.json`` has its keys sorted, one built in memory has them in build order: the
    page must not depend on which it was given.
    """
    return [(d, by_dimension[d]) for d in DIMENSIONS if d in by_dimension]


# ----------------------------------------------------------------------------------------------- charts
@dataclass(frozen=True)
class Bar:
    """One bar of a chart: a value in [0, 1], optionally with a confidence interval."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""
    """Shown after the value, e.g. how many tasks the value rests on."""


@dataclass(frozen=True)
class PlacedBar:
    """A bar with its pixel geometry, ready for the SVG template."""

    label: str
    text: str
    y: float
    width: float
    whisker: tuple[float, float] | None


@dataclass(frozen=True)
class Chart:
    """A horizontal bar chart on the fixed scale 0..1 (every number charted here is a mean score or a rate)."""

    title: str
    width: int
    height: int
    plot_left: int
    plot_width: int
    row_height: int
    top: int
    bars: list[PlacedBar]
    ticks: list[tuple[float, str]]


def bar_chart(title: str, bars: Sequence[Bar], *, label_width: int = 250, plot_width: int = 380) -> Chart:
    """Lay out ``bars`` as a horizontal bar chart; a bar without a value is drawn empty and labelled ``n/a``."""
    row, top = 28, 22
    placed = []
    for i, bar in enumerate(bars):
        whisker = None
        if bar.low is not None and bar.high is not None:
            whisker = (label_width + bar.low * plot_width, label_width + bar.high * plot_width)
        text = fmt(bar.value)
        if bar.low is not None and bar.high is not None:
            text += f" [{fmt(bar.low)}, {fmt(bar.high)}]"
        if bar.note:
            text += f"  {bar.note}"
        placed.append(
            PlacedBar(
                label=bar.label,
                text=text,
                y=top + i * row,
                width=0.0 if bar.value is None else bar.value * plot_width,
                whisker=whisker,
            )
        )
    ticks = [(label_width + t * plot_width, f"{t:g}") for t in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return Chart(
        title=title,
        width=label_width + plot_width + 190,
        height=top + max(1, len(bars)) * row + 20,
        plot_left=label_width,
        plot_width=plot_width,
        row_height=row,
        top=top,
        bars=placed,
        ticks=ticks,
    )


def run_charts(record: RunRecord) -> list[Chart]:
    """The report's charts: each dimension's mean with its bootstrap 95% CI, correctness by vendor, and pass^k.

    A run without a score has no charts.
    """
    scores = record.scores
    if scores is None:
        return []
    cis = scores.reliability.ci if scores.reliability else {}
    dims = []
    for d, s in in_contract_order(scores.dimensions):
        ci = cis.get(d)
        dims.append(Bar(d, s.mean, ci[0] if ci else None, ci[1] if ci else None))
    vendors = [
        Bar(vendor, s.mean, note=f"({s.graded} tasks)") for vendor, s in scores.breakdowns.get("vendor", {}).items()
    ]
    passes = [Bar(f"pass^{k}", v) for k, v in sorted(scores.pass_hat_k.items())]
    charts = [bar_chart("Mean consensus score per dimension, with bootstrap 95% CI", dims)]
    if vendors:
        charts.append(bar_chart("answer_correctness by vendor (a task counts for each vendor it touches)", vendors))
    charts.append(bar_chart(f"pass^k on answer_correctness ({record.spec.epochs} epochs run)", passes))
    return charts


# ----------------------------------------------------------------------------------------------- standing
def run_class(record: RunRecord) -> RunClass:
    """Whether the run is official, a harness calibration, or an ordinary non-official run."""
    if record.calibration is not None:
        return "calibration"
    return "official" if record.official else "non-official"


def calibration_notice(record: RunRecord) -> str | None:
    """The loud warning a calibration run carries: it measures the harness, never a model."""
    if record.calibration is None:
        return None
    expected = "1.0" if record.calibration == "replay" else "0.0"
    return (
        f"Harness calibration ({record.calibration} agent, reference judge): NOT a model score. "
        f"It checks the harness itself; answer_correctness must be {expected}."
    )


# ----------------------------------------------------------------------------------------------- summary
@dataclass(frozen=True)
class DimensionRow:
    """One dimension's aggregate line in the summary table."""

    dimension: Dimension
    mean: float | None
    ci: tuple[float, float] | None
    graded: int
    abstained: int
    agreement: float | None
    alpha: float | None
    kappa: float | None
    pairs: int | None
    abstention: float | None


def dimension_rows(record: RunRecord) -> list[DimensionRow]:
    """Each scored dimension's mean, CI, agreement, inter-judge statistics and abstention rate."""
    scores = record.scores
    if scores is None:
        return []
    rel = scores.reliability
    rows = []
    for d, s in in_contract_order(scores.dimensions):
        inter = rel.inter_judge.get(d) if rel else None
        rows.append(
            DimensionRow(
                dimension=d,
                mean=s.mean,
                ci=rel.ci.get(d) if rel else None,
                graded=s.graded,
                abstained=s.abstained,
                agreement=rel.agreement.get(d) if rel else None,
                alpha=inter.alpha if inter else None,
                kappa=inter.kappa if inter else None,
                pairs=inter.pairs if inter else None,
                abstention=record.abstention_rates.get(d),
            )
        )
    return rows


@dataclass(frozen=True)
class TokenRow:
    """Requests, tokens and dollars of one party: the agent or one judge slot."""

    party: str
    count: TokenCount
    cost: Cost


def token_rows(record: RunRecord, cost: RunCost) -> tuple[TokenRow | None, list[TokenRow]]:
    """The agent's totals (``None`` without a gateway) and each judge slot's, kept apart, each with its dollars."""
    agent = TokenRow("agent", record.agent_tokens, cost.agent_cost) if record.agent_tokens is not None else None
    slots = [j for j in record.spec.judges if j in record.judge_tokens]
    slots += sorted(set(record.judge_tokens) - set(slots))
    judge_cost = {j.party: j.cost for j in cost.judges}
    return agent, [TokenRow(j, record.judge_tokens[j], judge_cost[j]) for j in slots]


def phase_times(record: RunRecord) -> list[tuple[str, float]]:
    """Summed wall time per phase, in the order a sample goes through them."""
    known = [(p, record.phases_s[p]) for p in PHASES if p in record.phases_s]
    return known + sorted((p, t) for p, t in record.phases_s.items() if p not in PHASES)


def failure_counts(record: RunRecord) -> list[tuple[str, int]]:
    """Every failure kind of the taxonomy with its count, zeros included, in the taxonomy's order."""
    known = [(kind, record.failures.get(kind, 0)) for kind in FAILURE_KINDS]
    extra = [(kind, n) for kind, n in sorted(record.failures.items()) if kind not in FAILURE_KINDS]
    return known + extra


def highest_pass_k(pass_hat_k: Mapping[int, float | None]) -> tuple[int, float] | None:
    """The pass^k with the largest k that has a value (pass^5 on a five-epoch run)."""
    defined = [(k, v) for k, v in pass_hat_k.items() if v is not None]
    return max(defined) if defined else None


# ----------------------------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class VoteLine:
    """One dimension in one epoch: each judge slot's vote (``None`` when that slot cast none) and the consensus."""

    dimension: Dimension
    votes: list[JudgeVote | None]
    consensus: Grade | None


@dataclass(frozen=True)
class SampleView:
    """One epoch of one task, as the task's expanded grid shows it."""

    epoch: int
    sample: SampleRecord
    lines: list[VoteLine]


@dataclass(frozen=True)
class TaskRow:
    """One task of the run: its labels, consensus grades and every epoch behind them."""

    task_id: str
    title: str
    kind: str
    category: str
    vendors: list[str]
    hops: int
    difficulty: str
    grades: dict[Dimension, Grade]
    strict_success: bool | None
    samples: list[SampleView] = field(default_factory=list)

    def filter_value(self, axis: str) -> str:
        """The space-separated values of one filter axis, as the page's ``data-*`` attribute holds them."""
        if axis == "vendor":
            return " ".join(self.vendors)
        return str(getattr(self, axis))


def planned_task_ids(record: RunRecord, tasks: Iterable[Task]) -> list[str]:
    """The tasks the run planned: its filter, or the whole task set."""
    return sorted(record.spec.tasks) if record.spec.tasks is not None else sorted(t.id for t in tasks)


def task_rows(record: RunRecord, tasks: Iterable[Task]) -> list[TaskRow]:
    """One row per planned task, with each epoch's votes laid out as dimensions × judge slots.

    Labels come from the task set; consensus grades from the record (none when the run has no score).
    """
    by_id = {t.id: t for t in tasks}
    results = {r.task_id: r for r in record.scores.tasks} if record.scores else {}
    samples: dict[str, list[SampleRecord]] = {}
    for s in record.samples:
        samples.setdefault(s.task_id, []).append(s)
    rows = []
    for task_id in planned_task_ids(record, by_id.values()):
        task, result = by_id.get(task_id), results.get(task_id)
        views = [
            _sample_view(s, record.spec.judges, result.epochs if result else {})
            for s in sorted(samples.get(task_id, []), key=lambda s: s.epoch)
        ]
        rows.append(
            TaskRow(
                task_id=task_id,
                title=task.title if task else "",
                kind=task.kind if task else (result.kind if result else "?"),
                category=task.category if task else (result.category if result else "?"),
                vendors=list(task.vendors) if task else (list(result.vendors) if result else []),
                hops=task.hops if task else (result.hops if result else 0),
                difficulty=task.difficulty if task else "",
                grades=dict(result.grades) if result else {},
                strict_success=result.strict_success if result else None,
                samples=views,
            )
        )
    return rows


def _sample_view(
    sample: SampleRecord, judges: Sequence[str], epochs: Mapping[Dimension, Mapping[int, Grade]]
) -> SampleView:
    by_slot = {(v.judge, v.dimension): v for v in sample.votes}
    dims = [d for d in DIMENSIONS if any((j, d) in by_slot for j in judges) or d in epochs]
    lines = [VoteLine(d, [by_slot.get((j, d)) for j in judges], epochs.get(d, {}).get(sample.epoch)) for d in dims]
    return SampleView(epoch=sample.epoch, sample=sample, lines=lines)


def filter_options(rows: Sequence[TaskRow]) -> dict[str, list[str]]:
    """The distinct values of each filter axis over ``rows``, sorted (hops numerically)."""
    options: dict[str, set[str]] = {axis: set() for axis in FILTER_AXES}
    for row in rows:
        for axis in FILTER_AXES:
            options[axis].update(row.filter_value(axis).split())
    # Hops are numbers: sort "10" after "9".
    return {
        axis: sorted(values, key=lambda v: (len(v), v)) if axis == "hops" else sorted(values)
        for axis, values in options.items()
    }


def join_text(edge: JoinEdge) -> str:
    """A join edge as ``table.column = table.column``."""
    (lt, lc), (rt, rc) = edge
    return f"{lt}.{lc} = {rt}.{rc}"


@dataclass(frozen=True)
class CoverageView:
    """A sample's structural coverage, with what the agent missed spelled out."""

    report: CoverageReport
    missing_tables: list[str]
    joins: list[tuple[str, bool]]
    """Each witness join edge and whether the agent's SQL touched it."""
    extra_joins: list[str]


def coverage_view(report: CoverageReport) -> CoverageView:
    """Which witness tables and joins the agent's SQL touched, and which it did not."""
    agent_joins = set(report.agent_joins)
    witness_joins = set(report.witness_joins)
    return CoverageView(
        report=report,
        missing_tables=sorted(set(report.witness_tables) - set(report.agent_tables)),
        joins=[(join_text(e), e in agent_joins) for e in report.witness_joins],
        extra_joins=[join_text(e) for e in report.agent_joins if e not in witness_joins],
    )


def failed_samples(record: RunRecord) -> list[SampleRecord]:
    """Every sample whose status is not ``ok``, in task then epoch order."""
    return sorted((s for s in record.samples if s.status != "ok"), key=lambda s: s.key)


def limited_samples(record: RunRecord) -> list[SampleRecord]:
    """Every sample that reached a sandbox limit (pids, memory, ``/output``), whatever its status."""
    return sorted((s for s in record.samples if s.limits_reached), key=lambda s: s.key)


# ----------------------------------------------------------------------------------------------- rendering
def fmt(value: float | None, digits: int = 3) -> str:
    """A number for the page; ``n/a`` for an undefined statistic."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def fmt_ci(ci: tuple[float, float] | None) -> str:
    """A confidence interval as ``[low, high]``; ``n/a`` when undefined."""
    return "n/a" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def render_markdown(text: str) -> Markup:
    """CommonMark with tables; raw HTML in the source is escaped, not passed through."""
    return Markup(MarkdownIt("commonmark", {"html": False}).enable("table").render(text))


def compiled_templates() -> BytecodeCache | None:
    """Where the templates' compiled code is kept between processes (Jinja checks each against its source), so a
    run's report does not compile them again, about 0.2 s of every run's end; ``None`` where the cache folder
    cannot be written (a read-only install), and they are compiled as before."""
    folder = cache_dir() / "templates"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return FileSystemBytecodeCache(str(folder)) if os.access(folder, os.W_OK) else None


def environment() -> Environment:
    """The Jinja environment of the report templates: autoescaping always on, undefined names are errors."""
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        bytecode_cache=compiled_templates(),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = fmt
    env.filters["usd"] = usd_text
    env.filters["ci"] = fmt_ci
    env.globals.update(
        DIMENSION_LABELS=DIMENSION_LABELS,
        DIMENSIONS=DIMENSIONS,
        SCORING_ANCHOR=SCORING_ANCHOR,
        FILTER_AXES=FILTER_AXES,
        coverage_view=coverage_view,
    )
    return env


def render_report(
    record: RunRecord,
    tasks: Iterable[Task],
    scoring_markdown: str,
    sample_links: Mapping[SampleKey, str] | None = None,
) -> str:
    """The whole report page of ``record`` as one HTML string; ``sample_links`` gives each sample's own page (by
    task and epoch, relative to the report), which the page links to and never inlines."""
    rows = task_rows(record, tasks)
    cost = run_cost(record)
    agent_tokens, judge_tokens = token_rows(record, cost)
    scores = record.scores
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            record=record,
            run_class=run_class(record),
            calibration=calibration_notice(record),
            no_score=no_score_reason(record),
            health=record.health,
            unranked=unranked_reason(record),
            dimensions=dimension_rows(record),
            strict=(scores.strict_success_rate, scores.reliability.strict_success_ci if scores.reliability else None)
            if scores
            else None,
            pass_hat_k=sorted(scores.pass_hat_k.items()) if scores else [],
            abstention_rates=in_contract_order(record.abstention_rates),
            abstention_by_judge=scores.reliability.abstention_by_judge if scores and scores.reliability else {},
            agent_tokens=agent_tokens,
            judge_tokens=judge_tokens,
            cost=cost,
            task_costs={t.task_id: t for t in cost.tasks},
            sample_costs={c.key: c for c in cost.samples},
            failures=failure_counts(record),
            phases=phase_times(record),
            failed=failed_samples(record),
            limited=limited_samples(record),
            charts=run_charts(record),
            rows=rows,
            options=filter_options(rows),
            scoring=render_markdown(scoring_markdown),
            sample_links=sample_links or {},
        )
    )


def write_report(
    run_dir: Path,
    record: RunRecord | None = None,
    out: Path | None = None,
    tasks: Sequence[Task] | None = None,
    sample_links: Mapping[SampleKey, str] | None = None,
) -> Path:
    """Write the report of the run in ``run_dir`` (``report.html`` beside ``record.json`` by default), linking each
    sample to its page as ``sample_links`` says (:func:`runner.trace.sample_page.write_report_and_pages` writes the
    pages, then this).

    ``record`` and ``tasks`` save re-reading ``record.json`` and the task set when the caller just did.

    Raises:
        RunError: ``record.json`` is missing or unreadable.
    """
    record = record or load_record(run_dir)
    task_set = tasks if tasks is not None else catalog().tasks
    target = out or run_dir / REPORT_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    page = render_report(record, task_set, scoring_doc().read_text(encoding="utf-8"), sample_links or {})
    scratch = target.with_name(target.name + ".tmp")
    scratch.write_text(page, encoding="utf-8")
    os.replace(scratch, target)  # a reader never sees half a page
    return target
