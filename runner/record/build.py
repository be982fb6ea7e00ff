"""Build the run record from a run's journal, and nothing else, so an auditor can recompute it."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable, Sequence
from math import comb
from pathlib import Path

from runner.grading.consensus import Consensus, consensus
from runner.grading.grades import ABSTAIN, DIMENSIONS, Dimension, Grade, Vote, score
from runner.grading.model import JudgeVote
from runner.record import stats
from runner.record.health import run_health
from runner.record.model import (
    FAILURE_KINDS,
    RECORD_NAME,
    DimensionScore,
    InterJudge,
    LeftOutNode,
    RecordedCall,
    Reliability,
    RunRecord,
    RunStatus,
    SampleRecord,
    Scores,
    TaskResult,
    TokenCount,
)
from runner.record.standing import unranked_reason
from runner.run.journal import (
    Entry,
    NodeLeftOut,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RunStopped,
    RunTimedOut,
    SampleAttempt,
    SampleFinished,
    SampleGraded,
)
from runner.run.spec import RunError
from runner.sample_key import SampleKey
from runner.tasks.model import Task

PASS_K = (1, 2, 3, 4, 5)
_ENDS: dict[str, RunStatus] = {
    "run_finished": "completed",
    "run_timed_out": "timed_out",
    "run_interrupted": "incomplete",
    "run_stopped": "incomplete",
}
_PHASES = ("create", "start", "agent", "collect", "remove")


def build_record(entries: Sequence[Entry], tasks: Iterable[Task]) -> RunRecord:
    """The run record of a journal. ``tasks`` supplies each task's vendor, category, kind and hops.

    Raises:
        RunError: the journal has no ``run_started`` entry, or names a task ``tasks`` does not hold.
        ConsensusError: two votes share task, epoch, judge and dimension (a tampered journal).
    """
    starts = [e for e in entries if isinstance(e, RunStarted)]
    if not starts:
        raise RunError("the journal has no run_started entry")
    first = starts[0]
    by_id = {t.id: t for t in tasks}
    planned_ids = first.spec.tasks if first.spec.tasks is not None else sorted(by_id)
    unknown = sorted(set(planned_ids) - set(by_id))
    if unknown:
        raise RunError(f"the journal plans tasks the task set does not hold: {unknown}")

    outputs: dict[SampleKey, SampleFinished] = {}
    grades: dict[SampleKey, SampleGraded] = {}
    status: RunStatus = "incomplete"
    run_s = 0.0
    ended_at: str | None = None
    stop_reason: str | None = None
    duplicates: dict[SampleKey, list[SampleAttempt]] = defaultdict(list)
    for e in entries:
        if isinstance(e, SampleFinished):
            key = e.output.key
            if key in outputs:
                # The first result is the one graded; a later one is an attempt, never a second vote.
                duplicates[key].append(SampleAttempt(node=e.node or "", outcome="duplicate", detail=e.output.status))
            outputs.setdefault(key, e)
        elif isinstance(e, SampleGraded):
            grades.setdefault(e.key, e)
        elif isinstance(e, RunFinished | RunTimedOut | RunInterrupted | RunStopped):
            run_s, ended_at = e.used_s, e.ts
            status = _ENDS[e.kind]
            stop_reason = e.reason if isinstance(e, RunStopped) else None

    samples = [
        _sample(outputs.get(key), graded, duplicates.get(key, []))
        for key, graded in sorted(grades.items(), key=_epoch_first)
    ]
    votes = [v for s in samples for v in s.votes]
    scores = None
    if status == "completed":
        raw = [v.to_vote() for v in votes]
        # A broken sample's votes are recorded ``incorrect`` without asking a judge: they count in the consensus,
        # but two judges "agreeing" on them says nothing about the judges, so inter-judge statistics skip them.
        judged = [v.to_vote() for s in samples if s.graded for v in s.votes]
        scores = _scores([by_id[t] for t in planned_ids], consensus(raw), first.spec.epochs, raw, judged)
    record = RunRecord(
        run_id=first.run_id,
        status=status,
        official=first.spec.official,
        calibration=first.spec.calibration,
        spec=first.spec,
        digests=first.digests,
        images=first.images,
        runner_version=first.runner_version,
        candidate_model=first.spec.candidate,
        resolved_models=first.resolved_models,
        started_at=first.ts,
        ended_at=ended_at,
        run_s=run_s,
        phases_s=_phases(samples),
        agent_tokens=_total([s.agent for s in samples if s.agent is not None])
        if any(s.agent for s in samples)
        else None,
        judge_tokens={j: _total([s.judges[j] for s in samples if j in s.judges]) for j in first.spec.judges},
        failures=_failures(samples),
        abstention_rates=_abstention_rates(votes),
        samples_planned=len(planned_ids) * first.spec.epochs,
        samples_graded=len(samples),
        stop_reason=stop_reason,
        judge_dry_runs=[d for s in starts for d in s.judge_dry_runs],
        nodes_left_out=[
            LeftOutNode(node=e.node, host=e.host, joined=e.joined, reasons=e.reasons, at=e.ts)
            for e in entries
            if isinstance(e, NodeLeftOut)
        ],
        health=run_health(samples, first.spec.judges),
        scores=scores,
        samples=samples,
    )
    return record.model_copy(update={"unranked_reason": unranked_reason(record)})


def write_record(run_dir: Path, record: RunRecord) -> Path:
    """Write ``record.json`` into ``run_dir`` atomically (a reader never sees half a record); returns its path."""
    target = run_dir / RECORD_NAME
    scratch = target.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(record.model_dump(mode="json"), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(scratch, target)
    return target


def load_record(run_dir: Path) -> RunRecord:
    """Read ``record.json`` from ``run_dir``.

    Raises:
        RunError: it is missing or not a run record.
    """
    path = run_dir / RECORD_NAME
    try:
        return RunRecord.model_validate_json(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot read the run record {path}: {exc}") from exc


def _epoch_first(item: tuple[SampleKey, SampleGraded]) -> tuple[int, str]:
    return item[0].epoch, item[0].task_id


def _sample(finished: SampleFinished | None, graded: SampleGraded, duplicates: list[SampleAttempt]) -> SampleRecord:
    if finished is None:
        raise RunError(f"the journal grades {graded.task_id} epoch {graded.epoch} but never collected it")
    output, usage = finished.output, finished.usage
    agent = None
    if usage is not None:
        agent = TokenCount(requests=usage.requests, failed_requests=len(usage.errors), **usage.tokens.model_dump())
    # Every vote of one (task, epoch, judge) carries the totals of that judge's calls: count them once.
    judges: dict[str, TokenCount] = {}
    for v in graded.votes:
        judges.setdefault(
            v.judge,
            TokenCount(
                requests=v.attempts,
                input_tokens=v.input_tokens,
                output_tokens=v.output_tokens,
                cached_tokens=v.cached_tokens,
                cache_write_tokens=v.cache_write_tokens,
            ),
        )
    return SampleRecord(
        task_id=output.task_id,
        epoch=output.epoch,
        status=output.status,
        error=output.error,
        queries_logged=len(output.queries),
        queries_declared=list(output.answer.queries) if output.answer else [],
        coverage=graded.coverage,
        coverage_error=graded.coverage_error,
        analysis_note=graded.analysis_note,
        timings=output.timings,
        limits_reached=output.limits_reached,
        grade_s=graded.grade_s,
        graded=graded.graded,
        agent=agent,
        agent_calls=[RecordedCall.of(call) for call in usage.calls] if usage is not None else [],
        judges=judges,
        votes=graded.votes,
        node=finished.node,
        engine=finished.engine,
        attempts=[*finished.attempts, *duplicates],
    )


def _phases(samples: Sequence[SampleRecord]) -> dict[str, float]:
    totals = {name: round(sum(getattr(s.timings, name) for s in samples), 3) for name in _PHASES}
    totals["grade"] = round(sum(s.grade_s for s in samples), 3)
    return totals


def _total(counts: Sequence[TokenCount]) -> TokenCount:
    return sum(counts, TokenCount())


def _failures(samples: Sequence[SampleRecord]) -> dict[str, int]:
    counts = dict.fromkeys(FAILURE_KINDS, 0)
    for s in samples:
        if s.status != "ok":
            counts[s.status] = counts.get(s.status, 0) + 1
    return counts


def _abstention_rates(votes: Sequence[JudgeVote]) -> dict[Dimension, float]:
    # Published once, for every run, scored or not: the reliability statistics (withheld with the score) refer to it.
    grades: dict[Dimension, list[Grade]] = defaultdict(list)
    for v in votes:
        grades[v.dimension].append(v.grade)
    return {d: round(rate, 6) for d in DIMENSIONS if (rate := stats.abstention_rate(grades[d])) is not None}


def dimension_score(grades: Sequence[Grade]) -> DimensionScore:
    """Mean of the real grades (abstentions excluded and counted)."""
    real = [s for s in (score(g) for g in grades) if s is not None]
    abstained = sum(g == ABSTAIN for g in grades)
    return DimensionScore(mean=sum(real) / len(real) if real else None, graded=len(real), abstained=abstained)


def pass_hat_k(correct_epochs: Sequence[int], epochs: int, k: int) -> float | None:
    """pass^k over tasks, given each task's count of ``correct`` epochs out of ``epochs``."""
    if k > epochs or not correct_epochs:
        return None
    return sum(comb(c, k) / comb(epochs, k) for c in correct_epochs) / len(correct_epochs)


