"""The smoke test: the submitted image on one task in the sandbox, so that a broken image fails in a minute, not
after 12 hours. It always runs on the board's own engine, whatever runs the official samples."""

from __future__ import annotations

import shutil

from runner.board.config import BoardConfig
from runner.board.context import SMOKE_DIR
from runner.board.db import Submission
from runner.board.quarantine import board_name
from runner.gateway.server import Gateway
from runner.run.recordings import write_recordings
from runner.sandbox.trial import try_sample
from runner.tasks.catalog import catalog


def smoke_test(config: BoardConfig, sub: Submission) -> str | None:
    """Run the image on the config's smoke task; ``None`` when it answered, else why it failed."""

    scratch = config.data_dir / SMOKE_DIR / f"submission-{sub.id}"
    shutil.rmtree(scratch, ignore_errors=True)
    replay_dir = None
    gateway = None
    try:
        if config.trial is not None and config.trial.calibration == "replay":
            tasks = [t for t in catalog().tasks if t.id == config.smoke_task]
            truths = catalog().truth.tasks
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
            board=config.board_id,
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
