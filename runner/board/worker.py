"""The board's worker: takes an open submission with a row lock and moves it along until it is closed.

received --smoke test--> verified --> queued --the run--> running --> auditing --audit, bundle, sign--> published

Any step that fails closes the submission as ``failed`` with the reason. A worker claims a submission and holds it
with a lease it renews while it works (``runner.board.lease``), so two workers, in one board process or on several
hosts, never work the same one; a worker that died loses its lease, and another takes the submission over and
resumes its run from the journal. Every write a worker makes applies only while it still holds the row, and only
if the row is still in the state it expects; publishing is a compare-and-set from ``auditing``, so it happens once.

A submission cancelled while it runs (by its submitter or the board's admin, :func:`cancel`) stops its run the
way Ctrl-C does: no new sample, the run's sandboxes removed, ``run_interrupted`` journaled with the reason.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from runner.board.config import BoardConfig
from runner.board.db import CLOSED, Submission, utcnow
from runner.board.lease import Hold, claim
from runner.board.quarantine import board_name, remove_image
from runner.board.signing import sign_statement, statement_of
from runner.errors import IspmError
from runner.paths import tasks_dir
from runner.record.audit import audit
from runner.record.bundle import bundle
from runner.record.model import RunRecord
from runner.run.journal import JOURNAL_NAME
from runner.run.progress import Progress
from runner.run.spec import RunSpec, official

if TYPE_CHECKING:
    from runner.pipeline import RunResult

WORKING = ("received", "verified", "queued", "running", "auditing")
"""States a worker moves a submission out of."""
CANCELLABLE = ("received", "verified", "queued", "running")
"""States a submission can be cancelled in: once it is auditing, it is being published."""
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


def _set(hold: Hold, **values: Any) -> None:
    with hold.ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == hold.id, Submission.worker == hold.holder)
            .values(updated_at=utcnow(), **values)
        )


def _advance(hold: Hold, sub: Submission, state: str, **values: Any) -> bool:
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
            .values(state="failed", reason=reason[:4000], updated_at=utcnow())
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
            if _mine(hold, ended) and ended.state == "cancelled" and ended.image_tag:
                remove_image(ended.image_tag)  # its run has stopped: nothing uses the image any more
    return True


def _mine(hold: Hold, sub: Submission) -> bool:
    return not hold.lost and sub.worker == hold.holder


def _smoke(hold: Hold, sub: Submission) -> None:
    reason = smoke_test(hold.ctx.config, sub)
    if reason is not None:
        fail(hold, reason)
        remove_image(sub.image_tag)
    else:
        _advance(hold, sub, "verified")


def _queue(hold: Hold, sub: Submission) -> None:
    _advance(hold, sub, "queued")


def _start(hold: Hold, sub: Submission) -> None:
    folder = hold.ctx.config.data_dir / RUNS_DIR / f"submission-{sub.id}"
    _advance(hold, sub, "running", run_dir=str(folder))


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
    _advance(hold, sub, "auditing", run_id=record.run_id)


def _publish(hold: Hold, sub: Submission) -> None:
    publish(hold.ctx, sub, holder=hold.holder)


STEPS: dict[str, Callable[[Hold, Submission], None]] = {
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
            backend="docker",  # on the board's own engine, whatever runs the official samples
            time_limit_s=config.smoke_limit_s,
            replay_dir=replay_dir,
            gateway=gateway,
            run_id=f"board-{board_name(config.board_id)}-smoke-{sub.id}",
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


def cancel(ctx: BoardContext, submission_id: int, *, token_id: int | None, reason: str) -> Submission:
    """Cancel a submission that is not yet being published: one of ``token_id``'s, or any (``None``: the admin).

    A running submission keeps its worker: the worker's heartbeat sees the cancel and stops the run (no new sample,
    its sandboxes removed, the journal saying why), then lets go of it. Nothing of it is published.

    Raises:
        BoardError: 404 no such submission; 403 another token's; 409 it is auditing or closed.
    """
    from runner.board.errors import BoardError

    with ctx.sessions() as session, session.begin():
        sub = session.get(Submission, submission_id)
        if sub is None:
            raise BoardError(f"no submission {submission_id}", status=404)
        if token_id is not None and sub.token_id != token_id:
            raise BoardError("this submission was made with another token", status=403)
        moved = session.execute(
            update(Submission)
            .where(Submission.id == submission_id, Submission.state.in_(CANCELLABLE))
            .values(state="cancelled", reason=reason[:4000], updated_at=utcnow())
        )
        if not moved.rowcount:  # type: ignore[attr-defined]
            raise BoardError(
                f"submission {submission_id} is {sub.state}; only one not yet auditing can be cancelled", status=409
            )
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

    def __init__(self, hold: Hold) -> None:
        """Report on the held submission."""
        super().__init__()
        self._hold, self._last = hold, 0.0

    def show(self, pair: tuple[str, int] | None = None, status: str | None = None) -> None:
        """Store the counts (throttled; the last sample is always stored)."""
        now = time.monotonic()
        if now - self._last < 1.0 and self.done < self.total:
            return
        self._last = now
        projected = self.projected_total_s()
        eta = None if projected is None else max(0.0, projected - self.used_s)
        _set(self._hold, samples_done=self.done, samples_planned=self.total, eta_s=eta)


def run_submission(ctx: BoardContext, sub: Submission, folder: Path, *, hold: Hold) -> RunResult:
    """Start the submission's run in ``folder``, or resume it from its journal, on the board's backend; return how
    it ended, with its record. The run stops early when ``hold.stop`` is set (a cancel, a lost lease).

    Raises:
        PreflightError, JudgeDryRunError, RunError: the run could not start or continue.
        ClusterError: the ``ray`` backend's cluster is unreachable or refused a node.
    """
    from runner.pipeline import Preflight, resume_run, run_preflight, start_run

    progress = BoardProgress(hold)
    address = ctx.config.ray_address if ctx.config.backend == "ray" else None
    if (folder / JOURNAL_NAME).is_file():
        return resume_run(folder, progress=progress, ray_address=address, stop=hold.stop)
    spec = run_spec(ctx.config, sub)
    checked = run_preflight(spec, ray_address=address)
    if spec.candidate and spec.candidate not in checked.resolved_models:
        # A calibration-shaped trial run does not probe the candidate; the board records its wire id anyway.
        from runner.gateway.preflight import preflight

        resolved = {m.alias: m.returned_model or "" for m in preflight([spec.candidate])}
        checked = Preflight(
            resolved_models={**resolved, **checked.resolved_models}, judge_dry_runs=checked.judge_dry_runs
        )
    return start_run(spec, folder, progress=progress, preflight=checked, ray_address=address, stop=hold.stop)


def publish(ctx: BoardContext, sub: Submission, *, holder: str | None = None) -> Path:
    """Audit the finished run, bundle it, sign its statement, and mark the submission published (once; only while
    ``holder``, when given, still holds it).

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
    statement = statement_of(
        record, out, board_id=ctx.config.board_id, key=ctx.key, submission_id=sub.id, signed_at=utcnow().isoformat()
    )
    sign_statement(ctx.key, statement, out)
    with ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(
                Submission.id == sub.id,
                Submission.state == "auditing",
                *([Submission.worker == holder] if holder is not None else []),
            )
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
