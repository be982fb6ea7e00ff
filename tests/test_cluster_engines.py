"""Ray nodes on two Docker engines: a worker on this machine's engine and one on a second, empty engine that each test
starts and removes itself (tests/second_engine.py). A node's engine failing is the node's fault, never the agent's.

Its own cluster (a head with no sandbox unit and one worker on the main engine): the test adds the second engine's
worker and removes it, so the two engines' samples can be told apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from docker_fixtures import containers_of
from loopback_cluster import LOOPBACK, environment, loopback_cluster
from second_engine import Engine, second_engine

from runner.cluster import SANDBOX_RESOURCE, driver
from runner.cluster.driver import RayRunner
from runner.cluster.model import NodeExpectations
from runner.pipeline import LOG_NAME, RunResult, image_ids, resume_run, start_run
from runner.run.calibration import calibration_spec
from runner.run.journal import JOURNAL_NAME, SampleFinished, SampleGraded, read_entries
from runner.sandbox.transfer import engine_image_ids
from runner.sandbox.trial import resolve_image

pytestmark = [pytest.mark.docker, pytest.mark.ray, pytest.mark.slow]

TASKS = ["ispm-001", "ispm-010", "ispm-030", "ispm-060", "ispm-090", "ispm-127"]
MANY = [f"ispm-{n:03d}" for n in range(1, 31)]
"""The stop test's tasks: enough that a sample is still running on the second engine when it is caught."""
UNITS = 2


class Cluster:
    def __init__(self, cluster: Any, worker: Any) -> None:
        self.cluster = cluster
        self.worker = worker

    @property
    def address(self) -> str:
        return str(self.cluster.address)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with loopback_cluster(1, UNITS) as (started, (worker,)):
        yield Cluster(started, worker)


@pytest.fixture
def engine() -> Iterator[Engine]:
    with second_engine() as started:
        yield started


@pytest.fixture
def node_on(cluster: Cluster, engine: Engine) -> Iterator[str]:
    """A worker whose Docker engine is the second one; its node id."""
    with environment({"DOCKER_HOST": engine.host}):
        node = cluster.cluster.add_node(num_cpus=UNITS, resources={SANDBOX_RESOURCE: UNITS}, node_ip_address=LOOPBACK)
    try:
        cluster.cluster.wait_for_nodes()
        yield str(node.node_id)
    finally:
        cluster.cluster.remove_node(node)


def _data_root(client: Any) -> str:
    try:
        return str(client.info()["DockerRootDir"])
    finally:
        client.close()


def _graded(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.task_id, e.epoch) for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleGraded)]


def _events(run_dir: Path, name: str) -> list[dict[str, Any]]:
    events = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
    return [e for e in events if e.get("event") == name]


def test_a_gold_run_across_two_engines_ships_the_image_and_names_each_samples_engine(
    cluster: Cluster, engine: Engine, node_on: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    tag = resolve_image("replay")
    assert engine_image_ids(engine.client(), [tag]) == {tag: None}  # it starts empty
    # Every unit busy at once: each worker takes samples.
    spec = calibration_spec("replay", epochs=1, concurrency=2 * UNITS, tasks=TASKS, backend="ray")
    record = start_run(spec, run_dir, ray_address=cluster.address).record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    assert sorted(_graded(run_dir)) == [(t, 1) for t in TASKS]
    # The empty engine received the image the run recorded, by id, before the node was admitted to take samples.
    (recorded,) = record_images = image_ids(spec).values()
    assert engine_image_ids(engine.client(), [tag]) == {tag: recorded}, record_images
    (shipped,) = _events(run_dir, "cluster.image_shipped")
    assert shipped["tag"] == tag
    (admitted,) = _events(run_dir, "cluster.nodes_admitted")
    assert set(admitted["nodes"]) == {str(cluster.worker.node_id), node_on}
    # Each sample names its node and that node's engine.
    import docker

    roots = {str(cluster.worker.node_id): _data_root(docker.from_env()), node_on: str(engine.data_root)}
    assert {s.node for s in record.samples} == set(roots)
    for sample in record.samples:
        assert sample.engine is not None and sample.node is not None
        assert sample.engine.startswith(f"{os.uname().nodename}:{roots[sample.node]} ("), sample.engine
    assert all(s.attempts == [] for s in record.samples)


def test_an_engine_stopped_mid_run_is_the_nodes_fault_and_its_samples_run_on_a_healthy_node(
    cluster: Cluster, engine: Engine, node_on: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    spec = calibration_spec("replay", epochs=1, concurrency=2 * UNITS, tasks=MANY, backend="ray")
    found: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: found.setdefault("result", start_run(spec, run_dir, ray_address=cluster.address)), daemon=True
    )
    thread.start()
    try:
        caught = _caught_running(engine, thread)
        engine.stop()  # SIGTERM while it runs a sample
    finally:
        thread.join(timeout=300)
    assert caught, "no sample was seen running on the second engine"
    record = found["result"].record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    # No sample was charged: every one graded once, none failed.
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in MANY]
    assert sum(record.failures.values()) == 0
    finished = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleFinished)]
    assert len(finished) == len(MANY) and {e.output.status for e in finished} == {"ok"}
    # The tries lost on the stopped engine say so, and name its node; each such sample ran again on the healthy one.
    lost = [a for s in record.samples for a in s.attempts]
    assert lost and {a.node for a in lost} == {node_on} and {a.outcome for a in lost} == {"lost"}
    assert all("its Docker engine failed" in a.detail for a in lost), [a.detail for a in lost]
    assert all(s.node == str(cluster.worker.node_id) for s in record.samples if s.attempts)
    # The node was benched at once, not a black hole of tries: it loses the tries it held and at most those already
    # submitted when it was benched (a try's node list is fixed when it is submitted), never more than the run had out.
    assert len(lost) <= spec.concurrency
    assert [e["node"] for e in _events(run_dir, "cluster.node_benched")] == [node_on]
    assert containers_of(record.run_id) == []