def _scores(
    tasks: Sequence[Task], results: Sequence[Consensus], epochs: int, votes: Sequence[Vote], judged: Sequence[Vote]
) -> Scores:
    by_task: dict[str, dict[Dimension, Consensus]] = defaultdict(dict)
    for c in results:
        by_task[c.task_id][c.dimension] = c
    rows = []
    for t in sorted(tasks, key=lambda t: t.id):
        mine = by_task.get(t.id, {})
        real = [c.grade for c in mine.values() if c.grade != ABSTAIN]
        rows.append(
            TaskResult(
                task_id=t.id,
                kind=t.kind,
                category=t.category,
                vendors=list(t.vendors),
                hops=t.hops,
                grades={d: c.grade for d, c in mine.items()},
                epochs={d: c.epochs for d, c in mine.items()},
                strict_success=all(g == "correct" for g in real) if real else None,
            )
        )
    missing = [r.task_id for r in rows if not r.grades]
    if missing:
        raise RunError(f"a completed run has no votes for tasks {missing[:5]}")
    dims = {d: dimension_score([r.grades[d] for r in rows if d in r.grades]) for d in DIMENSIONS}
    strict = [r.strict_success for r in rows if r.strict_success is not None]
    axes: dict[str, dict[str, list[Grade]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        grade = r.grades.get("answer_correctness")
        if grade is None:
            continue
        for vendor in r.vendors:
            axes["vendor"][vendor].append(grade)
        axes["category"][r.category].append(grade)
        axes["kind"][r.kind].append(grade)
        axes["hops"][str(r.hops)].append(grade)
    # A task whose every epoch abstained has no pass^k, as it has no mean: it is left out, not counted as 0.
    correct = [
        sum(g == "correct" for g in r.epochs["answer_correctness"].values())
        for r in rows
        if "answer_correctness" in r.epochs and r.grades.get("answer_correctness") != ABSTAIN
    ]
    return Scores(
        dimensions={d: s for d, s in dims.items() if s.graded or s.abstained},
        strict_success_rate=sum(strict) / len(strict) if strict else None,
        breakdowns={a: {k: dimension_score(v) for k, v in sorted(vals.items())} for a, vals in sorted(axes.items())},
        pass_hat_k={k: pass_hat_k(correct, epochs, k) for k in PASS_K},
        reliability=_reliability(rows, votes, judged),
        tasks=rows,
    )


def _reliability(rows: Sequence[TaskResult], votes: Sequence[Vote], judged: Sequence[Vote]) -> Reliability:
    """The statistics of ``runner.record.stats`` over the consensus rows and the votes behind them.

    ``votes`` are every recorded vote (agreement, CIs and abstention rates); ``judged`` are the votes of samples
    a judge actually graded (inter-judge statistics).
    """
    by_dim: dict[Dimension, list[Vote]] = defaultdict(list)
    judged_by_dim: dict[Dimension, list[Vote]] = defaultdict(list)
    by_judge: dict[str, list[Grade]] = defaultdict(list)
    for v in votes:
        by_dim[v.dimension].append(v)
        by_judge[v.judge].append(v.grade)
    for v in judged:
        judged_by_dim[v.dimension].append(v)
    dims = [d for d in DIMENSIONS if by_dim[d]]
    inter = {}
    for d in dims:
        grouped = stats.units(judged_by_dim[d])
        pairs = stats.judge_pairs(grouped)
        alpha = stats.krippendorff_alpha_ordinal([list(u.values()) for u in grouped.values()])
        inter[d] = InterJudge(alpha=alpha, kappa=stats.quadratic_kappa(pairs), pairs=len(pairs))
    # One column per statistic, one value per task in the rows' (sorted) order, so every CI sees the same draws.
    columns: dict[str, list[float | None]] = {
        d: [score(r.grades[d]) if d in r.grades else None for r in rows] for d in dims
    }
    strict = "strict_success"  # not a Dimension, so it cannot collide with one
    columns[strict] = [None if r.strict_success is None else float(r.strict_success) for r in rows]
    cis = stats.bootstrap_cis(columns)
    return Reliability(
        agreement={d: stats.mean_agreement((r.epochs[d], r.grades[d]) for r in rows if d in r.grades) for d in dims},
        inter_judge=inter,
        ci={d: cis[d] for d in dims},
        strict_success_ci=cis[strict],
        abstention_by_judge={
            j: rate for j in sorted(by_judge) if (rate := stats.abstention_rate(by_judge[j])) is not None
        },
        resamples=stats.BOOTSTRAP_RESAMPLES,
        seed=stats.BOOTSTRAP_SEED,
    )
