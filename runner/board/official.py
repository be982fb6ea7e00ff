"""A submission's official run: its spec (the v1 lock), its progress on the submission's row, and starting or
resuming it on the board's backend."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import update

from runner.board.config import BoardConfig
from runner.board.context import BoardContext
from runner.board.db import Submission, utcnow
from runner.board.lease import Hold
from runner.gateway.preflight import preflight
from runner.pipeline import Preflight, RunResult, resume_run, run_preflight, start_run
from runner.run.digests import current_digests
from runner.run.journal import JOURNAL_NAME
from runner.run.progress import Progress
from runner.run.spec import RunSpec, official
from runner.sample_key import SampleKey


def _set(hold: Hold, **values: Any) -> None:
    with hold.ctx.sessions() as session, session.begin():
        session.execute(
            update(Submission)
            .where(Submission.id == hold.id, Submission.worker == hold.holder)
            .values(updated_at=utcnow(), **values)
        )


def run_spec(config: BoardConfig, sub: Submission) -> RunSpec:
    """The spec of a submission's run: v1, locked by ``official``; shortened (and never official) under ``trial``.

    Raises:
        RunError: the v1 lock refused the spec (for example, a world that is not the pinned one).
    """
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

    def show(self, key: SampleKey | None = None, status: str | None = None) -> None:
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
    progress = BoardProgress(hold)
    address = ctx.config.ray_address if ctx.config.backend == "ray" else None
    if (folder / JOURNAL_NAME).is_file():
        return resume_run(folder, progress=progress, ray_address=address, stop=hold.stop, board=ctx.config.board_id)
    spec = run_spec(ctx.config, sub)
    checked = run_preflight(spec, ray_address=address)
    if spec.candidate and spec.candidate not in checked.resolved_models:
        # A calibration-shaped trial run does not probe the candidate; the board records its wire id anyway.
        resolved = {m.alias: m.returned_model or "" for m in preflight([spec.candidate])}
        checked = Preflight(
            resolved_models={**resolved, **checked.resolved_models}, judge_dry_runs=checked.judge_dry_runs
        )
    return start_run(
        spec,
        folder,
        progress=progress,
        preflight=checked,
        ray_address=address,
        stop=hold.stop,
        board=ctx.config.board_id,
    )
