"""Benchmark: the ``ray`` backend against the local Docker backend, sample for sample, on this machine.

The same gold replay samples run through ``DockerBackend`` threads and through ``RayRunner`` on a Ray cluster
started here (a head with no sandbox unit and one or two worker nodes, all on the local Docker engine and on
loopback only: ``runner.cluster.loopback``, as in the tests), the two measured in alternation, in rounds, so the
machine's other load weighs on both alike. It prints:

- per-sample latency as the driver sees it (submit to result, median) at concurrency 2 and 8, and the ratio of the
  cluster's to the local backend's (the target is at most 1.3x);
- throughput (samples/s) at concurrency 8 with one worker node and with two.

``bench/ray.py ship`` measures instead what it costs a new node to receive the agent images: through the object
store, as the driver ships them, against a plain ``docker save | docker load`` pipe, both into an empty engine of
their own (``runner.sandbox.docker.spare``). About 3 minutes here.

Every node here shares one Docker engine and the same cores, so a second node adds sandbox units, not capacity:
the figures measure what the cluster path costs, not how it scales across hosts. ``SAMPLES`` (default 16) is the
samples per measurement. Takes about 4 minutes on a 2-core machine.

Run: .venv/bin/python bench/ray.py  (or: .venv/bin/python bench/ray.py ship)
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from runner.cluster.driver import RayRunner, stage_image
from runner.cluster.loopback import loopback_cluster
from runner.cluster.model import NodeExpectations
from runner.contract import SampleOutput
from runner.run.recordings import write_recordings
from runner.sandbox.backend import SampleSpec
from runner.sandbox.docker import DockerBackend
from runner.sandbox.transfer import CHUNK_BYTES
from runner.sandbox.trial import resolve_image
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

TASKS = ["ispm-001", "ispm-010", "ispm-030", "ispm-060", "ispm-090", "ispm-127", "ispm-002", "ispm-003"]
CONCURRENCY = (2, 8)
ROUNDS = 2


Sampler = Callable[[SampleSpec], SampleOutput]


def sample_specs(count: int, image: str, replay: Path, run_id: str) -> list[SampleSpec]:
    """``count`` replay samples cycling over :data:`TASKS`, each its own epoch so sample ids never collide."""
    tasks = catalog().by_id
    return [
        SampleSpec(
            task_id=TASKS[i % len(TASKS)],
            epoch=i + 1,
            run_id=run_id,
            image=image,
            task_files=agent_files(tasks[TASKS[i % len(TASKS)]], time_limit_seconds=900),
            replay_dir=replay,
        )
        for i in range(count)
    ]


class Figures:
    """Per-sample latencies and throughputs of one way of running samples at one concurrency, over rounds."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.throughputs: list[float] = []

    def latency(self) -> float:
        """Median per-sample latency (seconds)."""
        return statistics.median(self.latencies)

    def throughput(self) -> float:
        """Median samples per second over the rounds."""
        return statistics.median(self.throughputs)


def measure(run: Sampler, specs: list[SampleSpec], concurrency: int, into: Figures | None = None) -> None:
    """Run ``specs`` ``concurrency`` at a time, adding each one's latency and the throughput to ``into``."""
    latencies: list[float] = []

    def one(spec: SampleSpec) -> None:
        started = time.perf_counter()
        output = run(spec)
        latencies.append(time.perf_counter() - started)
        if output.status != "ok":
            raise SystemExit(f"{spec.sample_id}: {output.status}: {output.error}")

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, specs))
    if into is not None:
        into.latencies += latencies
        into.throughputs.append(len(specs) / (time.perf_counter() - started))


def compare(
    workers: int, expected: NodeExpectations, specs: list[SampleSpec], local: Sampler, concurrency: tuple[int, ...]
) -> dict[int, tuple[Figures, Figures]]:
    """(local, cluster) figures per concurrency on a fresh cluster of ``workers`` nodes, the two measured in
    alternation so that the machine's other load weighs on both alike."""
    top = max(concurrency)
    with (
        loopback_cluster(workers, top // workers) as (cluster, _),
        RayRunner.connect(cluster.address, "bench-ray", expected, candidate=None) as runner,
    ):

        def remote(spec: SampleSpec) -> SampleOutput:
            return runner.run_sample(spec).output

        measure(remote, specs[: 2 * top], top)  # start and warm every worker process the nodes keep
        figures = {c: (Figures(), Figures()) for c in concurrency}
        for _ in range(ROUNDS):
            for c in concurrency:
                measure(local, specs, c, figures[c][0])
                measure(remote, specs, c, figures[c][1])
        return figures


SHIPPED = ("replay", "claude-code")
"""The agent images whose shipping ``ship`` measures: a small one on the base image, and the largest."""


def _empty(engine: Any) -> None:
    """Remove every image from the spare engine (ours alone), so each load starts from nothing, as on a new node."""
    client = engine.client()
    try:
        for image in client.images.list(all=True):
            client.images.remove(image.id, force=True)
    finally:
        client.close()


def _pipe(tag: str, engine: Any, host: str | None) -> None:
    """``docker save TAG`` on the engine at ``host`` (the environment's default: None) ``| docker load`` into the
    spare engine: the baseline."""
    here = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"} | ({"DOCKER_HOST": host} if host else {})
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE, env=here)
    load = subprocess.run(
        ["docker", "load", "-q"],
        stdin=save.stdout,
        env={**os.environ, "DOCKER_HOST": engine.host},
        capture_output=True,
        check=True,
    )
    assert save.stdout is not None
    save.stdout.close()
    if save.wait() != 0 or b"Loaded image" not in load.stdout:
        raise SystemExit(f"docker save | docker load of {tag} failed: {load.stderr.decode()}")


