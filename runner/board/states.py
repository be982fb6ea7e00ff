"""A submission's state: one enum, stored in the database as its value, shown by the API and pages as that value.

A leaf module (the standard library only), so ``ispm submit status`` reads states without loading the database.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class SubmissionState(StrEnum):
    """Where a submission is on its way, as ``docs/board.md`` ("A submission's way") tells it."""

    RECEIVED = "received"
    """Its upload was verified and its image loaded; no worker has taken it yet."""
    VERIFIED = "verified"
    """Its image passed the smoke test."""
    QUEUED = "queued"
    """Waiting for its official run to start."""
    RUNNING = "running"
    """Its official run is under way."""
    AUDITING = "auditing"
    """Its run is audited, bundled and signed: past cancelling."""
    PUBLISHED = "published"
    """Its signed record is on the leaderboard."""
    FAILED = "failed"
    """A step failed; the reason says which."""
    CANCELLED = "cancelled"
    """Its submitter or the board's admin cancelled it."""


CLOSED: Final = frozenset({SubmissionState.PUBLISHED, SubmissionState.FAILED, SubmissionState.CANCELLED})
"""A submission in one of these states is no longer open; nothing moves it again."""
WORKING: Final = (
    SubmissionState.RECEIVED,
    SubmissionState.VERIFIED,
    SubmissionState.QUEUED,
    SubmissionState.RUNNING,
    SubmissionState.AUDITING,
)
"""States a worker moves a submission out of, in order."""
CANCELLABLE: Final = frozenset(WORKING) - {SubmissionState.AUDITING}
"""States a submission can be cancelled in: once it is auditing, it is being published."""
