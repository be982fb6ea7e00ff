"""Leases: how board workers, in one process or on several hosts, share the submissions without both running one.

A worker *claims* an open submission that has no lease (no one holds it) or whose holder's lease has run out: it
selects it (``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite has no row locks, and its write lock plus the
compare-and-set is enough), then sets ``worker`` and ``lease_until`` with a compare-and-set on the same condition,
so two workers never take the same one. While it works, a :class:`Hold` renews the lease every ``heartbeat_s``
from a thread, with a compare-and-set on ``worker``: a worker that died stops renewing, and ``lease_s`` later
another worker takes the submission over (a running run resumes from its journal). A holder whose renewal finds
another worker on the row, or that could not renew before its lease ran out, has lost it: its run stops hands-off
(nothing more journaled, and only its own attempt's sandboxes swept, never the new holder's) and every later write
of its own is fenced out by ``worker = holder``.

The heartbeat also reads the row's state: a submission cancelled while running stops its run the way Ctrl-C does.

Lease times come from the worker's own clock: hosts sharing a board keep their clocks in step (NTP) to well under
``lease_s``.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, or_, select, update

from runner import log
from runner.board.context import BoardContext
from runner.board.db import Submission
from runner.board.states import SubmissionState
from runner.run.scheduler import StopRequest

_log = log.get(__name__)


def _now() -> datetime:
    # Leases need sub-second precision (``utcnow`` keeps whole seconds, for what people read).
    return datetime.now(UTC)


def lease_end(ctx: BoardContext) -> datetime:
    """When a lease taken or renewed now runs out."""
    return _now() + timedelta(seconds=ctx.config.lease_s)


def _claimable(now: datetime) -> ColumnElement[bool]:
    # Every hold comes with a lease, so a row without one is held by no one (or by a board from before leases).
    return or_(Submission.lease_until.is_(None), Submission.lease_until < now)


def claim(ctx: BoardContext, holder: str, states: tuple[SubmissionState, ...]) -> int | None:
    """Take the oldest submission in ``states`` that no one holds or whose lease ran out; its id, or ``None``."""
    now = _now()
    with ctx.sessions() as session, session.begin():
        query = (
            select(Submission.id).where(Submission.state.in_(states), _claimable(now)).order_by(Submission.id).limit(1)
        )
        if ctx.engine.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        found = session.scalars(query).first()
        if found is None:
            return None
        taken = session.execute(
            update(Submission)
            .where(Submission.id == found, _claimable(now))
            .values(worker=holder, lease_until=now + timedelta(seconds=ctx.config.lease_s), updated_at=now)
        )
        return found if taken.rowcount == 1 else None  # type: ignore[attr-defined]


def renew(ctx: BoardContext, submission_id: int, holder: str) -> bool:
    """Extend ``holder``'s lease on the submission by ``lease_s``; False when it no longer holds it."""
    with ctx.sessions() as session, session.begin():
        renewed = session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.worker == holder)
            .values(lease_until=lease_end(ctx))
        )
        return bool(renewed.rowcount)  # type: ignore[attr-defined]


def release(ctx: BoardContext, submission_id: int, holder: str) -> None:
    """Let go of the submission, if ``holder`` still holds it."""
    with ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.worker == holder)
            .values(worker=None, lease_until=None)
        )


class Hold:
    """A worker's hold on one claimed submission, for a ``with`` block: renewed from a thread, released at the end.

    ``stop`` is the request the submission's run watches: set when the submission is cancelled (the run stops and
    journals why) or when the lease is lost (hands-off: another worker owns the run now).
    """

    def __init__(self, ctx: BoardContext, submission_id: int, holder: str) -> None:
        """Hold ``submission_id``, already claimed by ``holder``."""
        self.ctx, self.id, self.holder = ctx, submission_id, holder
        self.stop = StopRequest()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"board-lease-{submission_id}", daemon=True)

    @property
    def lost(self) -> bool:
        """Whether another worker may own the submission now: nothing more may be done with it here."""
        return self.stop.hands_off

    def __enter__(self) -> Hold:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        if not self.lost:
            release(self.ctx, self.id, self.holder)

    def _beat(self) -> None:
        config = self.ctx.config
        renewed_at = time.monotonic()
        while not self._done.wait(config.heartbeat_s):
            try:
                held = renew(self.ctx, self.id, self.holder)
                if held:
                    renewed_at = time.monotonic()
                    self._check_cancel()
                    continue
                reason = f"the board worker {self.holder} lost its lease on submission {self.id} to another worker"
            except Exception as exc:  # the database went away for a moment: try again until the lease runs out
                _log.warning("board.lease_renew_failed", submission=self.id, worker=self.holder, error=str(exc))
                # The next beat could come after the lease ran out and another worker took the run: stop now.
                if time.monotonic() - renewed_at < config.lease_s - config.heartbeat_s:
                    continue
                reason = f"the board worker {self.holder} could not renew its lease on submission {self.id}: {exc}"
            _log.warning("board.lease_lost", submission=self.id, worker=self.holder, reason=reason)
            self.stop.stop(reason, hands_off=True)
            return

    def _check_cancel(self) -> None:
        with self.ctx.sessions() as session:
            row = session.execute(
                select(Submission.state, Submission.reason).where(Submission.id == self.id)
            ).one_or_none()
        if row is not None and row.state is SubmissionState.CANCELLED and not self.stop.is_set():
            _log.info("board.run_cancelled", submission=self.id, worker=self.holder, reason=row.reason)
            self.stop.stop(f"cancelled on board {self.ctx.config.board_id}: {row.reason}")
