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
- **Marginal cost of a sample in a run** (``--marginal``, or alone with ``--marginal-only``): whole null-agent runs
  as a user starts them (``ispm demo --agent null``, a fresh process: start-up, preflight, journal, grading, record
  and report included; its backend removes each sample behind it and waits for the removals before the record, so
  the process's exit still comes after every removal) of N and 2N samples, against N and 2N bare ``docker run --rm
  --network none`` of the base image (``true``) at the same concurrency (threads), at concurrency 1 and 2. A
  sample's marginal cost is the difference over N; the run's fixed cost (before its first sample and after its last)
  is what is left: 2 T(N) - T(2N). The batches of a round run back to back in an order that rotates each round, so
  drift and the other loads of a shared machine hit each alike; each round gives one ratio, and the spread of the
  rounds says how noisy the machine was. Targets: a sample's marginal cost at most 1.15x the bare run's; the fixed
  cost at most 1.35 s (half of the 2.7 s measured before). For context, the null agent under a plain ``docker run``
  (the same Python start in the container as in the runner's samples) is measured in the same rounds. With
  ``--before``, the earlier checkout's runs use its own null-agent image (its tag), so a change to the agent counts
  in the comparison. First, one-sample runs (mostly fixed cost), their wall and CPU seconds: CPU hardly moves with a
  shared machine's other loads. ``--before CHECKOUT`` runs an earlier checkout's ``ispm`` in the same rounds, for
  both.

Bounded loops on the local engine only. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

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


ISPM = Path(sys.executable).with_name("ispm")
MARGINAL_TARGET = 1.15
FIXED_TARGET_S = 1.35  # half of the 2.7 s measured before (issue 32)


def bare_batch(image: str, count: int, workers: int, *command: str, options: tuple[str, ...] = ()) -> float:
    """Seconds for ``count`` bare ``docker run``s, ``workers`` at a time."""
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(lambda _: docker_run(image, *command, options=options), range(count)))
    return time.perf_counter() - started


def run_batch(task_ids: list[str], workers: int, folder: Path, code: Path | None = None) -> float:
    """Seconds for one ``ispm demo --agent null`` of ``task_ids`` (one epoch), ``workers`` at a time, from the
    process's start to its exit; ``code``: another checkout's ``runner`` (a version before), else this one."""
    args = [str(ISPM), "demo", "--agent", "null", "--concurrency", str(workers), "--run-dir", str(folder)]
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    started = time.perf_counter()
    subprocess.run([*args, *(a for t in task_ids for a in ("--task", t))], check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def marginal(rounds: int, n: int, base: str, null: str, before: Path | None = None) -> None:
    """The marginal cost of a sample in a run against a bare ``docker run``, and the run's fixed cost; see the
    module docs. ``before``: a checkout of an earlier version, whose runs join each round as a fourth kind."""
    ids = sorted(t.id for t in catalog().tasks)[: 2 * n]
    scratch = Path(tempfile.mkdtemp(prefix="bench-sandbox-runs-"))
    print(f"marginal cost of a sample: runs of {n} and {2 * n} null samples against as many bare docker runs, "
          f"{rounds} rounds")  # fmt: skip
    for workers in (1, 2):
        times: dict[tuple[str, int], list[float]] = {}
        for number in range(rounds):
            kinds = ("bare", "run", "null") + (("before",) if before is not None else ())
            batches: list[tuple[str, int]] = [(kind, k) for kind in kinds for k in (n, 2 * n)]
            shift = number % len(batches)
            for kind, k in batches[shift:] + batches[:shift]:
                if kind == "bare":
                    took = bare_batch(base, k, workers, "true")
                elif kind == "null":
                    took = bare_batch(null, k, workers, options=NULL_OPTIONS)
                elif kind == "before":
                    took = run_batch(ids[:k], workers, scratch / f"c{workers}-r{number}-{k}-before", before)
                else:
                    took = run_batch(ids[:k], workers, scratch / f"c{workers}-r{number}-{k}")
                times.setdefault((kind, k), []).append(took)
                time.sleep(SETTLE_S)
        per = {kind: [(b - a) / n for a, b in zip(times[kind, n], times[kind, 2 * n], strict=True)]
               for kind in kinds}  # fmt: skip
        ratios = [r / b for r, b in zip(per["run"], per["bare"], strict=True)]
        fixed = [2 * a - b for a, b in zip(times["run", n], times["run", 2 * n], strict=True)]
        ratio = statistics.median(ratios)
        print(f"  concurrency {workers}:")
        print(f"    bare docker run --rm --network none base true  {_ms(per['bare'])} per sample")
        print(f"    ispm demo --agent null                         {_ms(per['run'])} per sample")
        print(
            f"    ratio {ratio:5.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})   target <= {MARGINAL_TARGET}x: "
            f"{'ok' if ratio <= MARGINAL_TARGET else 'MISSED'}"
        )
        null_ratios = [r / b for r, b in zip(per["run"], per["null"], strict=True)]
        print(
            f"    for context: docker run --rm agent-null (its Python start, no lockdown) {_ms(per['null'])} per "
            f"sample; run / that {statistics.median(null_ratios):.2f}x (rounds {min(null_ratios):.2f}-"
            f"{max(null_ratios):.2f})"
        )
        print(
            f"    fixed cost of a run {statistics.median(fixed):5.2f} s (rounds {min(fixed):.2f}-{max(fixed):.2f})   "
            f"target <= {FIXED_TARGET_S} s: {'ok' if statistics.median(fixed) <= FIXED_TARGET_S else 'MISSED'}"
        )
        if before is not None:
            was = [2 * a - b for a, b in zip(times["before", n], times["before", 2 * n], strict=True)]
            ratios_before = [r / b for r, b in zip(per["before"], per["bare"], strict=True)]
            halves = [f / w for f, w in zip(fixed, was, strict=True)]
            ratio_was = statistics.median(ratios_before)
            print(
                f"    before ({before}): {_ms(per['before'])} per sample, ratio {ratio_was:.2f}x "
                f"(rounds {min(ratios_before):.2f}-{max(ratios_before):.2f})"
            )
            print(
                f"      fixed cost {statistics.median(was):.2f} s (rounds {min(was):.2f}-{max(was):.2f}); now / before "
                f"{statistics.median(halves):.2f} (rounds {min(halves):.2f}-{max(halves):.2f})"
            )


def one_sample_runs(rounds: int, before: Path | None) -> None:
    """A run's fixed cost seen through one-sample runs, which are mostly that: wall and CPU seconds of the
    ``ispm demo`` process (its children's CPU as ``getrusage`` counts it), this checkout and ``before`` in turn.
    CPU time hardly moves with the machine's other loads, so it says what changed where the wall clock is noisy."""
    task = sorted(t.id for t in catalog().tasks)[0]
    scratch = Path(tempfile.mkdtemp(prefix="bench-sandbox-one-"))
    kinds: list[tuple[str, Path | None]] = [("now", None)] + ([("before", before)] if before is not None else [])
    wall: dict[str, list[float]] = {k: [] for k, _ in kinds}
    cpu: dict[str, list[float]] = {k: [] for k, _ in kinds}
    for number in range(rounds):
        for label, code in kinds if number % 2 == 0 else kinds[::-1]:
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall[label].append(run_batch([task], 1, scratch / f"{label}-{number}", code))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[label].append(after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime)
            time.sleep(SETTLE_S)
    print(f"one-sample runs (ispm demo --agent null --task {task}), {rounds} rounds, median (range):")
    for label, _ in kinds:
        w, c = wall[label], cpu[label]
        print(
            f"  {label:6s} wall {statistics.median(w):5.2f} s ({min(w):.2f}-{max(w):.2f})   "
            f"CPU {statistics.median(c):5.2f} s ({min(c):.2f}-{max(c):.2f})"
        )
    if before is not None:
        walls = [a / b for a, b in zip(wall["now"], wall["before"], strict=True)]
        cpus = [a / b for a, b in zip(cpu["now"], cpu["before"], strict=True)]
        print(
            f"  now / before: wall {statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f}), "
            f"CPU {statistics.median(cpus):.2f} ({min(cpus):.2f}-{max(cpus):.2f})"
        )


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:6.1f} ms (rounds {min(values) * 1000:.0f}-{max(values) * 1000:.0f})"


def main(argv: list[str] | None = None) -> int:
    """Measure and print; see the module docs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20, help="rounds of the overhead comparison (%(default)s)")
    parser.add_argument("--throughput", type=int, default=12, help="samples per concurrency level (%(default)s)")
    parser.add_argument("--marginal", type=int, default=3, metavar="ROUNDS", help="rounds of runs (%(default)s)")
    parser.add_argument(
        "--marginal-n", type=int, default=10, metavar="N", help="samples of the smaller run (%(default)s)"
    )
    parser.add_argument("--marginal-only", action="store_true", help="only the marginal cost of a sample in a run")
    parser.add_argument("--one-sample", type=int, default=6, metavar="ROUNDS", help="one-sample runs (%(default)s)")
    parser.add_argument("--one-sample-only", action="store_true", help="only the one-sample runs")
    parser.add_argument(
        "--before", type=Path, metavar="CHECKOUT", help="also run an earlier checkout's ispm in the same rounds"
    )
    args = parser.parse_args(argv)
    log.configure()
    logging.getLogger().setLevel(logging.WARNING)  # per-sample info lines would be most of the output

    refs = ensure_images()
    if args.marginal_only:
        one_sample_runs(args.one_sample, args.before)
        marginal(args.marginal, args.marginal_n, refs["base"].tag, refs["agent-null"].tag, args.before)
        return 0
    if args.one_sample_only:
        one_sample_runs(args.one_sample, args.before)
        return 0
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
        if args.marginal:
            one_sample_runs(args.one_sample, args.before)
            marginal(args.marginal, args.marginal_n, base, null, args.before)
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
