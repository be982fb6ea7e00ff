"""A cluster run whose Ray head goes away: the run stops within the documented bound (``HEAD_STOP_BOUND_S``), ends
``interrupted`` with the reason, and ``--resume`` continues it on a head that is back. A real Ray cluster on loopback
and real Docker.

Without this, every Ray call that needs the head waits for it, and after 60 s Ray ends the driver's process: a run
cut as by ``kill -9``, with nothing said. It kills its own head, so it starts its own clusters.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from docker_fixtures import containers_of
from loopback_cluster import loopback_cluster

from runner.cluster.driver import HEAD_STOP_BOUND_S
from runner.pipeline import RunResult, resume_run, start_run
from runner.run.calibration import calibration_spec
from runner.run.journal import JOURNAL_NAME, RunInterrupted, SampleGraded, read_entries

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

TASKS = [f"ispm-{n:03d}" for n in range(1, 81)]
"""Enough that the run is still going when the head's loss is noticed (up to ``HEAD_STOP_BOUND_S``): with 24, on a
quiet machine the tries already placed finished the run 13 s after the head died (the workers ran on without it)."""
UNITS = 2
SLACK_S = 25.0
"""Room for a loaded machine on top of the bound: the stop's own Ray shutdown, the record and report."""


def _graded(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.task_id, e.epoch) for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleGraded)]


def test_a_run_whose_head_goes_away_stops_within_the_bound_and_resumes_on_a_head_that_is_back(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    spec = calibration_spec("replay", epochs=1, concurrency=2 * UNITS, tasks=TASKS, backend="ray")
    found: dict[str, RunResult] = {}
    with loopback_cluster(1, UNITS) as (cluster, _):
        address = str(cluster.address)
        # A daemon: were the run to wait forever, the failed test must not hang the session at exit.
        thread = threading.Thread(
            target=lambda: found.setdefault("result", start_run(spec, run_dir, ray_address=address)),
            daemon=True,
        )
        thread.start()
        journal = run_dir / JOURNAL_NAME
        deadline = time.monotonic() + 120
        while thread.is_alive() and time.monotonic() < deadline:
            if journal.exists() and b'"sample_graded"' in journal.read_bytes():
                break
            time.sleep(0.05)
        assert thread.is_alive(), "the run ended before its head could be taken away"
        (gcs,) = cluster.head_node.all_processes["gcs_server"]
        os.kill(gcs.process.pid, signal.SIGKILL)  # the head's machine is gone: no goodbye
        gone = time.monotonic()
        thread.join(timeout=HEAD_STOP_BOUND_S + SLACK_S + 60)
        took = time.monotonic() - gone
        assert not thread.is_alive(), "the run did not stop once its head was gone"
    result = found["result"]
    assert result.outcome == "interrupted" and took < HEAD_STOP_BOUND_S + SLACK_S, took
    because = result.interrupted_because or ""
    assert because.startswith(f"the Ray head at {address} has not answered for 10 s"), because
    assert because.endswith("resume the run once a head is back")
    (stop,) = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, RunInterrupted)]
    assert stop.reason == because
    done_before = set(_graded(run_dir))
    assert 1 <= len(done_before) < len(TASKS)
    # A head is back (a new cluster here, as after a restart): the resume finishes the run, nothing twice.
    with loopback_cluster(1, UNITS) as (again, _):
        resumed = resume_run(run_dir, ray_address=again.address)
    assert resumed.outcome == "completed"
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in TASKS]
    assert resumed.record.scores is not None
    assert resumed.record.scores.dimensions["answer_correctness"].mean == 1.0
    assert containers_of(resumed.record.run_id) == []
