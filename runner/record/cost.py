"""What a run cost, derived from its record's tokens: per run, per party (the agent, each judge), per task, per sample.

The v1 record keeps tokens only and stays as it is; dollars are computed here, at the prices of the pinned price
library (:mod:`runner.prices`) in force when the run started. The agent's tokens are priced as the candidate
model's, each judge slot's as its alias's. Whatever cannot be priced keeps its tokens and says why.

The functions read a record through :class:`PricedRun`, so the analytics store prices its partial read of a record
(:class:`runner.record.store.RunSummary`) exactly as the report prices the whole record.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from runner.call import Usage
from runner.prices import PRICES_LABEL, Cost, price
from runner.record.model import RecordedCall, TokenCount
from runner.run.model import JudgeDryRun
from runner.sample_key import SampleKey


class PricedSample(Protocol):
    """What pricing reads of a sample."""

    @property
    def task_id(self) -> str: ...
    @property
    def epoch(self) -> int: ...
    @property
    def agent(self) -> TokenCount | None: ...
    @property
    def judges(self) -> Mapping[str, TokenCount]: ...
    @property
    def agent_calls(self) -> Sequence[RecordedCall]: ...


class PricedRun(Protocol):
    """What pricing reads of a record."""

    @property
    def candidate_model(self) -> str | None: ...
    @property
    def resolved_models(self) -> Mapping[str, str]: ...
    @property
    def started_at(self) -> str: ...
    @property
    def agent_tokens(self) -> TokenCount | None: ...
    @property
    def judge_tokens(self) -> Mapping[str, TokenCount]: ...
    @property
    def samples(self) -> Sequence[PricedSample]: ...


class _Model(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")


class PartyCost(_Model):
    """The agent's or one judge slot's tokens over the whole run, and their dollars."""

    party: str
    """``agent``, or the judge slot's alias."""
    model: str | None
    """The model the tokens are priced as (``provider/model``); ``None`` for an agent without a model."""
    tokens: TokenCount
    """Its requests and tokens, as the record counts them."""
    cost: Cost
    """Their dollars."""


class SampleCost(_Model):
    """One sample's dollars: the agent's and the judges'."""

    task_id: str
    """The sample's task."""
    epoch: int
    """The sample's epoch (1-based)."""
    agent: Cost
    """The agent's calls."""
    judges: Cost
    """Every judge slot's calls on this sample."""
    total: Cost
    """Both."""

    @property
    def key(self) -> SampleKey:
        """Which sample this is."""
        return SampleKey(task_id=self.task_id, epoch=self.epoch)


class TaskCost(_Model):
    """One task's dollars over its epochs."""

    task_id: str
    """The task."""
    samples: int
    """Its samples in the record."""
    agent: Cost
    """The agent's calls over its samples."""
    judges: Cost
    """The judges' calls over its samples."""
    total: Cost
    """Both."""


class RunCost(_Model):
    """What a run cost, every way it is shown."""

    prices: str
    """The price library, its version and its data's date (:data:`runner.prices.PRICES_LABEL`)."""
    priced_at: str
    """The date whose prices apply: the run's start (UTC, ISO 8601 date)."""
    agent: PartyCost | None
    """The agent's; ``None`` when the run had no gateway (a calibration)."""
    judges: list[PartyCost]
    """Each judge slot's, in the record's order."""
    agent_cost: Cost
    """The agent's dollars (zero without a gateway)."""
    judge_cost: Cost
    """Every judge's dollars together."""
    total: Cost
    """The run's dollars."""
    tasks: list[TaskCost]
    """Per task, in the record's order."""
    samples: list[SampleCost]
    """Per sample, in the record's order."""

    def notes(self) -> list[str]:
        """Why some tokens have no price, once each."""
        return list(self.total.unpriced)


def run_start(started_at: str) -> datetime | None:
    """The run's start as a time, for the prices in force then; ``None`` when the record's text is not a time."""
    try:
        when = datetime.fromisoformat(started_at)
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _agent_cost(run: PricedRun, usage: Usage | None, at: datetime | None, calls: Sequence[RecordedCall]) -> Cost:
    if usage is None:
        return Cost(usd=0.0)
    alias = run.candidate_model
    cost = price(alias, usage, at, run.resolved_models.get(alias) if alias else None)
    silent = sum(c.outcome == "ok" and c.input_tokens == 0 and c.output_tokens == 0 for c in calls)
    if silent:
        cost += Cost(unpriced=("agent calls whose provider reported no usage: not counted, not priced",))
    return cost


