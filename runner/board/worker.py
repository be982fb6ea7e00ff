"""The board's worker: takes an open submission with a row lock and moves it along until it is closed.

received --smoke test--> verified --> queued --the run--> running --> auditing --audit, bundle, sign--> published

Any step that fails closes the submission as ``failed`` with the reason. A worker claims a submission and holds it
with a lease it renews while it works (``runner.board.lease``), so two workers, in one board process or on several
hosts, never work the same one; a worker that died loses its lease, and another takes the submission over and
resumes its run from the journal. Every write a worker makes applies only while it still holds the row, and only
if the row is still in the state it expects; publishing is a compare-and-set from ``auditing``, so it happens once.

A submission cancelled while it runs (by its submitter or the board's admin, ``runner.board.cancel``) stops its
run the way Ctrl-C does: no new sample, the run's sandboxes removed, ``run_interrupted`` journaled with the reason.

This module is the state machine only; each step is its own module: ``smoke`` (the smoke test), ``official`` (the
run), ``publish`` (audit, bundle, sign).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy import update

from runner import log
from runner.board.context import RUNS_DIR, BoardContext
from runner.board.db import Submission, utcnow
from runner.board.lease import Hold, claim
from runner.board.official import run_submission
from runner.board.publish import publish
from runner.board.quarantine import remove_image
from runner.board.smoke import smoke_test
from runner.board.states import CLOSED, WORKING, SubmissionState
from runner.errors import IspmError


def _advance(hold: Hold, sub: Submission, state: SubmissionState, **values: Any) -> bool:
    """Move ``sub`` from the state it was loaded in to ``state``; False when someone moved it meanwhile (cancelled)
    or the hold was lost."""
    with hold.ctx.sessions() as session, session.begin():
        moved = session.execute(
            update(Submission)
            .where(Submission.id == sub.id, Submission.state == sub.state, Submission.worker == hold.holder)
            .values(state=state, updated_at=utcnow(), **values)
        )
        return bool(moved.rowcount)  # type: ignore[attr-defined]


def _load(ctx: BoardContext, submission_id: int) -> Submission:
    with ctx.sessions() as session:
        return session.get_one(Submission, submission_id)


def fail(hold: Hold, reason: str) -> None:
    """Close the held submission as failed with ``reason`` (a closed one, or one held by another, stays as it is)."""
    with hold.ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == hold.id, Submission.state.not_in(CLOSED), Submission.worker == hold.holder)
            .values(state=SubmissionState.FAILED, reason=reason[:4000], updated_at=utcnow())
        )


def work_one(ctx: BoardContext, worker_id: str) -> bool:
    """Claim one submission and move it until it is closed, the step fails, or the lease is lost; False when there
    was none to claim."""
    submission_id = claim(ctx, worker_id, WORKING)
    if submission_id is None:
        return False
    with Hold(ctx, submission_id, worker_id) as hold:
        try:
            # A row another worker holds now is left at once, even before the heartbeat notices: a step whose
            # compare-and-set was fenced out must not run again (a second resume of the same run).
            while (sub := _load(ctx, submission_id)).state not in CLOSED and _mine(hold, sub):
                step = STEPS[sub.state]
                step(hold, sub)
        except IspmError as exc:
            fail(hold, f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            fail(hold, f"the board failed: {type(exc).__name__}: {exc}")
            raise
        finally:
            ended = _load(ctx, submission_id)
            if _mine(hold, ended) and ended.state is SubmissionState.CANCELLED and ended.image_tag:
                remove_image(ended.image_tag)  # its run has stopped: nothing uses the image any more
    return True


def _mine(hold: Hold, sub: Submission) -> bool:
    return not hold.lost and sub.worker == hold.holder


def _smoke(hold: Hold, sub: Submission) -> None:
    if not sub.image_tag:  # the board stopped while its upload loaded (a kill -9): the image never arrived
        fail(hold, "the board stopped while this submission's image was loading: submit it again")
        return
    reason = smoke_test(hold.ctx.config, sub)
    if reason is not None:
        fail(hold, reason)
        remove_image(sub.image_tag)
    else:
        _advance(hold, sub, SubmissionState.VERIFIED)


def _queue(hold: Hold, sub: Submission) -> None:
    _advance(hold, sub, SubmissionState.QUEUED)


def _start(hold: Hold, sub: Submission) -> None:
    folder = hold.ctx.config.data_dir / RUNS_DIR / f"submission-{sub.id}"
    _advance(hold, sub, SubmissionState.RUNNING, run_dir=str(folder))


def _run(hold: Hold, sub: Submission) -> None:
    folder = Path(sub.run_dir or hold.ctx.config.data_dir / RUNS_DIR / f"submission-{sub.id}")
    result = run_submission(hold.ctx, sub, folder, hold=hold)
    record = result.record
    if hold.stop.is_set():
        return  # cancelled (the row says so already) or the lease was lost (the row is another worker's)
    if record.status != "completed":
        why = record.stop_reason or result.interrupted_because or record.status
        fail(hold, f"the run did not complete: {why}")
        return
    _advance(hold, sub, SubmissionState.AUDITING, run_id=record.run_id)


def _publish(hold: Hold, sub: Submission) -> None:
    publish(hold.ctx, sub, holder=hold.holder)


STEPS: dict[SubmissionState, Callable[[Hold, Submission], None]] = {
    SubmissionState.RECEIVED: _smoke,
    SubmissionState.VERIFIED: _queue,
    SubmissionState.QUEUED: _start,
    SubmissionState.RUNNING: _run,
    SubmissionState.AUDITING: _publish,
}
"""What a worker does with a submission in each open state; each step moves it to the next state or fails it."""


def work_forever(ctx: BoardContext, worker_id: str, stop: threading.Event, *, poll_s: float = 1.0) -> None:
    """Take and work submissions until ``stop`` is set, waiting ``poll_s`` when there is none.

    A fault of the board itself fails that submission (with the reason) and the worker goes on with the next.
    """
    while not stop.is_set():
        try:
            worked = work_one(ctx, worker_id)
        except Exception:
            log.get(__name__).exception("board.worker_fault", worker=worker_id)
            worked = False
        if not worked:
            stop.wait(poll_s)
