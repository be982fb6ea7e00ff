"""The board's worker: takes an open submission with a row lock and moves it along until it is closed.

received --smoke test--> verified --> queued --the run--> running --> auditing --audit, bundle, sign--> published

Any step that fails closes the submission as ``failed`` with the reason. A worker *claims* a submission by setting
``worker`` on its row with a compare-and-set ``UPDATE ... WHERE worker IS NULL``, after selecting it ``FOR UPDATE
SKIP LOCKED`` on PostgreSQL (SQLite has no row locks; its write lock plus the compare-and-set is enough), so two
workers never take the same one. A board started again releases what its own workers held (:func:`recover`) and
resumes each running run from its journal; publishing is a compare-and-set from ``auditing``, so it happens once.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from runner.board.config import BoardConfig
from runner.board.db import CLOSED, Submission, utcnow
from runner.board.quarantine import remove_image
from runner.board.signing import sign_statement
from runner.errors import IspmError
from runner.paths import tasks_dir
from runner.record.audit import audit
from runner.record.bundle import bundle
from runner.record.model import RunRecord
from runner.record.verify import Statement, StatementDigests, file_sha256, public_key_sha256
from runner.run.journal import JOURNAL_NAME
from runner.run.progress import Progress
from runner.run.spec import RunSpec, official

WORKING = ("received", "verified", "queued", "running", "auditing")
"""States a worker moves a submission out of."""
RUNS_DIR = "runs"
PUBLISHED_DIR = "published"
SMOKE_DIR = "smoke"


@dataclass(frozen=True)
class BoardContext:
    """What every part of a running board shares."""

    config: BoardConfig
    engine: Engine
    sessions: sessionmaker[Session]
    key: Ed25519PrivateKey


def claim(ctx: BoardContext, worker_id: str) -> int | None:
    """Take the oldest open submission no worker holds; its id, or ``None`` when there is none."""
    with ctx.sessions() as session, session.begin():
        query = (
            select(Submission.id)
            .where(Submission.state.in_(WORKING), Submission.worker.is_(None))
            .order_by(Submission.id)
            .limit(1)
        )
        if ctx.engine.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        found = session.scalars(query).first()
        if found is None:
            return None
        taken = session.execute(
            update(Submission)
            .where(Submission.id == found, Submission.worker.is_(None))
            .values(worker=worker_id, updated_at=utcnow())
        )
        return found if taken.rowcount == 1 else None  # type: ignore[attr-defined]


def recover(ctx: BoardContext) -> int:
    """Release every open submission this board's workers held when it stopped; how many were released."""
    with ctx.sessions() as session, session.begin():
        done = session.execute(
            update(Submission)
            .where(Submission.state.in_(WORKING), Submission.worker.like(f"{ctx.config.board_id}/%"))
            .values(worker=None)
        )
        return int(done.rowcount)  # type: ignore[attr-defined]


def _set(ctx: BoardContext, submission_id: int, **values: Any) -> None:
    with ctx.sessions() as session, session.begin():
        session.execute(update(Submission).where(Submission.id == submission_id).values(updated_at=utcnow(), **values))


def _advance(ctx: BoardContext, sub: Submission, state: str, **values: Any) -> bool:
    """Move ``sub`` from the state it was loaded in to ``state``; False when someone moved it meanwhile (cancelled)."""
    with ctx.sessions() as session, session.begin():
        moved = session.execute(
            update(Submission)
            .where(Submission.id == sub.id, Submission.state == sub.state)
            .values(state=state, updated_at=utcnow(), **values)
        )
        return bool(moved.rowcount)  # type: ignore[attr-defined]


def _load(ctx: BoardContext, submission_id: int) -> Submission:
    with ctx.sessions() as session:
        return session.get_one(Submission, submission_id)


def fail(ctx: BoardContext, submission_id: int, reason: str) -> None:
    """Close the submission as failed with ``reason`` and release it (a closed one stays as it is)."""
    with ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.state.not_in(CLOSED))
            .values(state="failed", reason=reason[:4000], worker=None, updated_at=utcnow())
        )


def work_one(ctx: BoardContext, worker_id: str) -> bool:
    """Claim one submission and move it until it is closed (or the step fails); False when there was none."""
    submission_id = claim(ctx, worker_id)
    if submission_id is None:
        return False
    try:
        while (sub := _load(ctx, submission_id)).state not in CLOSED:
            step = STEPS[sub.state]
            step(ctx, sub)
    except IspmError as exc:
        fail(ctx, submission_id, f"{type(exc).__name__}: {exc}")
    except Exception as exc:
        fail(ctx, submission_id, f"the board failed: {type(exc).__name__}: {exc}")
        raise
    finally:
        _set(ctx, submission_id, worker=None)
    return True


