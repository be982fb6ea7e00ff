"""What a run cost, derived from its record's tokens: per run, per party (the agent, each judge), per task, per sample.

The v1 record keeps tokens only and stays as it is; dollars are computed here, at the prices of the pinned price
library (:mod:`runner.prices`) in force when the run started. The agent's tokens are priced as the candidate
model's, each judge slot's as its alias's. Whatever cannot be priced keeps its tokens and says why.

The functions read a record through :class:`PricedRun`, so the analytics store prices its partial read of a record
(:class:`runner.record.store.RunSummary`) exactly as the report prices the whole record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        lines.append(f"  prices: {PRICES_LABEL}; the candidate's cost is not known before its agent runs")
    return lines
