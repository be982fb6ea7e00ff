"""Each agent image's start: container start to its first model call, through the real sandbox and gateway.

    .venv/bin/python bench/agent_start.py [--samples 7] [IMAGE ...]

For each image (default: every shipped agent and ``agent-reference``, alternating, one sample of each per round, so
drift hits all alike): one sample of ``ispm-001`` through ``DockerBackend.run_sample`` behind a real ``Gateway``
whose candidate is the scripted fake provider on loopback, answering every request with a short text. The clock
starts at the engine's ``start`` event for the sample's container (``docker events``, to the nanosecond) and stops
when the fake provider receives the first request: the agent's interpreter start, its imports, its set-up, the
forwarder and the gateway's hop. ``ISPM_MAX_TURNS=1``: nothing after the first call is measured. Each image gets a
candidate of the provider its agent speaks natively (:data:`CANDIDATES`), so nothing is translated.

Bounded loops on the local engine only. It prints the median and the spread per image, and its ratio to the
reference agent's median; it asserts nothing.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import docker

from runner import log
from runner.gateway.model import ClientSettings
from runner.gateway.server import Gateway
from runner.sandbox.backend import LABEL_RUN, LABEL_SAMPLE, SampleSpec, gateway_link
from runner.sandbox.docker import DockerBackend
from runner.sandbox.images import ensure_images
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

ROOT = Path(__file__).resolve().parent.parent
RUN = f"bench-agent-start-{uuid.uuid4().hex[:8]}"
KEY = f"bench-{uuid.uuid4().hex}"  # the fake provider takes any key
SHIPPED = [
    "agent-reference",
    "agent-claude-code",
    "agent-openai-agents",
    "agent-codex",
    "agent-mini-swe-agent",
    "agent-gemini",
]
#: The candidate each image's agent speaks to natively; any other image gets the first.
CANDIDATES = {
    "agent-reference": "openai/gpt-bench",
    "agent-claude-code": "anthropic/claude-bench",
    "agent-gemini": "google/gemini-bench",
}


class Clock:
    """When each sample's container started (by the engine's events) and its first model call arrived."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.first_call: dict[str, float] = {}
        self.current = ""  # the sample being run: the fake provider cannot tell whose request it answers
        self._lock = threading.Lock()

    def watch(self) -> None:
        """Record every container start labelled with this run (a daemon thread, for the process's life)."""
        engine = docker.from_env()
        filters = {"type": "container", "event": "start", "label": f"{LABEL_RUN}={RUN}"}
        for event in engine.events(decode=True, filters=filters):
            sample = event.get("Actor", {}).get("Attributes", {}).get(LABEL_SAMPLE, "")
            with self._lock:
                self.started.setdefault(sample, event["timeNano"] / 1e9)

    def called(self) -> None:
        with self._lock:
            self.first_call.setdefault(self.current, time.time())

    def seconds(self, sample: str) -> float | None:
        """Container start to first call for ``sample``, once both are known."""
        deadline = time.monotonic() + 5  # the event stream may lag the sample's end a little
        while time.monotonic() < deadline:
            with self._lock:
                if sample in self.started and sample in self.first_call:
                    return self.first_call[sample] - self.started[sample]
            time.sleep(0.05)
        return None


def main(argv: list[str] | None = None) -> int:
    """Measure and print; see the module docs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=7, help="samples per image (%(default)s)")
    parser.add_argument("images", nargs="*", default=SHIPPED, help="image names (%(default)s)")
    args = parser.parse_args(argv)
    log.configure()
    logging.getLogger().setLevel(logging.WARNING)
    sys.path.insert(0, str(ROOT / "tests"))
    fp: Any = importlib.import_module("fake_provider")  # a test package, outside mypy's path

    refs = ensure_images()
    task = next(t for t in catalog().tasks if t.id == "ispm-001")
    clock = Clock()
    threading.Thread(target=clock.watch, daemon=True).start()
    figures: dict[str, list[float]] = {name: [] for name in args.images}
    backend = DockerBackend()

    def answer(seen: Any) -> Any:
        clock.called()
        return fp.Turn(text="done", usage=fp.Usage(10, 2))

    try:
        with fp.FakeProvider(responder=answer, remember=False) as fake:
            for name, value in {
                "GEMINI_API_KEY": KEY,
                "GEMINI_BASE_URL": fake.gemini_base,
                "OPENAI_API_KEY": KEY,
                "OPENAI_BASE_URL": fake.openai_base,
                "ANTHROPIC_API_KEY": KEY,
                "ANTHROPIC_BASE_URL": fake.anthropic_base,
            }.items():
                os.environ[name] = value
            gateways = {
                name: Gateway(
                    CANDIDATES.get(name, CANDIDATES["agent-reference"]),
                    settings=ClientSettings(max_attempts=1),
                )
                for name in args.images
            }
            try:
                for epoch in range(1, args.samples + 1):
                    for name in args.images:
                        spec = SampleSpec(
                            task_id=task.id,
                            run_id=RUN,
                            epoch=epoch + 1000 * args.images.index(name),
                            image=refs[name].tag,
                            task_files=agent_files(task, time_limit_seconds=60),
                            time_limit_s=60,
                            env={"ISPM_MODEL": "bench", "ISPM_MAX_TURNS": "1"},
                        )
                        clock.current = spec.sample_id
                        with gateway_link(gateways[name], spec.sample_id) as (folder, token):
                            backend.run_sample(
                                spec.model_copy(update={"gateway_socket_dir": folder, "gateway_token": token})
                            )
                        seconds = clock.seconds(spec.sample_id)
                        if seconds is not None:
                            figures[name].append(seconds)
            finally:
                for gateway in gateways.values():
                    gateway.close()
    finally:
        backend.sweep(RUN)
        backend.close()
    print(f"container start to first model call, {args.samples} samples each, load {os.getloadavg()[0]:.1f}:")
    baseline = figures.get("agent-reference") or []
    for name, values in figures.items():
        if values:
            low, high, median = min(values), max(values), statistics.median(values)
            ratio = f"  x{median / statistics.median(baseline):.2f} of the reference" if baseline else ""
            print(f"  {name:24} median {median:.2f} s  ({low:.2f}–{high:.2f}, n={len(values)}){ratio}")
        else:
            print(f"  {name:24} no figure: the agent made no model call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
