"""Publishing a finished run: audit it, bundle it, sign its statement, and mark the submission published, once."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import update

from runner.board.context import PUBLISHED_DIR, BoardContext
from runner.board.db import Submission, utcnow
from runner.board.errors import BoardError
from runner.board.signing import sign_statement, statement_of
from runner.board.states import SubmissionState
from runner.record.audit import audit
from runner.record.bundle import bundle
from runner.record.model import RunRecord


def publish(ctx: BoardContext, sub: Submission, *, holder: str | None = None) -> Path:
    """Audit the finished run, bundle it, sign its statement, and mark the submission published (once; only while
    ``holder``, when given, still holds it).

    Raises:
        BoardError: the audit found a difference (nothing is published).
    """
    folder = Path(sub.run_dir or "")
    report = audit(folder)
    if not report.ok:
        raise BoardError("the run failed its audit: " + "; ".join(report.problems[:5]), status=500)
    record = RunRecord.model_validate_json((folder / "record.json").read_text(encoding="utf-8"))
    out = ctx.config.data_dir / PUBLISHED_DIR / f"{record.run_id}.tar.gz"
    bundle(folder, out)
    statement = statement_of(
        record, out, board_id=ctx.config.board_id, key=ctx.key, submission_id=sub.id, signed_at=utcnow().isoformat()
    )
    sign_statement(ctx.key, statement, out)
    with ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(
                Submission.id == sub.id,
                Submission.state == SubmissionState.AUDITING,
                *([Submission.worker == holder] if holder is not None else []),
            )
            .values(
                state=SubmissionState.PUBLISHED,
                run_id=record.run_id,
                bundle_sha256=statement.bundle_sha256,
                published_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    return out
