"""The sandbox runner's per-sample overhead against a bare ``docker run``, and its throughput.

    .venv/bin/python bench/sandbox.py [--samples 20] [--throughput 12]

- **Overhead.** One null-agent sample through ``DockerBackend.run_sample``, all of it: create (image
  inspect, volume, container), start (attach, start, hold ``/output``), the agent (the container's main
  process in the held layout) until the engine reports its exit, collection and validation, and removal
  (container, volume, held descriptor, host folder), against ``docker run --rm <base> true`` (the CLI:
  create, attach, start, wait, remove). Nothing is deferred: ``run_sample`` returns after the removal, so
  the clock stops only when every resource is gone. The two alternate, one of each per round, so drift hits
  both alike; the medians of ``--samples`` rounds give the ratio. Target: at most 1.5×.
- **Context**, in the same rounds: the null agent under a plain ``docker run`` (it pays the same cold Python
  start), and the runner in the keeper layout (agent as an exec under a uid-65534 keeper; what a runner
  that cannot hold the engine's volumes uses).
- **Throughput.** ``--throughput`` null samples at concurrency 1, 2 and 4 (threads, one backend), as
  samples per second.

Bounded loops on the local engine only. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

from runner import log
from runner.sandbox.backend import SampleSpec
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ensure_images
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

RUN = f"bench-sandbox-{uuid.uuid4().hex[:8]}"
PHASES = ("create", "start", "agent", "collect", "remove")
SETTLE_S = 0.3


def docker_run(image: str, *command: str, options: tuple[str, ...] = ()) -> float:
    """Seconds for one ``docker run --rm <options> <image> <command>``."""
    started = time.perf_counter()
    subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--label", f"ispm.bench={RUN}", *options, image, *command],
        check=True,
    )
    return time.perf_counter() - started


# The null agent under plain `docker run`, for context: it pays the same cold Python start as the runner's.
NULL_OPTIONS = ("--tmpfs", "/output:uid=10001,gid=10001,size=32m")


def main(argv: list[str] | None = None) -> int:
    """Measure and print; see the module docs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="rounds of the overhead comparison (%(default)s)")
    parser.add_argument("--throughput", type=int, default=12, help="samples per concurrency level (%(default)s)")
    args = parser.parse_args(argv)
    log.configure()
    logging.getLogger().setLevel(logging.WARNING)  # per-sample info lines would be most of the output

    refs = ensure_images()
    base, null = refs["base"].tag, refs["agent-null"].tag
    task = catalog().tasks[0]
    spec = SampleSpec(task_id=task.id, run_id=RUN, image=null, task_files=agent_files(task), time_limit_s=60)
    backend = DockerBackend()
    keeper = DockerBackend(sweep_on_start=False, hold_output=False)
    try:
        for _ in range(2):  # warm the engine's caches and our connection pool
            docker_run(base, "true")
            docker_run(null, options=NULL_OPTIONS)
            backend.run_sample(spec)
            keeper.run_sample(spec)

        bare: list[float] = []
        bare_null: list[float] = []
        ours: list[float] = []
        ours_keeper: list[float] = []
        phases: dict[str, list[float]] = {p: [] for p in PHASES}
        for _ in range(args.samples):
            bare.append(docker_run(base, "true"))
            # The engine finishes some work after `docker run --rm` returns; let it settle before each measure.
            time.sleep(SETTLE_S)
            bare_null.append(docker_run(null, options=NULL_OPTIONS))
            time.sleep(SETTLE_S)
            for runner, times in ((backend, ours), (keeper, ours_keeper)):
                started = time.perf_counter()
                out = runner.run_sample(spec)
                times.append(time.perf_counter() - started)
                if out.status != "ok":
                    print(f"sample failed: {out.status}: {out.error}", file=sys.stderr)
                    return 1
                if runner is backend:
                    for phase in PHASES:
                        phases[phase].append(getattr(out.timings, phase))
                time.sleep(SETTLE_S)

        bare_median, ours_median = statistics.median(bare), statistics.median(ours)
        layout = "held" if backend.holds_output else "keeper"
        print(f"per-sample overhead, median of {args.samples}:")
        print(f"  docker run --rm base true   {bare_median * 1000:7.1f} ms")
        print(f"  runner, null agent          {ours_median * 1000:7.1f} ms   ({layout} layout)")
        print(f"  ratio                       {ours_median / bare_median:7.2f}x   (target <= 1.5x)")
        null_median = statistics.median(bare_null)
        print(f"  for context: docker run --rm agent-null (plain, no lockdown) {null_median * 1000:.1f} ms,")
        print(f"  runner / that = {ours_median / null_median:.2f}x (the null agent's cold Python start is in both)")
        keeper_median = statistics.median(ours_keeper)
        print(f"  for context: keeper layout {keeper_median * 1000:.1f} ms, {keeper_median / bare_median:.2f}x")
        print(
            "  runner phases (median ms):  "
            + "  ".join(f"{p} {statistics.median(phases[p]) * 1000:.1f}" for p in PHASES)
        )

        print(f"throughput, {args.throughput} null samples:")
        for workers in (1, 2, 4):
            specs = [spec.model_copy(update={"epoch": i + 1}) for i in range(args.throughput)]
            started = time.perf_counter()
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(backend.run_sample, specs))
            elapsed = time.perf_counter() - started
            failed = sum(r.status != "ok" for r in results)
            rate = args.throughput / elapsed
            print(f"  concurrency {workers}: {rate:5.2f} samples/s ({elapsed:.1f} s, {failed} failed)")
    finally:
        backend.sweep(RUN)
        backend.close()
        keeper.close()
        leftover = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=ispm.bench={RUN}"], capture_output=True, text=True, check=False
        ).stdout.split()
        if leftover:
            subprocess.run(["docker", "rm", "-f", *leftover], capture_output=True, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