def _smoke(ctx: BoardContext, sub: Submission) -> None:
    reason = smoke_test(ctx.config, sub)
    if reason is not None:
        fail(ctx, sub.id, reason)
        remove_image(sub.image_tag)
    else:
        _advance(ctx, sub, "verified")


def _queue(ctx: BoardContext, sub: Submission) -> None:
    _advance(ctx, sub, "queued")


def _start(ctx: BoardContext, sub: Submission) -> None:
    folder = ctx.config.data_dir / RUNS_DIR / f"submission-{sub.id}"
    _advance(ctx, sub, "running", run_dir=str(folder))


def _run(ctx: BoardContext, sub: Submission) -> None:
    folder = Path(sub.run_dir or ctx.config.data_dir / RUNS_DIR / f"submission-{sub.id}")
    record = run_submission(ctx, sub, folder)
    if record.status != "completed":
        why = record.stop_reason or record.status
        fail(ctx, sub.id, f"the run did not complete: {why}")
        return
    _advance(ctx, sub, "auditing", run_id=record.run_id)


def _publish(ctx: BoardContext, sub: Submission) -> None:
    publish(ctx, sub)


STEPS: dict[str, Callable[[BoardContext, Submission], None]] = {
    "received": _smoke,
    "verified": _queue,
    "queued": _start,
    "running": _run,
    "auditing": _publish,
}
"""What a worker does with a submission in each open state; each step moves it to the next state or fails it."""


def smoke_test(config: BoardConfig, sub: Submission) -> str | None:
    """Run the image on the config's smoke task; ``None`` when it answered, else why it failed."""
    from runner.gateway.server import Gateway
    from runner.run.recordings import write_recordings
    from runner.sandbox.trial import try_sample
    from runner.tasks.load import load_tasks
    from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth

    scratch = config.data_dir / SMOKE_DIR / f"submission-{sub.id}"
    shutil.rmtree(scratch, ignore_errors=True)
    replay_dir = None
    gateway = None
    try:
        if config.trial is not None and config.trial.calibration == "replay":
            tasks = [t for t in load_tasks(tasks_dir()) if t.id == config.smoke_task]
            truths = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
            replay_dir = write_recordings(tasks, truths, scratch / "replay")
        elif config.trial is None or config.trial.calibration is None:
            gateway = Gateway(sub.candidate)
        out = try_sample(
            sub.image_tag,
            config.smoke_task,
            backend=config.backend,
            time_limit_s=config.smoke_limit_s,
            replay_dir=replay_dir,
            gateway=gateway,
        )
    finally:
        if gateway is not None:
            gateway.close()
        shutil.rmtree(scratch, ignore_errors=True)
    if out.status == "ok":
        return None
    tail = out.stderr_tail.strip().splitlines()[-3:]
    detail = f": {out.error}" if out.error else ""
    return f"smoke test on {config.smoke_task}: {out.status}{detail} (exit code {out.exit_code})" + (
        f"; stderr ends: {' | '.join(tail)}" if tail else ""
    )


def cancel(ctx: BoardContext, submission_id: int, token_id: int) -> Submission:
    """Cancel a submission of ``token_id`` that has not started running.

    Raises:
        BoardError: 404 no such submission; 403 another token's; 409 it is running or closed.
    """
    from runner.board.errors import BoardError

    with ctx.sessions() as session, session.begin():
        sub = session.get(Submission, submission_id)
        if sub is None:
            raise BoardError(f"no submission {submission_id}", status=404)
        if sub.token_id != token_id:
            raise BoardError("this submission was made with another token", status=403)
        moved = session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.state.in_(("received", "verified", "queued")))
            .values(state="cancelled", reason="cancelled by the submitter", updated_at=utcnow())
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            raise BoardError(f"submission {submission_id} is {sub.state}; only one not yet running can be cancelled",
                             status=409)  # fmt: skip
    return _load(ctx, submission_id)


def run_spec(config: BoardConfig, sub: Submission) -> RunSpec:
    """The spec of a submission's run: v1, locked by ``official``; shortened (and never official) under ``trial``.

    Raises:
        RunError: the v1 lock refused the spec (for example, a world that is not the pinned one).
    """
    from runner.run.digests import current_digests

    spec = RunSpec(agent_image=sub.image_tag, candidate=sub.candidate, judges=config.judges, backend=config.backend)
    if config.trial is None:
        return official(spec, current_digests())
    trial = config.trial
    return RunSpec.model_validate(
        {**spec.model_dump(), "tasks": trial.tasks, "epochs": trial.epochs, "calibration": trial.calibration}
    )


