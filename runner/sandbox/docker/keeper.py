"""The keeper layout: a keeper process (uid 65534) holds the container up, and the agent runs as an exec.

Used where this process cannot hold the engine's volumes (``direct_read=False``, ``hold_output=False``, no
engine init, or a mount point in another mount namespace). Why: docs/sandbox.md, "Keeper layout".
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import docker.errors

from runner.errors import SandboxError
from runner.sandbox import forwarder
from runner.sandbox.collect import AgentEnd, OutputFile, files_from_dir
from runner.sandbox.docker import volume
from runner.sandbox.docker.engine import ENGINE_ERRORS, engine_errors, output_archive
from runner.sandbox.docker.layout import (
    AGENT_USER,
    KEEPER_USER,
    READY_TIMEOUT_S,
    ContainerPlan,
    DockerSample,
    forwarder_command,
    pids_exhausted,
)
from runner.sandbox.docker.streams import start_pump

KEEP_ALIVE = ["sleep", "infinity"]
_POLL_S = 0.25


class KeeperLayout:
    """A keeper as the main process, the agent as an exec; ``/output`` read while the keeper holds it."""

    def __init__(self, api: Any, sample: DockerSample, *, direct_read: bool) -> None:
        """Lay out ``sample``; ``direct_read`` allows reading ``/output`` from the volume's host mount point."""
        self.api, self.sample, self.direct_read = api, sample, direct_read
        self.exec_id: str | None = None
        self.paused = False
        self.direct = False
        """Whether ``/output`` is read from the mount point (else streamed with ``get_archive``)."""

    def prepare(self, bin_dir: Path) -> None:
        """Nothing to add: the keeper is ``sleep`` or the forwarder, which the gateway path copies anyway."""

    def plan(self) -> ContainerPlan:
        """The keeper (the forwarder on the gateway path) as uid 65534 behind the engine's init."""
        gateway = self.sample.spec.gateway_socket_dir is not None
        return ContainerPlan(
            entrypoint=forwarder_command() if gateway else KEEP_ALIVE,
            user=KEEPER_USER,
            workdir="/",
            engine_init=True,
            stdin_open=False,
            log_driver="json-file",
            needs_bin=False,
        )

    def run(self, started: float) -> AgentEnd:
        """Start the keeper, wait for the forwarder (gateway path), run the agent as an exec, wait.

        Raises:
            SandboxError: the engine failed to start the container or the agent.
        """
        sample = self.sample
        spec, cid = sample.spec, sample.container
        with engine_errors("cannot start the container", spec.sample_id):
            self.api.start(cid)
        sample.started_at = time.time() - 1.0  # the engine's clock may lag ours: look a little earlier
        if spec.gateway_socket_dir is not None:
            problem = self._wait_forwarder()
            if problem is not None:
                sample.timings.start = time.perf_counter() - started
                return AgentEnd(failure=("gateway_error", problem))
        with engine_errors("cannot start the agent", spec.sample_id):
            self.exec_id = str(
                self.api.exec_create(
                    cid, sample.agent_command, stdout=True, stderr=True, user=AGENT_USER, workdir=sample.workdir
                )["Id"]
            )
            stream = self.api.exec_start(self.exec_id, socket=True)
        sample.streams.append(stream)
        reader = sample.reader = start_pump(stream, sample.stdout, sample.stderr, f"sandbox-{spec.sample_id}")
        agent_started = time.perf_counter()
        sample.timings.start = agent_started - started

        deadline = agent_started + spec.time_limit_s
        idle = 0.005
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                sample.timings.agent = time.perf_counter() - agent_started
                self._freeze()
                return AgentEnd(timed_out=True)
            if reader.is_alive():
                reader.join(min(remaining, _POLL_S))
            # The exec's own state decides: the stream outlives the agent while an orphan holds its stdout,
            # and ends early if the agent closes stdout and stderr but runs on.
            running, exit_code = self._exec_state()
            if not running:
                sample.timings.agent = time.perf_counter() - agent_started
                return AgentEnd(exit_code=exit_code)
            if not reader.is_alive():
                # Nothing to block on: poll, quickly at first (the engine records an exit just after the EOF).
                time.sleep(min(remaining, idle))
                idle = min(idle * 2, _POLL_S)

    def _exec_state(self) -> tuple[bool, int | None]:
        with engine_errors("cannot inspect the agent", self.sample.spec.sample_id):
            state = self.api.exec_inspect(self.exec_id)
        code = state.get("ExitCode")
        return bool(state["Running"]), int(code) if code is not None and not state["Running"] else None

    def _wait_forwarder(self) -> str | None:
        # The keeper prints one line once it listens; the agent must not race it to the port.
        deadline = time.perf_counter() + READY_TIMEOUT_S
        logs = b""
        while time.perf_counter() < deadline:
            try:
                logs = self.api.logs(self.sample.container, stdout=True, stderr=True)
                if forwarder.READY.encode() in logs:
                    return None
                if not self.api.inspect_container(self.sample.container)["State"]["Running"]:
                    break
            except ENGINE_ERRORS as exc:
                return f"cannot watch the gateway forwarder start: {exc}"
            time.sleep(0.02)
        tail = logs.decode("utf-8", "replace")[-2000:]
        return f"the gateway forwarder did not start within {READY_TIMEOUT_S:g} s: {tail.strip() or 'no output'}"

    def _freeze(self) -> None:
        # Pausing stops the agent and anything it left behind, so /output holds still while it is read.
        sample = self.sample
        if self.paused or not sample.collectable:
            return
        sample_id = sample.spec.sample_id
        try:
            with engine_errors("cannot pause the container", sample_id):
                self.api.pause(sample.container)
                self.paused = True
        except SandboxError as exc:
            # 409: not running (the keeper is gone, and the tmpfs with it) or already paused.
            refusal = exc.__cause__
            if not isinstance(refusal, docker.errors.APIError) or refusal.status_code != 409:
                raise
            with engine_errors("cannot inspect the container", sample_id):
                state = self.api.inspect_container(sample.container)["State"]
            self.paused = bool(state.get("Paused"))
            sample.collectable = bool(state.get("Running"))

    def settle(self, end: AgentEnd) -> None:
        """Freeze the container unless the agent exited cleanly and ``/output`` is read from the mount point.

        That read never follows a link and tolerates a leftover process still writing (the agent only spoils
        its own answer), while ``get_archive`` would fail on a file that changes under it. The pause costs
        ~10 ms a sample.

        Raises:
            SandboxError: the engine failed to pause the container.
        """
        clean = not end.timed_out and end.failure is None and end.exit_code == 0
        self.direct = self.direct_read and volume.readable_here(self.sample.volume_path, self.sample.spec.output_bytes)
        if not (clean and self.direct):
            self._freeze()

    def stopped(self) -> bool:
        """Never: the keeper runs until the container is removed (and a frozen agent would go on after a thaw)."""
        return False

    def pids_reached(self) -> bool:
        """Counted now: the keeper keeps the container, and its pids, alive."""
        return pids_exhausted(self.api, self.sample.container)

    def output_full(self) -> bool:
        """From the volume's mount point where this process reads it; unknown (False) when streamed."""
        path = self.sample.volume_path
        if not self.direct or path is None:
            return False
        try:
            return os.statvfs(path).f_bavail == 0
        except OSError:
            return False

    def read_output(self) -> dict[str, OutputFile]:
        """From the volume's mount point where this process can see it, otherwise streamed with ``get_archive``.

        Raises:
            SandboxError: ``/output`` could not be read or its archive parsed.
        """
        sample = self.sample
        spec = sample.spec
        if self.direct and sample.volume_path is not None:
            try:
                return files_from_dir(sample.volume_path, spec.limits)
            except OSError as exc:
                raise SandboxError(f"cannot read /output: {exc}", sample_id=spec.sample_id) from exc
        return output_archive(self.api, sample.container, spec.output_bytes, spec.limits, spec.sample_id)

    def release(self) -> None:
        """Nothing is held on the host."""
