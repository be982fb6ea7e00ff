"""The ``local`` backend: the agent as a plain subprocess, for development without Docker. It isolates NOTHING.

The agent runs as the current user with the host's network, file system and credentials in reach. It sees
the same layout as in a container, moved under a per-sample temp folder and named by environment variables
(which the built-in agents and ``ispm-sql`` honour): ``ISPM_TASK_DIR`` (``/task``), ``ISPM_OUTPUT_DIR``
(``/output``), ``ISPM_WORLD`` (the snapshot file), ``ISPM_DOCS_DIR`` (``/docs``), ``ISPM_QUERY_LOG``
(``/output/queries.jsonl``), ``ISPM_REPLAY_DIR`` (``/replay``) and ``ISPM_SQL`` (the SQL tool). Only the time
limit is enforced (the whole process group is killed); memory, pids, output size and network are not.
``isolates = False``: official runs refuse this backend.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from runner import log
from runner.contract import AGENT_CONTRACT, SampleOutput
from runner.errors import SandboxError
from runner.sandbox import forwarder
from runner.sandbox.backend import (
    GATEWAY_SOCKET_NAME,
    Backend,
    SampleHandle,
    SampleSpec,
    gateway_env,
    make_sample_dir,
    write_task_dir,
)
from runner.sandbox.collect import AgentEnd, TailBuffer, build_output, files_from_dir
from runner.sandbox.images import images_dir

_log = log.get(__name__)

WARNING = (
    "the local sandbox backend ISOLATES NOTHING: the agent runs as you, with your files, network and "
    "credentials in reach, and no memory, pids or output limits. Use it for development only; "
    "official runs refuse it."
)
# Our own agent images, by repository name, run from their sources.
_BUILT_IN_AGENTS = {"ispm/agent-null": "agents/null/agent.py", "ispm/agent-replay": "agents/replay/agent.py"}
_READY_TIMEOUT_S = 10.0


class _LocalSample(SampleHandle):
    def __init__(self, spec: SampleSpec, folder: Path) -> None:
        super().__init__(spec, folder)
        self.command: list[str] = []
        self.env: dict[str, str] = {}
        self.forwarder: subprocess.Popen[bytes] | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self.stdout = TailBuffer(spec.log_tail_bytes)
        self.stderr = TailBuffer(spec.log_tail_bytes)
        self.readers: list[threading.Thread] = []


def _drain(stream: IO[bytes], tail: TailBuffer) -> None:
    # os.read returns what is there: the tail stays current and a chatty agent is never held in full.
    fd = stream.fileno()
    for chunk in iter(lambda: os.read(fd, 64 * 1024), b""):
        tail.feed(chunk)


def agent_command(spec: SampleSpec) -> list[str]:
    """The command for ``spec``: its override, or the source of a built-in agent image.

    Raises:
        SandboxError: no override and the image is not one of ours (a foreign image needs Docker).
    """
    if spec.command:
        return list(spec.command)
    repository = spec.image.rsplit(":", 1)[0] if ":" in spec.image.rsplit("/", 1)[-1] else spec.image
    script = _BUILT_IN_AGENTS.get(repository)
    if script is None:
        raise SandboxError(
            f"the local backend cannot run image {spec.image!r}; give a command, or use one of "
            f"{sorted(_BUILT_IN_AGENTS)}",
            sample_id=spec.sample_id,
        )
    return [sys.executable, "-I", str(images_dir() / script)]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class LocalBackend(Backend[_LocalSample]):
    """Subprocess agents under a temp folder; see the module docs. Never for official runs."""

    name = "local"
    isolates = False

    def __init__(self) -> None:
        """Say, loudly, that nothing is isolated."""
        _log.warning("sandbox.local_isolates_nothing", message=WARNING)

    def create(self, spec: SampleSpec) -> _LocalSample:
        """Lay out ``task/`` and ``output/`` under a fresh temp folder and work out the command.

        Raises:
            SandboxError: the image has no local equivalent and no command was given.
        """
        command = agent_command(spec)
        handle = _LocalSample(spec, make_sample_dir(spec))
        handle.command = command
        write_task_dir(handle.folder / "task", spec)
        output = handle.folder / "output"
        output.mkdir()
        handle.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(handle.folder),
            "TMPDIR": str(handle.folder),
            "ISPM_AGENT_CONTRACT": AGENT_CONTRACT,
            "ISPM_TASK_DIR": str(handle.folder / "task"),
            "ISPM_OUTPUT_DIR": str(output),
            "ISPM_WORLD": str(spec.world_file),
            "ISPM_DOCS_DIR": str(spec.docs_dir),
            "ISPM_QUERY_LOG": str(output / "queries.jsonl"),
            "ISPM_SQL": str(images_dir() / "base" / "ispm-sql"),
        }
        if spec.replay_dir is not None:
            handle.env["ISPM_REPLAY_DIR"] = str(spec.replay_dir)
        return handle

    def run(self, handle: _LocalSample) -> AgentEnd:
        """Start the forwarder (with a gateway) and the agent; wait for the agent or the time limit.

        Raises:
            SandboxError: the agent command cannot be started.
        """
        spec = handle.spec
        started = time.perf_counter()
        env = dict(handle.env)
        if spec.gateway_socket_dir is not None:
            if spec.gateway_token is None:
                raise SandboxError("gateway_socket_dir is set but gateway_token is not", sample_id=spec.sample_id)
            handle.forwarder, port = start_forwarder(spec.gateway_socket_dir / GATEWAY_SOCKET_NAME)
            if port is None:
                return AgentEnd(failure=("gateway_error", "the gateway forwarder did not start"))
            env |= gateway_env(spec.gateway_token.get_secret_value(), spec.gateway_model, port)
            env["ISPM_GATEWAY_SOCKET"] = str(spec.gateway_socket_dir / GATEWAY_SOCKET_NAME)
        env |= spec.env
        try:
            handle.process = subprocess.Popen(
                handle.command,
                cwd=handle.folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, so a timeout kills its children too
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {handle.command[0]}: {exc}", sample_id=spec.sample_id) from exc
        assert handle.process.stdout is not None and handle.process.stderr is not None
        for stream, tail in ((handle.process.stdout, handle.stdout), (handle.process.stderr, handle.stderr)):
            reader = threading.Thread(target=_drain, args=(stream, tail), daemon=True)
            reader.start()
            handle.readers.append(reader)
        agent_started = time.perf_counter()
        handle.timings.start = agent_started - started
        timed_out = False
        try:
            handle.process.wait(timeout=spec.time_limit_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        _kill_group(handle.process)  # on success too: nothing the agent started outlives the sample
        handle.timings.agent = time.perf_counter() - agent_started
        for reader in handle.readers:
            reader.join(2.0)
        if timed_out:
            return AgentEnd(timed_out=True)
        return AgentEnd(exit_code=handle.process.returncode)

    def collect(self, handle: _LocalSample, end: AgentEnd) -> SampleOutput:
        """Read the output folder (symlinks are reported, never followed) and classify the sample."""
        spec = handle.spec
        end.stdout_tail, end.stderr_tail = handle.stdout.text(), handle.stderr.text()
        end.notes.append("local backend: nothing was isolated")
        try:
            files = files_from_dir(handle.folder / "output", spec.limits)
        except OSError as exc:
            raise SandboxError(f"cannot read the output folder: {exc}", sample_id=spec.sample_id) from exc
        return build_output(spec.task_id, spec.epoch, end, files, spec.limits, time_limit_s=spec.time_limit_s)

    def remove(self, handle: _LocalSample) -> None:
        """Kill what is left (agent, forwarder) and delete the temp folder."""
        for process in (handle.process, handle.forwarder):
            if process is not None and process.poll() is None:
                _kill_group(process)
        for process in (handle.process, handle.forwarder):
            if process is not None:
                for stream in (process.stdout, process.stderr):
                    if stream is not None:
                        stream.close()
        shutil.rmtree(handle.folder, ignore_errors=True)


def start_forwarder(socket_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
    """Start the sandbox's forwarder on a free loopback port to ``socket_path``, in a session of its own: the
    process, and its port, or ``None`` when it did not say it was ready within :data:`_READY_TIMEOUT_S`."""
    process = subprocess.Popen(
        [sys.executable, "-I", forwarder.__file__, "--socket", str(socket_path), "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    stdout = process.stdout
    assert stdout is not None
    # readline blocks, so it runs in a thread that the deadline can abandon.
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(_READY_TIMEOUT_S)
    text = line[0].decode() if line else ""
    if not text.startswith(forwarder.READY):
        return process, None
    return process, int(text.rsplit(":", 1)[1])
