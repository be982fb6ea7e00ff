"""Each agent image's start: from its container's start to its first model call, beside the reference agent.

    .venv/bin/python bench/agent_start.py [--rounds 5] [--agents reference,claude-code,openai-agents,codex]

One sample per agent per round, alternating agents within a round so that drift hits all alike, through the real
sandbox (``DockerBackend``) and gateway, whose candidate is the scripted fake provider on loopback (the fake ends
every request with a short text, so each agent stops after one call). The start is the engine's ``start`` event of
the sample's container (nanoseconds); the first call is when the fake received the agent's first request. Prints
the median and range per agent; asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import docker

from runner.gateway.server import Gateway
from runner.sandbox.backend import SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ensure_images
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

ROOT = Path(__file__).resolve().parents[1]
RUN = f"bench-agent-start-{uuid.uuid4().hex[:8]}"
#: Agent → (image, candidate, the model it names).
AGENTS: dict[str, tuple[str, str, str]] = {
    "reference": ("agent-reference", "openai/gpt-bench-1", "gpt-bench-1"),
    "claude-code": ("agent-claude-code", "anthropic/claude-bench-1", "claude-bench-1"),
    "openai-agents": ("agent-openai-agents", "openai/gpt-bench-1", "gpt-bench-1"),
    "codex": ("agent-codex", "openai/gpt-bench-1", "gpt-bench-1"),
}


def one_start(backend: DockerBackend, engine: Any, fake: Any, tag: str, candidate: str, model: str) -> float:
    """Seconds from the container's start to the agent's first model call, for one sample."""
    task = catalog().tasks[0]
    spec = SampleSpec(
        task_id=task.id,
        run_id=RUN,
        image=tag,
        task_files=agent_files(task, time_limit_seconds=60),
        time_limit_s=60,
        env={"ISPM_MODEL": model},
    )
    first: list[int] = []

    def answer(seen: object) -> object:
        if not first:
            first.append(time.time_ns())
        return fake_module.Turn(text="done", usage=fake_module.Usage(10, 2))

    fake.responder = answer
    since = time.time() - 1
    with Gateway(candidate) as gateway, gateway_link(gateway, spec.sample_id) as (folder, token):
        backend.run_sample(spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token}))
    filters = {"type": "container", "event": "start", "label": f"ispm.run={RUN}"}
    starts = [e["timeNano"] for e in engine.events(since=since, until=time.time(), filters=filters, decode=True)]
    if not first or not starts:
        raise RuntimeError(f"{tag}: no model call ({len(first)}) or no start event ({len(starts)})")
    return float(first[0] - max(starts)) / 1e9


fake_module: Any = None


def main() -> None:
    global fake_module
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--agents", default=",".join(AGENTS))
    args = parser.parse_args()
    names = [a for a in args.agents.split(",") if a]
    sys.path.insert(0, str(ROOT / "tests"))
    fake_module = importlib.import_module("fake_provider")  # a test package, outside mypy's path
    refs = ensure_images()
    backend, engine = DockerBackend(), docker.from_env()
    figures: dict[str, list[float]] = {name: [] for name in names}
    try:
        with fake_module.FakeProvider(remember=False) as fake:
            for variable in ("OPENAI", "ANTHROPIC"):
                os.environ[f"{variable}_API_KEY"] = f"bench-{variable.lower()}-key"
                os.environ[f"{variable}_BASE_URL"] = fake.openai_base if variable == "OPENAI" else fake.url
            for _ in range(args.rounds):
                for name in names:
                    image, candidate, model = AGENTS[name]
                    figures[name].append(one_start(backend, engine, fake, refs[image].tag, candidate, model))
    finally:
        backend.sweep(RUN)
        backend.close()
        engine.close()
    print(f"container start -> first model call, {args.rounds} rounds (median, min-max):")
    for name, seconds in figures.items():
        print(f"  {name:14} {statistics.median(seconds):6.2f} s   {min(seconds):.2f}-{max(seconds):.2f} s")


if __name__ == "__main__":
    main()
