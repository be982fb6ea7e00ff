"""Each shipped agent's start: container start to its first model call, beside the reference agent, in one run.

    .venv/bin/python bench/agents.py [--rounds 3] [--only mini-swe-agent ...]

Every agent image the checkout ships (``reference``, the baseline, then ``claude-code``, ``openai-agents``,
``mini-swe-agent``, and ``codex`` and ``gemini`` where ``SPECS`` has them) runs one sample per round through the real
sandbox (``DockerBackend``) and the real gateway, whose candidate is the scripted fake provider on loopback
(``tests/fake_provider``). The fake answers every request with a short text turn, so each agent stops soon after,
and notes when each sample's first request reached it. The figure is that moment less the end of the sandbox's start
phase (the container running): the agent's interpreter or binary starting, its imports and set-up, and its first
request through the gateway. The rounds visit the agents in turn, so drift hits all alike; the medians are printed
with their ratio to the reference agent's. Images that are missing are built first (not timed).

Bounded: ``--rounds`` samples per agent, each with a 60 s limit, on the local engine only. It prints figures; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from runner import log
from runner.gateway.server import Gateway
from runner.sandbox.backend import SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import SPECS, ensure_images
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

ROOT = Path(__file__).resolve().parent.parent
RUN = f"bench-agents-{uuid.uuid4().hex[:8]}"
BASELINE = "agent-reference"
CALIBRATION = ("agent-null", "agent-replay")  # our calibration agents call no model
KEY = "sk-bench-agents-not-a-real-key-0000"
# Claude Code speaks Messages and the Gemini agent Gemini's API: each gets a candidate of its own provider, so its
# start is not measured through a translation.
CANDIDATE = {"agent-claude-code": "anthropic/claude-bench-1", "agent-gemini": "google/gemini-bench-1"}
DEFAULT_CANDIDATE = "openai/gpt-bench-1"


def shipped_agents() -> list[str]:
    """The agent images the checkout ships that call a model, the baseline first."""
    names = [s.name for s in SPECS if s.name.startswith("agent-") and s.name not in CALIBRATION]
    return [BASELINE, *(n for n in names if n != BASELINE)]


def main(argv: list[str] | None = None) -> int:
    """Measure and print; see the module docs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="samples per agent (%(default)s)")
    parser.add_argument("--only", action="append", metavar="NAME", help="only this agent beside the baseline (repeat)")
    args = parser.parse_args(argv)
    log.configure()
    logging.getLogger().setLevel(logging.WARNING)
    sys.path.insert(0, str(ROOT / "tests"))
    fp = importlib.import_module("fake_provider")  # a test package, outside mypy's path

    agents = [n for n in shipped_agents() if not args.only or n == BASELINE or n.removeprefix("agent-") in args.only]
    refs = ensure_images(names=agents)
    task = catalog().tasks[0]
    arrivals: list[float] = []

    def answer(seen: Any) -> Any:  # every request: a short text turn, so the agent ends soon after
        arrivals.append(time.monotonic())
        return fp.Turn(text="Nothing to add.", usage=fp.Usage(100, 5))

    figures: dict[str, list[float]] = {name: [] for name in agents}
    ends: dict[str, list[float]] = {name: [] for name in agents}
    backend = DockerBackend()
    try:
        with fp.FakeProvider(responder=answer, remember=False) as fake:
            os.environ["OPENAI_API_KEY"] = os.environ["ANTHROPIC_API_KEY"] = os.environ["GEMINI_API_KEY"] = KEY
            os.environ["OPENAI_BASE_URL"], os.environ["ANTHROPIC_BASE_URL"] = fake.openai_base, fake.anthropic_base
            os.environ["GEMINI_BASE_URL"] = fake.gemini_base
            gateways = {c: Gateway(c) for c in {CANDIDATE.get(n, DEFAULT_CANDIDATE) for n in agents}}
            try:
                for round_number in range(1, args.rounds + 1):
                    for name in agents:
                        gateway = gateways[CANDIDATE.get(name, DEFAULT_CANDIDATE)]
                        spec = SampleSpec(
                            task_id=task.id,
                            run_id=RUN,
                            epoch=round_number,
                            image=refs[name].tag,
                            task_files=agent_files(task, time_limit_seconds=60),
                            time_limit_s=60,
                            env={"ISPM_MODEL": "bench-model"},
                        )
                        arrivals.clear()
                        with gateway_link(gateway, spec.sample_id) as (folder, token):
                            started = time.monotonic()
                            out = backend.run_sample(
                                spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token})
                            )
                        if not arrivals:
                            print(f"{name}: no model call ({out.status}: {out.error})", file=sys.stderr)
                            return 1
                        running = started + out.timings.create + out.timings.start
                        figures[name].append(arrivals[0] - running)
                        ends[name].append(out.timings.agent)
            finally:
                for gateway in gateways.values():
                    gateway.close()
    finally:
        backend.sweep(RUN)
        backend.close()

    baseline = statistics.median(figures[BASELINE])
    print(f"container start to first model call, median of {args.rounds} rounds (the fake provider on loopback):")
    for name in agents:
        median = statistics.median(figures[name])
        label = name.removeprefix("agent-") + (" (baseline)" if name == BASELINE else "")
        print(
            f"  {label:<24} {median:6.2f} s   {median / baseline:6.2f}x"
            f"   (whole agent phase {statistics.median(ends[name]):.2f} s)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
