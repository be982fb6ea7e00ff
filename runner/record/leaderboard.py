"""The leaderboard: one self-contained static HTML page ranking runs by their records.

A run is ranked by its ``answer_correctness`` mean (then strict success) only when it has a score, is not a
harness calibration and is healthy. Every other run is still listed, unranked, with the reason
(``runner.record.standing``): a timed-out or stopped run has no score at all (docs/scoring.md, 8), a calibration run
measures the harness, never a model, and a run whose judges or candidate failed over the health threshold has a
score nobody should trust.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from runner.grading.grades import DIMENSIONS, Dimension
from runner.paths import scoring_doc
from runner.prices import PRICES_LABEL, Cost
from runner.record.cost import run_cost
from runner.record.model import RunRecord
from runner.record.report import REPORT_NAME, RunClass, environment, highest_pass_k, render_markdown, run_class
from runner.record.standing import unranked_reason
from runner.record.store import load_records

LEADERBOARD_NAME = "leaderboard.html"


@dataclass(frozen=True)
class BoardRow:
    """One run on the board."""

    rank: int | None
    """1 is best; ``None`` for a run that is listed but not ranked."""
    record: RunRecord
    run_class: RunClass
    unranked_reason: str | None
    correctness: float | None
    correctness_ci: tuple[float, float] | None
    strict: float | None
    strict_ci: tuple[float, float] | None
    pass_k: tuple[int, float] | None
    """The pass^k with the largest k the run has (pass^5 on a five-epoch run)."""
    dimensions: dict[Dimension, float | None]
    tasks_graded: int | None
    """Tasks with a real ``answer_correctness`` consensus."""
    date: str
    report_href: str | None
    """A relative link to the run's own report page, when it has one."""
    cost: Cost
    """The run's dollars, derived from its tokens (:mod:`runner.record.cost`)."""


def board_rows(entries: Sequence[tuple[RunRecord, str | None]]) -> list[BoardRow]:
    """The board: ranked runs best first (ties share a rank), then the unranked ones by run id.

    ``entries`` pairs each record with a link to its report page (or ``None``).
    """
    rows = [_row(record, href) for record, href in entries]
    ranked = sorted((r for r in rows if r.unranked_reason is None), key=lambda r: (-_key(r)[0], -_key(r)[1], _id(r)))
    placed = []
    for r in ranked:
        better = sum(_key(o) > _key(r) for o in ranked)
        placed.append(replace(r, rank=better + 1))
    unranked = sorted((r for r in rows if r.unranked_reason is not None), key=_id)
    return placed + unranked


def _key(row: BoardRow) -> tuple[float, float]:
    return (row.correctness or 0.0, row.strict if row.strict is not None else -1.0)


def _id(row: BoardRow) -> str:
    return row.record.run_id


def _row(record: RunRecord, href: str | None) -> BoardRow:
    scores = record.scores
    rel = scores.reliability if scores else None
    correctness = scores.dimensions.get("answer_correctness") if scores else None
    return BoardRow(
        rank=None,
        record=record,
        run_class=run_class(record),
        unranked_reason=unranked_reason(record),
        correctness=correctness.mean if correctness else None,
        correctness_ci=rel.ci.get("answer_correctness") if rel else None,
        strict=scores.strict_success_rate if scores else None,
        strict_ci=rel.strict_success_ci if rel else None,
        pass_k=highest_pass_k(scores.pass_hat_k) if scores else None,
        dimensions={d: s.mean for d, s in scores.dimensions.items()} if scores else {},
        tasks_graded=correctness.graded if correctness else None,
        date=record.started_at[:10],
        report_href=href,
        cost=run_cost(record).total,
    )


@dataclass(frozen=True)
class PlotPoint:
    """One ranked run on the cost plot."""

    run_id: str
    usd: float
    correctness: float
    x: float
    y: float
    frontier: bool
    """On the Pareto frontier: no cheaper run (or as cheap) is as correct."""