def _judges_cost(judges: Mapping[str, TokenCount], at: datetime | None) -> Cost:
    return sum((price(alias, tokens, at) for alias, tokens in judges.items()), Cost())


def run_cost(run: PricedRun) -> RunCost:
    """Price ``run``'s tokens: per party, per sample, per task and in total."""
    at = run_start(run.started_at)
    samples = []
    tasks: dict[str, list[SampleCost]] = {}
    for s in run.samples:
        agent = _agent_cost(run, s.agent, at, s.agent_calls)
        judges = _judges_cost(s.judges, at)
        cost = SampleCost(task_id=s.task_id, epoch=s.epoch, agent=agent, judges=judges, total=agent + judges)
        samples.append(cost)
        tasks.setdefault(s.task_id, []).append(cost)
    party = None
    agent_cost = Cost(usd=0.0)
    if run.agent_tokens is not None:
        calls = [c for s in run.samples for c in s.agent_calls]
        agent_cost = _agent_cost(run, run.agent_tokens, at, calls)
        party = PartyCost(party="agent", model=run.candidate_model, tokens=run.agent_tokens, cost=agent_cost)
    slots = [
        PartyCost(party=alias, model=alias, tokens=tokens, cost=price(alias, tokens, at))
        for alias, tokens in run.judge_tokens.items()
    ]
    judge_cost = sum((j.cost for j in slots), Cost())
    return RunCost(
        prices=PRICES_LABEL,
        priced_at=at.date().isoformat() if at else "today",
        agent=party,
        judges=slots,
        agent_cost=agent_cost,
        judge_cost=judge_cost,
        total=agent_cost + judge_cost,
        tasks=[
            TaskCost(
                task_id=task_id,
                samples=len(costs),
                agent=sum((c.agent for c in costs), Cost()),
                judges=sum((c.judges for c in costs), Cost()),
                total=sum((c.total for c in costs), Cost()),
            )
            for task_id, costs in tasks.items()
        ],
        samples=samples,
    )


def judge_cost_range(dry: JudgeDryRun, at: datetime | None = None) -> tuple[Cost, Cost] | None:
    """A judge's projected dollars over the run's samples, from its dry run: every sample as cheap as its cheapest
    calibration sample, and as dear as its dearest (one call each); ``None`` for a dry run without ranges."""
    if dry.sample_input_tokens is None or dry.sample_output_tokens is None:
        return None
    n = dry.projected_samples
    (low_in, high_in), (low_out, high_out) = dry.sample_input_tokens, dry.sample_output_tokens
    low = price(dry.judge, Usage(input_tokens=low_in * n, output_tokens=low_out * n), at)
    high = price(dry.judge, Usage(input_tokens=high_in * n, output_tokens=high_out * n), at)
    return low, high


def projection_lines(dry_runs: Sequence[JudgeDryRun]) -> list[str]:
    """What preflight prints of a run's projected judge cost, before any sample runs."""
    lines = []
    low, high, calls = Cost(), Cost(), 0
    for dry in dry_runs:
        found = judge_cost_range(dry)
        if found is None:
            continue
        low, high, calls = low + found[0], high + found[1], calls + dry.projected_samples
        lines.append(
            f"projected cost {dry.judge}: {found[0].text()} to {found[1].text()} over {dry.projected_samples:,} "
            "calls (every sample as its cheapest, and as its dearest, calibration sample)"
        )
        lines += [f"  note: {n}" for n in found[1].unpriced]
    if lines:
        lines.append(f"projected cost of the judges: {low.text()} to {high.text()} over {calls:,} calls")
        lines.append(f"  prices: {PRICES_LABEL}")
    return lines


# ---------------------------------------------------------------- the candidate's projection at preflight


