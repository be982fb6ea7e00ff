"""The held layout: the agent is the container's main process, and the host holds its ``/output`` open.

The agent (uid 10001) runs behind a private, execute-only copy of the engine's init and a gate. The host
attaches, starts the container, opens the volume's mount point and checks through that descriptor that it is
the sample's tmpfs; only then does it send the gate its one line. The open descriptor keeps the tmpfs alive
after the container stops, so nothing the agent does can lose its output. Why each step is there:
docs/sandbox.md, "Held layout".
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors

from runner import log
from runner.errors import SandboxError
from runner.sandbox import forwarder
from runner.sandbox.collect import AgentEnd, OutputFile, TailBuffer, files_from_dir
from runner.sandbox.docker import volume
from runner.sandbox.docker.engine import ENGINE_ERRORS, engine_errors
from runner.sandbox.docker.layout import (
    AGENT_USER,
    BIN_DIR,
    KEEPER_USER,
    READY_TIMEOUT_S,
    ContainerPlan,
    DockerSample,
    Layout,
    forwarder_command,
    pids_exhausted,
)
from runner.sandbox.docker.streams import raw_socket, start_pump

_log = log.get(__name__)

INIT_PATH = f"{BIN_DIR}/init"
# The gate: the agent's command runs only once the host, holding /output, sends one line on stdin.
GATE = ["/bin/sh", "-c", 'IFS= read -r _ && exec "$@"', "ispm-gate"]
_KILL_WAIT_S = 10.0


def find_init() -> Path | None:
    """The engine's own init (a static tini, what it mounts for ``--init``), or None where there is none.

    The held layout runs a private, execute-only copy of it; without one, samples use the keeper layout.
    """
    found = shutil.which("docker-init", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/libexec/docker"]))
    return Path(found).resolve() if found else None


class HeldLayout:
    """The agent as the container's main process; ``/output`` held through an open descriptor."""

    def __init__(self, api: Any, sample: DockerSample, init: Path, fall_back: Callable[[DockerSample], Layout]) -> None:
        """Lay out ``sample`` with a copy of ``init``; ``fall_back`` re-makes it in the keeper layout.

        ``fall_back`` is called when the volume's mount point turns out not to be the sample's tmpfs while the
        container runs (another mount namespace): the agent has not run yet, and the sample carries on in the
        layout it returns.
        """
        self.api, self.sample, self.init, self.fall_back = api, sample, init, fall_back
        self.output_fd: int | None = None
        self.pids_full = False
        """Whether the pids limit was reached at the time limit (a stopped container has no pids to count)."""
        self.ended = False
        """Whether the engine reported the container's end (the agent is its main process: nothing runs after)."""

    def prepare(self, bin_dir: Path) -> None:
        """Copy the init into ``bin_dir``, execute-only for the agent."""
        init = bin_dir / "init"
        shutil.copyfile(self.init, init)
        # Exec'ing a file it cannot read leaves the init non-dumpable, so the agent (same uid) can neither
        # ptrace it nor read its memory; as pid 1 it ignores SIGKILL/SIGSTOP.
        init.chmod(0o711)

    def plan(self) -> ContainerPlan:
        """The agent behind the init and the gate; stdout and stderr attached, so nothing is logged to disk."""
        return ContainerPlan(
            entrypoint=[INIT_PATH, "--", *GATE, *self.sample.agent_command],
            user=AGENT_USER,
            workdir=self.sample.workdir,
            engine_init=False,
            stdin_open=True,
            log_driver="none",
            needs_bin=True,
        )

    def run(self, started: float) -> AgentEnd:
        """Attach, start, hold ``/output``, start the forwarder (gateway path), open the gate, wait.

        Raises:
            SandboxError: the engine failed to start the container or the agent, or the container stopped
                behind the shut gate (an image without ``/bin/sh``).
        """
        sample = self.sample
        spec, cid = sample.spec, sample.container
        with engine_errors("cannot start the container", spec.sample_id):
            # Attached before the start, so no output is missed; stdin carries the gate line.
            attach = self.api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            sample.streams.append(attach)
            self.api.start(cid)
        sample.started_at = time.time() - 1.0  # the engine's clock may lag ours: look a little earlier
        assert sample.volume_path is not None
        self.output_fd = volume.hold(sample.volume_path, spec.output_bytes)
        if self.output_fd is None:
            self._check_still_running()
            _log.warning("sandbox.cannot_hold_output", sample=spec.sample_id, path=str(sample.volume_path))
            return self.fall_back(sample).run(started)
        if spec.gateway_socket_dir is not None:
            problem = self._exec_forwarder()
            if problem is not None:
                sample.timings.start = time.perf_counter() - started
                return AgentEnd(failure=("gateway_error", problem))
        return self._open_gate_and_wait(attach, started)

    def _open_gate_and_wait(self, attach: Any, started: float) -> AgentEnd:
        sample = self.sample
        spec, cid = sample.spec, sample.container
        ended: dict[str, Any] = {}

        def wait() -> None:
            try:
                ended["status"] = self.api.wait(cid)
            except ENGINE_ERRORS as exc:
                ended["error"] = exc

        waiter = threading.Thread(target=wait, name=f"sandbox-wait-{spec.sample_id}", daemon=True)
        waiter.start()
        sample.reader = start_pump(attach, sample.stdout, sample.stderr, f"sandbox-{spec.sample_id}")
        try:
            gate = raw_socket(attach)
            gate.sendall(b"go\n")
            gate.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise SandboxError(f"cannot start the agent: {exc}", sample_id=spec.sample_id) from exc
        agent_started = time.perf_counter()
        sample.timings.start = agent_started - started

        waiter.join(spec.time_limit_s)
        timed_out = waiter.is_alive()
        sample.timings.agent = time.perf_counter() - agent_started
        if timed_out:
            # Still running: see whether it is stuck on the pids limit, then kill it. What it wrote is held.
            self.pids_full = pids_exhausted(self.api, cid)
            self._kill()
            waiter.join(_KILL_WAIT_S)
            self.ended = "status" in ended
            return AgentEnd(timed_out=True)
        self.ended = "status" in ended
        if "error" in ended:
            raise SandboxError(f"cannot wait for the agent: {ended['error']}", sample_id=spec.sample_id)
        return AgentEnd(exit_code=int(ended["status"]["StatusCode"]))

    def _kill(self) -> None:
        with engine_errors("cannot kill the agent", self.sample.spec.sample_id):
            try:
                self.api.kill(self.sample.container)
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: it stopped by itself meanwhile
                    raise

    def _check_still_running(self) -> None:
        # A container that stopped behind a shut gate had an image that cannot run it (no /bin/sh, say):
        # that sample fails, and the layout stays.
        sample_id = self.sample.spec.sample_id
        with engine_errors("cannot inspect the container", sample_id):
            state = self.api.inspect_container(self.sample.container)["State"]
        if not state.get("Running"):
            raise SandboxError(
                f"the container stopped before its agent started (exit code {state.get('ExitCode')}); "
                "an agent image needs /bin/sh, as ispm/base has",
                sample_id=sample_id,
            )

    def _exec_forwarder(self) -> str | None:
        # The forwarder runs as the keeper's uid, which the agent cannot signal; the gate stays shut until it
        # says it listens, so the agent never races it to the port.
        sample = self.sample
        try:
            exec_id = self.api.exec_create(
                sample.container, forwarder_command(), stdout=True, stderr=True, user=KEEPER_USER, workdir="/"
            )["Id"]
            stream = self.api.exec_start(exec_id, socket=True)
        except ENGINE_ERRORS as exc:
            return f"cannot start the gateway forwarder: {exc}"
        sample.streams.append(stream)
        ready = threading.Event()
        logs = TailBuffer(4096)
        start_pump(stream, logs, logs, f"sandbox-forwarder-{sample.spec.sample_id}", ready)
        ready.wait(READY_TIMEOUT_S)
        text = logs.text()
        if forwarder.READY in text:
            return None
        return f"the gateway forwarder did not start within {READY_TIMEOUT_S:g} s: {text.strip() or 'no output'}"

    def settle(self, end: AgentEnd) -> None:
        """Nothing to freeze: the container has stopped (or the agent never ran); readable if it was held."""
        self.sample.collectable = self.output_fd is not None

    def pids_reached(self) -> bool:
        """As noted at the time limit, before the kill."""
        return self.pids_full

    def output_full(self) -> bool:
        """Counted through the held descriptor, which still reaches the tmpfs."""
        if self.output_fd is None:
            return False
        return os.fstatvfs(self.output_fd).f_bavail == 0

    def read_output(self) -> dict[str, OutputFile]:
        """The tmpfs root as the held descriptor reaches it; it may no longer be mounted anywhere.

        Raises:
            SandboxError: ``/output`` could not be read.
        """
        spec = self.sample.spec
        try:
            return files_from_dir(Path(f"/proc/self/fd/{self.output_fd}"), spec.limits)
        except OSError as exc:
            raise SandboxError(f"cannot read /output: {exc}", sample_id=spec.sample_id) from exc

    def stopped(self) -> bool:
        """Whether the engine reported the container's end."""
        return self.ended

    def release(self) -> None:
        """Close the held descriptor, which frees the tmpfs (unmounted since the container stopped)."""
        if self.output_fd is not None:
            os.close(self.output_fd)
            self.output_fd = None