class BoardProgress(Progress):
    """Writes samples done, planned and the ETA to the submission's row, at most once a second."""

    def __init__(self, ctx: BoardContext, submission_id: int) -> None:
        """Report on ``submission_id``."""
        super().__init__()
        self._ctx, self._id, self._last = ctx, submission_id, 0.0

    def show(self, pair: tuple[str, int] | None = None, status: str | None = None) -> None:
        """Store the counts (throttled; the last sample is always stored)."""
        now = time.monotonic()
        if now - self._last < 1.0 and self.done < self.total:
            return
        self._last = now
        projected = self.projected_total_s()
        eta = None if projected is None else max(0.0, projected - self.used_s)
        _set(self._ctx, self._id, samples_done=self.done, samples_planned=self.total, eta_s=eta)


def run_submission(ctx: BoardContext, sub: Submission, folder: Path) -> RunRecord:
    """Start the submission's run in ``folder``, or resume it from its journal; return its record.

    Raises:
        PreflightError, JudgeDryRunError, RunError: the run could not start or continue.
    """
    from runner.pipeline import Preflight, resume_run, run_preflight, start_run

    progress = BoardProgress(ctx, sub.id)
    if (folder / JOURNAL_NAME).is_file():
        return resume_run(folder, progress=progress).record
    spec = run_spec(ctx.config, sub)
    checked = run_preflight(spec)
    if spec.candidate and spec.candidate not in checked.resolved_models:
        # A calibration-shaped trial run does not probe the candidate; the board records its wire id anyway.
        from runner.gateway.preflight import preflight

        resolved = {m.alias: m.returned_model or "" for m in preflight([spec.candidate])}
        checked = Preflight(
            resolved_models={**resolved, **checked.resolved_models}, judge_dry_runs=checked.judge_dry_runs
        )
    return start_run(spec, folder, progress=progress, preflight=checked).record


def publish(ctx: BoardContext, sub: Submission) -> Path:
    """Audit the finished run, bundle it, sign its statement, and mark the submission published (once).

    Raises:
        BoardError: the audit found a difference (nothing is published).
    """
    from runner.board.errors import BoardError

    folder = Path(sub.run_dir or "")
    report = audit(folder)
    if not report.ok:
        raise BoardError("the run failed its audit: " + "; ".join(report.problems[:5]), status=500)
    record = RunRecord.model_validate_json((folder / "record.json").read_text(encoding="utf-8"))
    out = ctx.config.data_dir / PUBLISHED_DIR / f"{record.run_id}.tar.gz"
    bundle(folder, out)
    statement = Statement(
        board_id=ctx.config.board_id,
        key_sha256=public_key_sha256(ctx.key.public_key()),
        submission_id=sub.id,
        bundle_name=out.name,
        bundle_sha256=file_sha256(out),
        run_id=record.run_id,
        official=record.official,
        candidate=record.spec.candidate,
        resolved_models=record.resolved_models,
        digests=StatementDigests(
            world=record.digests.world_logical,
            task_set=record.digests.task_set,
            ground_truth=record.digests.ground_truth,
            rubric_set=record.digests.rubric_set,
        ),
        images=record.images,
        runner_version=record.runner_version,
        started_at=record.started_at,
        ended_at=record.ended_at,
        signed_at=utcnow().isoformat(),
    )
    sign_statement(ctx.key, statement, out)
    with ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == sub.id, Submission.state == "auditing")
            .values(
                state="published",
                run_id=record.run_id,
                bundle_sha256=statement.bundle_sha256,
                published_at=utcnow(),
                updated_at=utcnow(),
            )
        )
    return out


def work_forever(ctx: BoardContext, worker_id: str, stop: threading.Event, *, poll_s: float = 1.0) -> None:
    """Take and work submissions until ``stop`` is set, waiting ``poll_s`` when there is none.

    A fault of the board itself fails that submission (with the reason) and the worker goes on with the next.
    """
    from runner import log

    while not stop.is_set():
        try:
            worked = work_one(ctx, worker_id)
        except Exception:
            log.get(__name__).exception("board.worker_fault", worker=worker_id)
            worked = False
        if not worked:
            stop.wait(poll_s)
