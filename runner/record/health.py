"""The health of a run's judges and candidate, from its samples, and whether it stays under the threshold (the
models, :class:`~runner.record.model.RunHealth` and its parts, are the record's).

Counted over the samples of the record (docs/scoring.md, "Health"):

- **Per judge slot**, over the samples a judge was asked to grade (``graded``): its calls, and how many samples it
  left ungraded because its reply was malformed (also empty or truncated), it refused, or its provider failed
  (``JudgeVote.failure``); and its abstention rate, the share of its votes on those samples that are ``abstain``
  for any reason, deliberate ones included.
- **The candidate**, over the gateway's counts: requests forwarded and requests that failed.

A judge that left more than :data:`HEALTH_THRESHOLD` of its samples ungraded as malformed, refused or in error
(its ``failure_rate``), or a candidate with more than that share of failed requests, makes the run unhealthy: the
terminal summary and the report open with a banner, and the run is not ranked. Deliberate abstentions do not count
against a judge here (the reference judge always abstains on ``reasoning_utility``); they are in the abstention
rate and in the record's abstention statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from runner.grading.grades import ABSTAIN
from runner.record.model import CandidateHealth, JudgeHealth, RunHealth, SampleRecord

HEALTH_THRESHOLD: Final = 0.05
"""Above this share of a judge's samples left ungraded (malformed, refused, error), or of the candidate's requests
failed, a run is unhealthy."""


def run_health(samples: Sequence[SampleRecord], judges: Sequence[str]) -> RunHealth:
    """The health of the judge slots ``judges`` and of the candidate over ``samples``."""
    by_judge = {}
    for alias in judges:
        asked = [[v for v in s.votes if v.judge == alias] for s in samples if s.graded]
        asked = [votes for votes in asked if votes]
        failures = [votes[0].failure for votes in asked]
        grades = [v.grade for votes in asked for v in votes]
        by_judge[alias] = JudgeHealth(
            samples=len(asked),
            calls=sum(votes[0].attempts for votes in asked),
            malformed=failures.count("malformed"),
            refusals=failures.count("refused"),
            errors=failures.count("error"),
            failure_rate=round(sum(f is not None for f in failures) / len(asked), 6) if asked else None,
            abstention_rate=round(grades.count(ABSTAIN) / len(grades), 6) if grades else None,
        )
    counted = [s.agent for s in samples if s.agent is not None]
    candidate = None
    if counted:
        requests = sum(c.requests for c in counted)
        failed = sum(c.failed_requests for c in counted)
        candidate = CandidateHealth(
            requests=requests, failed_requests=failed, failed_rate=round(failed / requests, 6) if requests else None
        )
    return RunHealth(
        threshold=HEALTH_THRESHOLD,
        judges=by_judge,
        candidate=candidate,
        problems=health_problems(by_judge, candidate),
    )


def health_problems(judges: dict[str, JudgeHealth], candidate: CandidateHealth | None) -> list[str]:
    """One line per judge or candidate over :data:`HEALTH_THRESHOLD`."""
    found = []
    for alias, j in judges.items():
        if j.failure_rate is not None and j.failure_rate > HEALTH_THRESHOLD:
            found.append(
                f"judge {alias} could not grade {j.failure_rate:.1%} of its {j.samples} samples "
                f"(threshold {HEALTH_THRESHOLD:.0%}): {j.malformed} malformed, {j.refusals} refusals, {j.errors} errors"
            )
    if candidate is not None and candidate.failed_rate is not None and candidate.failed_rate > HEALTH_THRESHOLD:
        found.append(
            f"candidate: {candidate.failed_requests} of {candidate.requests} gateway requests failed "
            f"({candidate.failed_rate:.1%}, threshold {HEALTH_THRESHOLD:.0%})"
        )
    return found