def _expectations() -> NodeExpectations:
    return NodeExpectations.of_this_install(image_ids(calibration_spec("replay", tasks=TASKS, backend="ray")))


def test_a_load_that_hangs_past_its_limit_leaves_the_node_out(
    cluster: Cluster, engine: Engine, node_on: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    stalls: list[Any] = []
    stage = driver.stage_image

    def stalled(client: Any, tag: str, chunk_bytes: int = driver.CHUNK_BYTES) -> list[Any]:
        # The stream's last piece never arrives: the engine waits for it, as for a transfer that stalled.
        never = ray.remote(num_cpus=0)(lambda: time.sleep(3600)).remote()
        stalls.append(never)
        return [*stage(client, tag, chunk_bytes)[:2], never]

    monkeypatch.setattr(driver, "LOAD_TIMEOUT_S", 3.0)
    monkeypatch.setattr(driver, "stage_image", stalled)
    expected = _expectations()
    started = time.monotonic()
    with RayRunner.connect(cluster.address, "stalled", expected, candidate=None) as runner:
        took = time.monotonic() - started
        for ref in stalls:  # while this process owns it
            ray.cancel(ref, force=True)
        assert set(runner.agents) == {str(cluster.worker.node_id)}
        (reason,) = runner.left_out[node_on].reasons
    (tag,) = expected.images
    assert reason == f"node {node_on[:12]}: loading image {tag} took longer than 3 s"
    assert took < 60
    assert engine_image_ids(engine.client(), [tag]) == {tag: None}


def test_an_image_that_arrives_corrupted_leaves_the_node_out(
    cluster: Cluster, engine: Engine, node_on: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    stage = driver.stage_image

    def corrupted(client: Any, tag: str, chunk_bytes: int = driver.CHUNK_BYTES) -> list[Any]:
        # One byte flipped in the middle of the stream, as a bad link or disk would.
        pieces = [ray.get(ref) for ref in stage(client, tag, chunk_bytes)]
        middle = bytearray(pieces[len(pieces) // 2])
        middle[len(middle) // 2] ^= 0xFF
        pieces[len(pieces) // 2] = bytes(middle)
        return [ray.put(p) for p in pieces]

    monkeypatch.setattr(driver, "stage_image", corrupted)
    expected = _expectations()
    with RayRunner.connect(cluster.address, "corrupted", expected, candidate=None) as runner:
        assert set(runner.agents) == {str(cluster.worker.node_id)}
        (reason,) = runner.left_out[node_on].reasons
    (tag,) = expected.images
    assert reason.startswith(f"node {node_on[:12]}: "), reason
    # The engine refused the stream, or holds an image whose id is not the one recorded: never the one run.
    have = engine_image_ids(engine.client(), [tag])[tag]
    assert have != expected.images[tag]


def _caught_running(engine: Engine, running: threading.Thread) -> bool:
    """Whether a sandbox was seen running on ``engine`` while ``running`` lives (polled every 20 ms, 3 min at most)."""
    client = engine.client(timeout=5)
    try:
        deadline = time.monotonic() + 180
        while running.is_alive() and time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # it may answer slowly while it starts a sandbox
                if client.api.containers(filters={"label": "ispm.sandbox", "status": "running"}):
                    return True
            time.sleep(0.02)
        return False
    finally:
        client.close()


def test_on_one_machine_an_engine_that_stops_ends_the_run_interrupted_charging_no_sample(
    engine: Engine, tmp_path: Path
) -> None:
    import docker

    from runner.sandbox.docker import DockerBackend

    tasks = MANY[:12]
    tag = resolve_image("replay")
    main, second = docker.from_env(), engine.client()
    try:
        for _ in second.api.load_image(main.images.get(tag).save(named=tag)):
            pass
    finally:
        main.close()
        second.close()
    run_dir = tmp_path / "run"
    spec = calibration_spec("replay", epochs=1, concurrency=2, tasks=tasks, backend="docker")
    backend = DockerBackend(engine.client())
    found: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: found.setdefault("result", start_run(spec, run_dir, backend=backend)), daemon=True
    )
    thread.start()
    try:
        caught = _caught_running(engine, thread)
        engine.stop()  # SIGTERM while it runs a sample
    finally:
        thread.join(timeout=300)
        backend.close()
    assert caught, "no sample was seen running on the second engine"
    result = found["result"]
    assert result.outcome == "interrupted"
    because = result.interrupted_because or ""
    assert "the docker backend failed under sample" in because and "cannot reach the Docker engine" in because
    # No sample was charged: what was journaled ended ok, and the one the engine took down was not journaled.
    finished = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleFinished)]
    assert {e.output.status for e in finished} <= {"ok"} and len(finished) < len(tasks)
    assert sum(result.record.failures.values()) == 0
    # The engine is back (here: the main one): the resume runs what was left, and nothing twice.
    resumed = resume_run(run_dir)
    assert resumed.outcome == "completed"
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in tasks]
    assert resumed.record.scores is not None
    assert resumed.record.scores.dimensions["answer_correctness"].mean == 1.0
    assert containers_of(resumed.record.run_id) == []


def test_a_benched_node_whose_engine_comes_back_is_checked_again_and_takes_samples_again(
    cluster: Cluster, engine: Engine, node_on: str, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    spec = calibration_spec("replay", epochs=1, concurrency=2 * UNITS, tasks=MANY, backend="ray")
    found: dict[str, RunResult] = {}
    thread = threading.Thread(
        target=lambda: found.setdefault("result", start_run(spec, run_dir, ray_address=cluster.address)), daemon=True
    )
    thread.start()
    try:
        caught = _caught_running(engine, thread)
        engine.stop()
        deadline = time.monotonic() + 60
        while thread.is_alive() and time.monotonic() < deadline and not _events(run_dir, "cluster.node_benched"):
            time.sleep(0.05)
        engine.start()  # the operator restarts it: its images are still there
    finally:
        thread.join(timeout=300)
    assert caught, "no sample was seen running on the second engine"
    record = found["result"].record
    assert record.status == "completed"
    assert record.scores is not None and record.scores.dimensions["answer_correctness"].mean == 1.0
    graded = _graded(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in MANY]
    assert sum(record.failures.values()) == 0
    (back,) = _events(run_dir, "cluster.node_back")
    assert back["node"] == node_on
    # Checked again, it took samples again: some finished on it after it was back.
    since = datetime.fromisoformat(back["timestamp"])
    later = [
        e
        for e in read_entries(run_dir / JOURNAL_NAME)
        if isinstance(e, SampleFinished) and e.node == node_on and datetime.fromisoformat(e.ts) > since
    ]
    assert later and {e.output.status for e in later} == {"ok"}
    assert containers_of(record.run_id) == []


def test_an_engine_whose_disk_fills_during_a_load_leaves_the_node_out(cluster: Cluster) -> None:
    expected = _expectations()
    (tag,) = expected.images
    with second_engine(data_root_bytes=64 * 1024 * 1024) as small:  # the image takes about three times that
        with environment({"DOCKER_HOST": small.host}):
            node = cluster.cluster.add_node(
                num_cpus=UNITS, resources={SANDBOX_RESOURCE: UNITS}, node_ip_address=LOOPBACK
            )
        try:
            cluster.cluster.wait_for_nodes()
            with RayRunner.connect(cluster.address, "disk-full", expected, candidate=None) as runner:
                assert set(runner.agents) == {str(cluster.worker.node_id)}
                (reason,) = runner.left_out[str(node.node_id)].reasons
        finally:
            cluster.cluster.remove_node(node)
    assert reason.startswith(f"node {str(node.node_id)[:12]}: loading image {tag} failed: "), reason
    assert "no space left on device" in reason, reason
