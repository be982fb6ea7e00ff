"""A cluster run whose every node dies: its waiting samples spend no attempt, the run ends ``interrupted`` naming the
node, and it resumes on a node that joins later. A real Ray cluster on loopback (tests/loopback_cluster.py) and real
Docker.

Ray refuses at once a task whose selector names only dead nodes: counted as lost attempts, those refusals would spend
every waiting sample's attempts in a moment, journal each as a ``sandbox_error`` and let the run "complete".

The test kills its worker, so it starts its own cluster (a head with no sandbox unit and one worker): the workers of
tests/test_cluster.py's cluster are shared by that whole module.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from docker_fixtures import containers_of
from loopback_cluster import LOOPBACK, loopback_cluster

from runner.cluster import SANDBOX_RESOURCE, driver
from runner.pipeline import RunResult, resume_run, start_run
from runner.run.calibration import calibration_spec
from runner.run.journal import JOURNAL_NAME, RunInterrupted, SampleFinished, SampleGraded, read_entries

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

TASKS = ["ispm-001", "ispm-010", "ispm-030", "ispm-060", "ispm-090", "ispm-127"]
UNITS = 2
STRANDED_S = 2.0
"""The test's grace: the run stops soon after Ray marks the node dead."""
FAST_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}
"""The head marks a node dead after three missed checks a second apart, not Ray's five 3 s apart (about 16 s here).
A check is missed only when the raylet does not answer at all, within Ray's 10 s, so a busy node is not taken for
dead."""
ENDS_WITHIN_S = 45.0
"""From the kill to the run's end: Ray's health checks, the grace, the stop, with room for a slow machine."""


def _finished(run_dir: Path) -> list[tuple[str, int]]:
    entries = read_entries(run_dir / JOURNAL_NAME)
    return [(e.output.task_id, e.output.epoch) for e in entries if isinstance(e, SampleFinished)]


def _graded(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.task_id, e.epoch) for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleGraded)]


def _wait_for_a_grade(journal: Path, running: threading.Thread) -> None:
    deadline = time.monotonic() + 120
    while running.is_alive() and time.monotonic() < deadline:
        if journal.exists() and b'"sample_graded"' in journal.read_bytes():
            return
        time.sleep(0.05)
    raise AssertionError("the run graded no sample on the worker")


def _drivers_raylet() -> str:
    # The driver attaches to a raylet of this machine (Ray prefers the head's): killing it would kill the driver.
    import ray

    return str(ray._private.worker.global_worker.node._raylet_socket_name)


def test_a_run_whose_every_node_dies_ends_interrupted_and_resumes_on_a_node_that_joins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver, "STRANDED_S", STRANDED_S)
    run_dir = tmp_path / "run"
    spec = calibration_spec("replay", epochs=1, concurrency=2 * UNITS, tasks=TASKS, backend="ray")
    with loopback_cluster(1, UNITS, FAST_DEATH) as (cluster, (worker,)):
        found: dict[str, RunResult] = {}
        # A daemon: were the run to wait forever, the failed test must not hang the session at exit.
        thread = threading.Thread(
            target=lambda: found.setdefault("result", start_run(spec, run_dir, ray_address=cluster.address)),
            daemon=True,
        )
        thread.start()
        _wait_for_a_grade(run_dir / JOURNAL_NAME, thread)
        assert _drivers_raylet() != worker._raylet_socket_name
        victim = str(worker.node_id)
        # The machine dies: its raylet at once (its worker processes follow it), then what is left of the node.
        os.kill(int(worker.all_processes["raylet"][0].process.pid), signal.SIGKILL)
        killed = time.monotonic()
        cluster.remove_node(worker, allow_graceful=False)
        thread.join(timeout=ENDS_WITHIN_S)
        took = time.monotonic() - killed
        assert not thread.is_alive(), f"the run still waits {took:.0f} s after its only node died"

        assert found["result"].outcome == "interrupted"
        (stopped,) = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, RunInterrupted)]
        assert stopped.reason == (
            f"every admitted node of the cluster is gone (node {victim[:12]} ({os.uname().nodename})) and none came "
            f"back within {STRANDED_S:g} s; resume the run once a node is back"
        )
        # The end-of-run summary (and a board's failure reason) says why, not just "interrupted".
        assert found["result"].interrupted_because == stopped.reason
        assert f"interrupted: {stopped.reason}" in found["result"].summary_lines()
        # What was graded stays; what was cut short was not journaled at all (no sandbox_error stands in for it).
        kept = _graded(run_dir)
        assert 1 <= len(kept) < len(TASKS)
        assert sorted(_finished(run_dir)) == sorted(kept)
        samples = found["result"].record.samples
        assert {(s.node, s.status) for s in samples} == {(victim, "ok")} and all(s.attempts == [] for s in samples)

        fresh: Any = cluster.add_node(num_cpus=UNITS, resources={SANDBOX_RESOURCE: UNITS}, node_ip_address=LOOPBACK)
        cluster.wait_for_nodes()
        resumed = resume_run(run_dir, ray_address=cluster.address)
    assert resumed.outcome == "completed"
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in TASKS]
    assert sorted(_finished(run_dir)) == sorted(graded)  # nothing graded was run again
    record = resumed.record
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    assert {s.node for s in record.samples if (s.task_id, s.epoch) not in kept} == {str(fresh.node_id)}
    # The dead node's orphans went when the new node on its host was checked; the rest when the run closed.
    assert containers_of(record.run_id) == []
