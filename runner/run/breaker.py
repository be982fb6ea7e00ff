"""The circuit breakers: stop a run early when a judge or the candidate keeps failing.

Samples are counted in the order they are journaled. With K = ``spec.breaker_after``:

- **Judge.** A judge slot that abstains as ``malformed``, ``refused`` or in ``error`` (``JudgeVote.failure``) on K
  consecutive graded samples trips the breaker. A sample it grades, even with a deliberate ``abstain``, resets its
  count; a broken sample (no judge asked) neither counts nor resets.
- **Candidate.** A sample whose gateway requests all failed (``requests > 0`` and as many ``errors``) counts; a
  sample with one successful request resets the count; a sample that made no request neither counts nor resets.
  K such samples in a row trip the breaker.
- **Cost** (``--run-cost-limit``, local runs only). Each journaled sample's dollars (the agent's and the judges'
  tokens, priced as the report prices them) add up, from what the journal already holds on a resume; once they
  reach the limit the breaker trips, and no sample starts after that. The gateway refuses the agent's calls past
  what is left of it too (``Caps.max_usd``): a sample it stops is not journaled, and runs again on a resume.

The first trip wins; its reason names the party, the count and a bounded excerpt of the last failure.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, NamedTuple

from runner.call import Usage
from runner.grading.judge import JudgeVote, excerpt
from runner.prices import PRICES_LABEL, price, usd_text
from runner.run.journal import SampleFinished, SampleGraded

if TYPE_CHECKING:
    from runner.gateway.server import SampleUsage


class Trip(NamedTuple):
    """Why a breaker stopped the run."""

    breaker: Literal["judge", "candidate", "cost"]
    party: str
    """The judge alias, the candidate model, or ``run`` (the run's cost limit)."""
    reason: str


class Breakers:
    """Both breakers of one run attempt. Thread-safe: workers report samples as they journal them."""

    def __init__(self, limit: int, candidate: str | None, cost_limit_usd: float | None = None) -> None:
        """Trip after ``limit`` consecutive failing samples; ``candidate`` names the candidate model, if any. With
        ``cost_limit_usd``, also trip once the run's samples cost that many dollars (``--run-cost-limit``)."""
        self.limit = limit
        self.candidate = candidate or "candidate"
        self.cost_limit_usd = cost_limit_usd
        self.spent_usd = 0.0
        """Dollars of the samples this attempt ran, the agent's and the judges' (with a cost limit only)."""
        self.tripped: Trip | None = None
        self._judges: dict[str, list[JudgeVote]] = {}
        self._candidate: list[str] = []
        self._lock = threading.Lock()

    def spent(self, usage: SampleUsage | None, votes: Sequence[JudgeVote]) -> Trip | None:
        """Count one sample's dollars against the run's cost limit; the trip, if this sample reached it."""
        if self.cost_limit_usd is None:
            return None
        usd = sample_usd(self.candidate, usage, votes)
        with self._lock:
            self.spent_usd += usd
            return self._over_budget()

    def refused_past_budget(self, usage: SampleUsage) -> Trip:
        """The gateway refused a sample's agent past the run's cost limit: count what it spent, and trip."""
        usd = sample_usd(self.candidate, usage, [])
        with self._lock:
            self.spent_usd += usd
            if self.tripped is None:
                limit = usd_text(self.cost_limit_usd or 0)
                reason = f"the gateway refused the agent past the run's cost limit of {limit}"
                self.tripped = Trip("cost", "run", reason + f" ({PRICES_LABEL})")
            return self.tripped

    def over_budget(self) -> Trip | None:
        """The cost breaker's trip when the run has already spent its limit (checked before a sample starts)."""
        if self.cost_limit_usd is None:
            return None
        with self._lock:
            return self._over_budget()

    def _over_budget(self) -> Trip | None:
        limit = self.cost_limit_usd
        if limit is not None and self.spent_usd >= limit and self.tripped is None:
            reason = f"the run's cost limit is reached: {usd_text(self.spent_usd)} of {usd_text(limit)} spent"
            self.tripped = Trip("cost", "run", reason + f" ({PRICES_LABEL})")
        return self.tripped if self.tripped is not None and self.tripped.breaker == "cost" else None

    def judged(self, graded: bool, votes: Sequence[JudgeVote]) -> Trip | None:
        """Count one graded sample's votes; the trip, if this sample tripped a breaker."""
        if not graded:
            return None
        first: dict[str, JudgeVote] = {}
        for v in votes:
            first.setdefault(v.judge, v)
        with self._lock:
            for alias, vote in first.items():
                failing = all(v.failure is not None for v in votes if v.judge == alias)
                streak = self._judges.setdefault(alias, [])
                if failing:
                    streak.append(vote)
                else:
                    streak.clear()
                if len(streak) >= self.limit and self.tripped is None:
                    self.tripped = Trip("judge", alias, _judge_reason(alias, streak))
                    return self.tripped
        return None

    def ran(self, usage: SampleUsage | None) -> Trip | None:
        """Count one finished sample's gateway usage; the trip, if this sample tripped the candidate's breaker."""
        if usage is None or usage.requests == 0:
            return None
        with self._lock:
            if len(usage.errors) >= usage.requests:
                self._candidate.append(usage.errors[-1].message if usage.errors else "")
            else:
                self._candidate.clear()
            if len(self._candidate) >= self.limit and self.tripped is None:
                last = excerpt(self._candidate[-1], 240)
                reason = (
                    f"candidate {self.candidate}: every gateway request failed on {len(self._candidate)} samples "
                    f"in a row; last: {last}"
                )
                self.tripped = Trip("candidate", self.candidate, reason)
                return self.tripped
        return None


def _judge_reason(alias: str, streak: Sequence[JudgeVote]) -> str:
    kinds = Counter(str(v.failure) for v in streak)
    noun = {"malformed": "malformed replies", "refused": "refusals", "error": "provider errors"}
    if len(kinds) == 1:
        what = f"{len(streak)} {noun[next(iter(kinds))]} in a row"
    else:
        mix = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        what = f"{len(streak)} samples in a row without a usable reply ({mix})"
    return f"judge {alias}: {what}; last: {excerpt(streak[-1].rationale, 240)}"


def sample_usd(candidate: str, usage: SampleUsage | None, votes: Sequence[JudgeVote]) -> float:
    """A sample's dollars: the agent's tokens priced as the candidate's, each judge's as its alias's (a judge's
    tokens are on each of its votes, once per sample). Unpriced tokens count nothing: a run with a cost limit
    checked its models are priced before it started."""
    at = datetime.now(UTC)
    usd = 0.0
    if usage is not None:
        returned = usage.model_ids[0] if usage.model_ids else None
        usd += price(candidate, usage.tokens, at, returned).usd or 0.0
    first: dict[str, JudgeVote] = {}
    for v in votes:
        first.setdefault(v.judge, v)
    for alias, v in first.items():
        tokens = Usage(
            input_tokens=v.input_tokens,
            output_tokens=v.output_tokens,
            cached_tokens=v.cached_tokens,
            cache_write_tokens=v.cache_write_tokens,
        )
        usd += price(alias, tokens, at).usd or 0.0
    return usd


def spent_usd(entries: Sequence[object], candidate: str | None) -> float:
    """Dollars the samples already in a journal cost (a resume's start against the run's cost limit): each
    collected sample's agent tokens and each graded sample's judge votes, priced as :func:`sample_usd` prices them."""
    total = 0.0
    for e in entries:
        if isinstance(e, SampleFinished):
            total += sample_usd(candidate or "candidate", e.usage, [])
        elif isinstance(e, SampleGraded):
            total += sample_usd(candidate or "candidate", None, e.votes)
    return total
