"""What the two container layouts share: the sample's engine resources, and the protocol each layout keeps.

A layout decides what the container's main process is, how the agent starts and ends, and how ``/output``
is reached afterwards (docs/sandbox.md, "Layouts"). :mod:`.held` and :mod:`.keeper` implement it; the backend
only ever calls the protocol.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from runner.sandbox.backend import FORWARDER_PORT, GATEWAY_SOCKET_NAME, SampleHandle, SampleSpec
from runner.sandbox.collect import AgentEnd, OutputFile
from runner.sandbox.docker.cgroup import SampleCgroup
from runner.sandbox.docker.engine import ENGINE_ERRORS
from runner.sandbox.docker.streams import LockedTail
from runner.sandbox.docker.volume import AGENT_UID

AGENT_USER = f"{AGENT_UID}:{AGENT_UID}"
# The keeper runs as nobody: the agent (10001, no capabilities) cannot kill it and so cannot stop the
# container, which would unmount /output before it is collected.
KEEPER_USER = "65534:65534"
BIN_DIR = "/ispm/bin"
"""The per-sample, read-only folder of the init copy (held) and the forwarder (gateway path)."""
GATEWAY_DIR = "/ispm/gateway"
READY_TIMEOUT_S = 10.0
"""How long the gateway forwarder may take to say it listens."""


@dataclass(frozen=True)
class ContainerPlan:
    """How a layout wants the container made: its main process and what that needs."""

    entrypoint: list[str]
    """The main process's command line."""
    user: str
    """``uid:gid`` of the main process."""
    workdir: str
    """The main process's working directory."""
    engine_init: bool
    """Whether the engine adds its own init (``--init``) in front of the main process."""
    stdin_open: bool
    """Whether stdin is kept open for the host to write the gate line."""
    log_driver: str
    """The engine's log driver: ``none`` where stdout and stderr are attached instead."""
    needs_bin: bool
    """Whether ``/ispm/bin`` is mounted even without the gateway path."""


class Layout(Protocol):
    """One sample's container layout; the sample's :attr:`DockerSample.layout`."""

    def prepare(self, bin_dir: Path) -> None:
        """Put what the layout runs from ``/ispm/bin`` into the host's ``bin_dir``, before the container is made."""

    def plan(self) -> ContainerPlan:
        """How the container is to be made."""

    def run(self, started: float) -> AgentEnd:
        """Start the container and wait for the agent's end or the time limit; fills the start and agent timings.

        Raises:
            SandboxError: the engine failed to start the container or the agent.
        """

    def settle(self, end: AgentEnd) -> None:
        """Make ``/output`` hold still for collection, and say in ``collectable`` whether it can be read.

        Raises:
            SandboxError: the engine failed to freeze the container.
        """

    def pids_reached(self) -> bool:
        """Whether the agent hit the pids limit (asked only of an agent that failed or timed out)."""

    def output_full(self) -> bool:
        """Whether ``/output`` has no free block left (False where this process cannot see it)."""

    def read_output(self) -> dict[str, OutputFile]:
        """The files of ``/output``, each within its cap, symlinks reported and never followed.

        Raises:
            SandboxError: ``/output`` could not be read.
        """

    def stopped(self) -> bool:
        """Whether the container is known to have stopped, so nothing of the sample runs any more."""

    def release(self) -> None:
        """Let go of what the layout holds on the host (after the container is gone)."""


class DockerSample(SampleHandle):
    """Engine resources of one sample, filled in as they are made; what differs by layout is in ``layout``."""

    def __init__(self, spec: SampleSpec, folder: Path) -> None:
        """Track one sample of ``spec`` whose host files live in ``folder``."""
        super().__init__(spec, folder)
        self.layout: Layout | None = None
        self.volume: str | None = None
        self.volume_path: Path | None = None
        self.container: str | None = None
        self.agent_command: list[str] = []
        self.workdir = "/tmp"
        self.reader: threading.Thread | None = None
        self.stdout = LockedTail(spec.log_tail_bytes)
        self.stderr = LockedTail(spec.log_tail_bytes)
        self.streams: list[Any] = []
        """Open attach and exec sockets, closed at removal."""
        self.started_at = 0.0
        self.collectable = True
        self.cgroup: SampleCgroup | None = None
        """The parent cgroup that holds the pids limit and counts its hits, where there is one (:mod:`.cgroup`)."""

    def the_layout(self) -> Layout:
        """The sample's layout (set by ``create``)."""
        assert self.layout is not None
        return self.layout


def forwarder_command() -> list[str]:
    """The gateway forwarder's command line inside the container."""
    return [
        "python3",
        "-I",
        f"{BIN_DIR}/forwarder.py",
        "--socket",
        f"{GATEWAY_DIR}/{GATEWAY_SOCKET_NAME}",
        "--port",
        str(FORWARDER_PORT),
    ]


def pids_exhausted(api: Any, container: str | None) -> bool:
    """Whether the container's process count is at its pids limit (False if the engine cannot say)."""
    try:
        stats = api.stats(container, stream=False, one_shot=True)
    except ENGINE_ERRORS:
        return False
    pids = stats.get("pids_stats") or {}
    return bool(pids.get("limit")) and int(pids.get("current", 0)) >= int(pids["limit"])