def ship(rounds: int) -> None:
    """Print, per agent image of :data:`SHIPPED`, the time to put it on an empty engine through the object store
    (the driver's ``docker save`` in 8 MiB pieces, a node agent's ``docker load``) against a plain
    ``docker save | docker load`` pipe on the same machine, the two in alternation, ``rounds`` times each."""
    import docker
    import ray

    from runner.sandbox.docker.spare import spare_engine

    # Before the cluster's block, which points this process's DOCKER_HOST at the spare engine for the node it starts.
    main, host = docker.from_env(), os.environ.get("DOCKER_HOST")
    tags = {agent: resolve_image(agent) for agent in SHIPPED}
    with (
        spare_engine() as engine,
        loopback_cluster(1, 1, {"DOCKER_HOST": engine.host}) as (cluster, _),
        RayRunner.connect(
            cluster.address, "bench-ship", NodeExpectations.of_this_install({}), candidate=None
        ) as runner,
    ):
        (agent,) = runner.agents.values()
        for name, tag in tags.items():
            through_ray: list[float] = []
            piped: list[float] = []
            size = 0
            for _ in range(rounds):
                _empty(engine)
                started = time.perf_counter()
                chunks = stage_image(main, tag)
                ray.get(agent.load_image.remote(chunks))
                through_ray.append(time.perf_counter() - started)
                size = (len(chunks) - 1) * CHUNK_BYTES + len(ray.get(chunks[-1]))
                del chunks
                _empty(engine)
                started = time.perf_counter()
                _pipe(tag, engine, host)
                piped.append(time.perf_counter() - started)
            ray_s, pipe_s = statistics.median(through_ray), statistics.median(piped)
            mb = size / 1e6
            print(
                f"ship {name} ({mb:.0f} MB saved) to an empty engine: object store {ray_s:.1f} s ({mb / ray_s:.0f} "
                f"MB/s), docker save | docker load {pipe_s:.1f} s ({mb / pipe_s:.0f} MB/s), ratio "
                f"{ray_s / pipe_s:.2f}x; median of {rounds}, load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
            )
    main.close()


def main() -> None:
    # Run as a script, this file's folder comes first on sys.path, and this file (ray.py) would shadow the ray
    # package: every ray import is inside a function, so dropping the folder here is early enough.
    folder = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != folder]
    if sys.argv[1:] == ["ship"]:
        ship(int(os.environ.get("ROUNDS", "2")))
        return
    count = int(os.environ.get("SAMPLES", "16"))
    image = resolve_image("replay")  # built by `make images`
    import docker

    client = docker.from_env()
    image_id = str(client.images.get(image).id)
    client.close()
    expected = NodeExpectations.of_this_install({image: image_id})
    tasks, truths = catalog().by_id, catalog().truths
    with tempfile.TemporaryDirectory() as tmp:
        replay = write_recordings([tasks[t] for t in TASKS], truths, Path(tmp) / "replay")
        specs = sample_specs(count, image, replay, f"bench-ray-{secrets.token_hex(3)}")
        backend = DockerBackend()
        try:
            measure(backend.run_sample, specs[:2], 2)  # warm the engine's caches
            two = compare(2, expected, specs, backend.run_sample, CONCURRENCY)
            one = compare(1, expected, specs, backend.run_sample, (max(CONCURRENCY),))
        finally:
            backend.close()
    for c in CONCURRENCY:
        here, there = two[c]
        print(
            f"concurrency {c}: per sample (median, submit to result) local docker {here.latency() * 1000:.0f} ms, "
            f"ray on 2 workers {there.latency() * 1000:.0f} ms, ratio {there.latency() / here.latency():.2f}x; "
            f"throughput {here.throughput():.2f} vs {there.throughput():.2f} samples/s"
        )
    c = max(CONCURRENCY)
    print(
        f"throughput at concurrency {c}: 1 worker node {one[c][1].throughput():.2f} samples/s (local docker alongside "
        f"{one[c][0].throughput():.2f}), 2 worker nodes {two[c][1].throughput():.2f} samples/s (local docker alongside "
        f"{two[c][0].throughput():.2f}); {count} samples x {ROUNDS} rounds each, one engine, {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
