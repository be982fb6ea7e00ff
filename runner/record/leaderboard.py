"""The leaderboard: one self-contained static HTML page ranking runs by their records.

A run is ranked by its ``answer_correctness`` mean (then strict success) only when it has a score, is not a
harness calibration and is healthy. Every other run is still listed, unranked, with the reason
(``runner.record.standing``): a timed-out or stopped run has no score at all (docs/scoring.md, 8), a calibration run
measures the harness, never a model, and a run whose judges or candidate failed over the health threshold has a
score nobody should trust.
"""

from __future__ import annotations

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


def render_leaderboard(rows: Sequence[BoardRow], scoring_markdown: str) -> str:
    """The leaderboard page of ``rows`` (from :func:`board_rows`) as one HTML string."""
    return (
        environment()
        .get_template("leaderboard.html.j2")
        .render(rows=rows, dimensions=DIMENSIONS, scoring=render_markdown(scoring_markdown), prices=PRICES_LABEL)
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
