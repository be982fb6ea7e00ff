"""The circuit breakers: stop a run early when a judge or the candidate keeps failing.

Samples are counted in the order they are journaled. With K = ``spec.breaker_after``:

- **Judge.** A judge slot that abstains as ``malformed``, ``refused`` or in ``error`` (``JudgeVote.failure``) on K
  consecutive graded samples trips the breaker. A sample it grades, even with a deliberate ``abstain``, resets its
  count; a broken sample (no judge asked) neither counts nor resets.
- **Candidate.** A sample whose gateway requests all failed (``requests > 0`` and as many ``errors``) counts; a
  sample with one successful request resets the count; a sample that made no request neither counts nor resets.
  K such samples in a row trip the breaker.

The first trip wins; its reason names the party, the count and a bounded excerpt of the last failure.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, NamedTuple

from runner.grading.judge import JudgeVote, excerpt

if TYPE_CHECKING:
    from runner.gateway.server import SampleUsage


class Trip(NamedTuple):
    """Why a breaker stopped the run."""

    breaker: Literal["judge", "candidate"]
    party: str
    """The judge alias or the candidate model."""
    reason: str


class Breakers:
    """Both breakers of one run attempt. Thread-safe: workers report samples as they journal them."""

    def __init__(self, limit: int, candidate: str | None) -> None:
        """Trip after ``limit`` consecutive failing samples; ``candidate`` names the candidate model, if any."""
        self.limit = limit
        self.candidate = candidate or "candidate"
        self.tripped: Trip | None = None
        self._judges: dict[str, list[JudgeVote]] = {}
        self._candidate: list[str] = []
        self._lock = threading.Lock()

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
