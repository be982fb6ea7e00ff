"""Cancelling a submission: by its submitter (its own token) or the board's admin (any), until it is auditing.

The row goes to ``cancelled`` at once; a running one's worker sees it at its next heartbeat and stops the run
(``runner.board.lease``).
"""

from __future__ import annotations

from sqlalchemy import update

from runner.board.context import BoardContext
from runner.board.db import Submission, utcnow
from runner.board.errors import BoardError
from runner.board.states import CANCELLABLE, SubmissionState


def cancel(ctx: BoardContext, submission_id: int, *, token_id: int | None, reason: str) -> Submission:
    """Cancel a submission that is not yet being published: one of ``token_id``'s, or any (``None``: the admin).

    A running submission keeps its worker: the worker's heartbeat sees the cancel and stops the run (no new sample,
    its sandboxes removed, the journal saying why), then lets go of it. Nothing of it is published.

    Raises:
        BoardError: 404 no such submission; 403 another token's; 409 it is auditing or closed.
    """
    with ctx.sessions() as session, session.begin():
        sub = session.get(Submission, submission_id)
        if sub is None:
            raise BoardError(f"no submission {submission_id}", status=404)
        if token_id is not None and sub.token_id != token_id:
            raise BoardError("this submission was made with another token", status=403)
        moved = session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.state.in_(CANCELLABLE))
            .values(state=SubmissionState.CANCELLED, reason=reason[:4000], updated_at=utcnow())
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            raise BoardError(
                f"submission {submission_id} is {sub.state}; only one not yet auditing can be cancelled", status=409
            )
    with ctx.sessions() as session:
        return session.get_one(Submission, submission_id)