class CandidateProjection(_Model):
    """The candidate's projected dollars over a run, before anything is spent: from the calibration tasks' samples
    of earlier runs where the same agent image ran against a model, every planned sample as cheap as the cheapest of
    them and as dear as the dearest."""

    candidate: str
    """The model the projection is priced as (``provider/model``)."""
    agent_image: str
    """The agent image whose earlier samples it is drawn from."""
    samples: int
    """Earlier samples it is drawn from (each with the agent's tokens)."""
    runs: tuple[str, ...]
    """The run ids those samples came from."""
    projected_samples: int
    """Samples the run will have."""
    low_tokens: Usage
    """The cheapest earlier sample's tokens times ``projected_samples``."""
    high_tokens: Usage
    """The dearest earlier sample's tokens times ``projected_samples``."""
    low: Cost
    """``low_tokens``' dollars (tokens only, with a note, for a model the price data does not know)."""
    high: Cost
    """``high_tokens``' dollars."""


def _times(usage: Usage, n: int) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens * n,
        output_tokens=usage.output_tokens * n,
        cached_tokens=usage.cached_tokens * n,
        cache_write_tokens=usage.cache_write_tokens * n,
        reasoning_tokens=usage.reasoning_tokens * n,
    )


class _RunSpec(Protocol):
    @property
    def agent_image(self) -> str: ...


class EarlierRun(PricedRun, Protocol):
    """What the candidate's projection reads of an earlier run's record."""

    @property
    def run_id(self) -> str: ...
    @property
    def spec(self) -> _RunSpec: ...


def agent_samples(runs: Sequence[EarlierRun], agent_image: str, task_ids: Collection[str]) -> list[tuple[str, Usage]]:
    """Each sample of ``task_ids`` in ``runs`` where ``agent_image`` ran against a model: its run id and the agent's
    tokens. A sample whose agent made no request (a calibration agent, one that failed to start) says nothing of
    what the candidate costs and is left out."""
    return [
        (run.run_id, s.agent)
        for run in runs
        if run.spec.agent_image == agent_image and run.candidate_model
        for s in run.samples
        if s.task_id in task_ids and s.agent is not None and s.agent.requests > 0
    ]


def candidate_projection(
    candidate: str, agent_image: str, samples: Sequence[tuple[str, Usage]], planned: int, at: datetime | None = None
) -> CandidateProjection | None:
    """The candidate's projected cost over ``planned`` samples from the earlier ``samples`` (run id, agent tokens);
    ``None`` when there are none. The cheapest and the dearest are chosen by their dollars at ``candidate``'s
    prices, or by their tokens when it has none."""
    if not samples:
        return None

    def dearness(usage: Usage) -> tuple[float, int]:
        usd = price(candidate, usage, at).usd
        return (usd if usd is not None else 0.0, usage.input_tokens + usage.output_tokens)

    ordered = sorted((u for _, u in samples), key=dearness)
    low, high = _times(ordered[0], planned), _times(ordered[-1], planned)
    return CandidateProjection(
        candidate=candidate,
        agent_image=agent_image,
        samples=len(samples),
        runs=tuple(dict.fromkeys(run for run, _ in samples)),
        projected_samples=planned,
        low_tokens=low,
        high_tokens=high,
        low=price(candidate, low, at),
        high=price(candidate, high, at),
    )


def _tokens_text(usage: Usage) -> str:
    return f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens"


def candidate_lines(
    projection: CandidateProjection | None, judges: Sequence[JudgeDryRun], where: str, task_ids: Collection[str]
) -> list[str]:
    """What preflight prints of the candidate's projected cost, and of the whole run's beside the judges'.
    ``where`` names the folder the earlier runs were looked for in, for the line saying none was found."""
    if projection is None:
        tasks = ", ".join(sorted(task_ids))
        return [
            f"projected cost of the candidate: not known before its agent runs (no earlier run of this agent "
            f"image against a model on the calibration tasks {tasks} under {where})"
        ]
    p = projection
    lines = [
        f"projected cost of the candidate {p.candidate}: {p.low.text()} to {p.high.text()} over "
        f"{p.projected_samples:,} samples ({_tokens_text(p.low_tokens)} to {_tokens_text(p.high_tokens)}; every "
        f"sample as the cheapest, and as the dearest, of {p.samples} calibration-task samples of {p.agent_image} in "
        f"{len(p.runs)} earlier run(s))"
    ]
    lines += [f"  note: {n}" for n in p.high.unpriced]
    ranges = [r for r in map(judge_cost_range, judges) if r is not None]
    if ranges:
        low = sum((r[0] for r in ranges), p.low)
        high = sum((r[1] for r in ranges), p.high)
        lines.append(f"projected cost of the run (candidate and judges): {low.text()} to {high.text()}")
    return lines