@dataclass(frozen=True)
class CostPlot:
    """answer_correctness against dollars (log scale) for the ranked, fully priced runs, with the Pareto frontier."""

    width: int
    height: int
    left: int
    top: int
    plot_width: int
    plot_height: int
    points: list[PlotPoint]
    frontier: str
    """The frontier's points as an SVG ``points`` list, cheapest first."""
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    unpriced: list[str]
    """Ranked runs not plotted because some of their tokens have no price: listed under the plot."""


def pareto_frontier(runs: Sequence[tuple[str, float, float]]) -> set[str]:
    """The run ids (of ``(run_id, usd, correctness)``) that no cheaper-or-equal run matches or beats in correctness."""
    best, found = float("-inf"), set()
    for run_id, _usd, correctness in sorted(runs, key=lambda r: (r[1], -r[2], r[0])):
        if correctness > best:
            found.add(run_id)
            best = correctness
    return found


def cost_plot(rows: Sequence[BoardRow], *, width: int = 640, height: int = 320) -> CostPlot | None:
    """The plot of the ranked rows; ``None`` when no row is ranked."""
    ranked = [r for r in rows if r.rank is not None and r.correctness is not None]
    if not ranked:
        return None
    priced = [(r.record.run_id, r.cost.usd, r.correctness) for r in ranked if r.cost.complete and (r.cost.usd or 0) > 0]
    runs = [(run_id, usd, c) for run_id, usd, c in priced if usd is not None and c is not None]
    unpriced = [r.record.run_id for r in ranked if r.record.run_id not in {run_id for run_id, _, _ in runs}]
    left, top, right, bottom = 56, 16, 16, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    low = math.floor(math.log10(min((u for _, u, _ in runs), default=0.01)))
    high = math.ceil(math.log10(max((u for _, u, _ in runs), default=1.0)))
    high = max(high, low + 1)

    def place(usd: float, correctness: float) -> tuple[float, float]:
        x = left + (math.log10(usd) - low) / (high - low) * plot_w
        return round(x, 1), round(top + (1 - correctness) * plot_h, 1)

    on_frontier = pareto_frontier(runs)
    points = [
        PlotPoint(run_id, usd, c, *place(usd, c), frontier=run_id in on_frontier)
        for run_id, usd, c in sorted(runs, key=lambda r: (r[1], -r[2], r[0]))
    ]
    frontier = " ".join(f"{p.x},{p.y}" for p in points if p.frontier)
    x_ticks = [(place(10.0**e, 0)[0], f"${10.0**e:g}") for e in range(low, high + 1)]
    y_ticks = [(place(10.0**low, c)[1], f"{c:g}") for c in (0.0, 0.25, 0.5, 0.75, 1.0)]
    return CostPlot(width, height, left, top, plot_w, plot_h, points, frontier, x_ticks, y_ticks, unpriced)


def render_leaderboard(rows: Sequence[BoardRow], scoring_markdown: str) -> str:
    """The leaderboard page of ``rows`` (from :func:`board_rows`) as one HTML string."""
    return (
        environment()
        .get_template("leaderboard.html.j2")
        .render(
            rows=rows,
            dimensions=DIMENSIONS,
            scoring=render_markdown(scoring_markdown),
            prices=PRICES_LABEL,
            plot=cost_plot(rows),
        )
    )


def write_leaderboard(run_dirs: Sequence[Path], out: Path) -> tuple[Path, list[BoardRow]]:
    """Read each run's record (a run folder or a ``record.json``), write the board to ``out``; return it and its rows.

    Raises:
        AnalyticsError: a folder has no readable record.
    """
    records = load_records(run_dirs)
    entries = []
    for run_dir, record in zip(run_dirs, records, strict=True):
        folder = run_dir.parent if run_dir.is_file() else run_dir
        page = folder / REPORT_NAME
        href = quote(Path(os.path.relpath(page.resolve(), out.resolve().parent)).as_posix()) if page.is_file() else None
        entries.append((record, href))
    rows = board_rows(entries)
    html = render_leaderboard(rows, scoring_doc().read_text(encoding="utf-8"))
    out.parent.mkdir(parents=True, exist_ok=True)
    scratch = out.with_name(out.name + ".tmp")
    scratch.write_text(html, encoding="utf-8")
    os.replace(scratch, out)
    return out, rows
