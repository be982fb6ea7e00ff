"""The Docker backend: every sample in a fresh, locked-down container, driven through the Docker SDK.

How one sample runs, and why:

- **/output outlives the agent.** ``/output`` is a per-sample tmpfs *volume* (size-capped by the kernel; a
  bind-mounted host folder could not be capped). The engine mounts it when the container starts and
  unmounts it, lazily (``MNT_DETACH``), when the container stops; ``get_archive`` cannot see a container's
  private ``--tmpfs`` mounts at all. Two layouts keep the output readable until it is collected:
- **Held layout** (the default, where this process shares the engine's host and mount namespace and may read
  its volumes). The agent is the container's main process: uid 10001, behind an init and a gate. The host
  attaches (stdin, stdout, stderr), starts the container, opens the volume's mount point and checks through
  that descriptor that it is the sample's tmpfs (owned by 10001, exactly the size asked for). The open
  descriptor keeps the tmpfs alive after the container stops, so nothing the agent does can lose its output.
  Only then does the host send the gate (``/bin/sh``, ``read`` then ``exec`` of the agent's command) its one
  line; the engine then closes the agent's stdin. The end is the container's own exit (``wait``), its code
  the agent's, as the init reports it; stdout and stderr come over the attach stream (no log driver, so no
  disk). No exec, and nothing left to kill at removal: 50-100 ms less a sample than the keeper layout on this
  engine (2 cores, fuse-overlayfs). The init is the engine's own (``docker-init``, tini), run from a
  per-sample copy that is execute-only for the agent: exec'ing a file it cannot read leaves pid 1
  non-dumpable, so the agent, although of the same uid, can neither ptrace it nor read its memory, and as
  pid 1 of its namespace it ignores SIGKILL and SIGSTOP from inside. If the mount point turns out not to be
  the tmpfs while the container runs (another mount namespace), the agent never ran: the container is
  replaced by a keeper-layout one and the backend keeps that layout from then on. A container that stopped
  behind the shut gate (an image without ``/bin/sh``) fails its sample instead.
- **Keeper layout** (``direct_read=False``, ``hold_output=False``, or where the volume cannot be held). The
  container's main process is a keeper (``sleep infinity``, or the gateway forwarder) running as uid 65534,
  and the agent runs as an exec of uid 10001, which cannot signal the keeper and so cannot stop the
  container. The exec's exit code comes from the engine, its state (not its output stream) says when the
  agent ended. ``/output`` is read while the keeper still holds the volume, then the container is
  force-removed.
- **Collection.** Held: after the container stopped (nothing can write any more), through the held
  descriptor. Keeper: from the volume's mount point where this process can see it, otherwise streamed with
  ``get_archive``; the container is paused first (freezing whatever the agent left running) unless the
  agent exited 0 and the mount point is read directly. Either way symlinks are reported, never followed, and
  nothing is read past its cap.
- **Lockdown.** Read-only root; ``/tmp`` a small noexec tmpfs; all capabilities dropped;
  ``no-new-privileges``; an init process that reaps orphans; limits on pids, memory (no swap) and CPU;
  ``network_mode=none``, so the only interface is loopback; a private IPC namespace.
- **Mounts.** ``/task`` (a per-sample host folder), the single snapshot file under ``/world`` and ``/docs``
  are bind-mounted read-only. ``/replay`` only when the spec names a recording folder. ``/ispm/bin`` (a
  per-sample folder, read-only) holds the init copy (held) and the forwarder (gateway path).
- **Gateway path.** With ``gateway_socket_dir`` set, that folder (holding the gateway's Unix socket) is
  mounted read-only at ``/ispm/gateway`` and :mod:`runner.sandbox.forwarder` is copied into ``/ispm/bin``.
  The forwarder listens on ``127.0.0.1:8765`` in the container's own loopback and pumps bytes to the
  socket, as uid 65534, which the agent cannot signal: an exec started before the gate opens (held), or the
  keeper itself. The agent gets ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (its per-sample token), and starts
  only after the forwarder says it is ready.
- **Time limit from outside.** The host waits for the agent's end with a deadline. Held: at the deadline it
  notes whether the pids limit is reached and kills the container; the output is held. Keeper: it pauses
  and collects. Either way a timed-out sample still has its output. Only tails of stdout and stderr are kept.
- **Cleanup.** Container and volume carry ``ispm.sandbox``, ``ispm.run``, ``ispm.sample`` and ``ispm.owner``
  labels and are removed in a ``finally``, which also closes the held descriptor (freeing the tmpfs). A
  runner killed with ``kill -9`` loses its descriptors with it; each backend start sweeps what dead owners
  left behind.

The engine (20.10 here) reports an OOM kill as an ``oom`` event on the container, also for an exec; the
backend looks for it when the agent dies of SIGKILL.
"""

from __future__ import annotations

import io
import os
import re
import secrets
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import LogConfig, Mount
from docker.utils.socket import frames_iter

from runner import log
from runner.contract import SampleOutput
from runner.errors import SandboxError
from runner.sandbox import forwarder
from runner.sandbox.backend import (
    FORWARDER_PORT,
    GATEWAY_SOCKET_NAME,
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SANDBOX,
    Backend,
    SampleHandle,
    SampleSpec,
    SweepReport,
    gateway_env,
    make_sample_dir,
    owner_alive,
    sweep_scratch,
    write_task_dir,
)
from runner.sandbox.collect import (
    AgentEnd,
    ChunkReader,
    OutputFile,
    TailBuffer,
    build_output,
    files_from_dir,
    files_from_tar,
)

_log = log.get(__name__)

AGENT_UID = 10001
AGENT_USER = f"{AGENT_UID}:{AGENT_UID}"
# The keeper runs as nobody: the agent (10001, no capabilities) cannot kill it and so cannot stop the
# container, which would unmount /output before it is collected.
KEEPER_USER = "65534:65534"
KEEP_ALIVE = ["sleep", "infinity"]
FORWARDER_DIR = "/ispm/bin"
GATEWAY_DIR = "/ispm/gateway"
INIT_PATH = f"{FORWARDER_DIR}/init"
# The held layout's gate: the agent's command runs only once the host, holding /output, sends one line on stdin.
GATE = ["/bin/sh", "-c", 'IFS= read -r _ && exec "$@"', "ispm-gate"]
SIGKILL_EXIT = 137
_POLL_S = 0.25
_READY_TIMEOUT_S = 10.0
_KILL_WAIT_S = 10.0
_ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.RequestException)


class _DockerSample(SampleHandle):
    """Engine resources of one sample, filled in as they are made."""

    def __init__(self, spec: SampleSpec, folder: Path) -> None:
        super().__init__(spec, folder)
        self.volume: str | None = None
        self.volume_path: Path | None = None
        self.container: str | None = None
        self.exec_id: str | None = None
        self.agent_command: list[str] = []
        self.workdir = "/tmp"
        self.reader: threading.Thread | None = None
        self.stdout = _LockedTail(spec.log_tail_bytes)
        self.stderr = _LockedTail(spec.log_tail_bytes)
        self.started_at = 0.0
        self.paused = False
        self.collectable = True
        # The held layout (see the module docs): the agent is the container's main process.
        self.held = False
        self.output_fd: int | None = None
        self.attach: Any = None
        self.forwarder_stream: Any = None
        self.pids_full = False


class _LockedTail(TailBuffer):
    # The reader thread feeds while the main thread may already read the text.
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._lock = threading.Lock()

    def feed(self, chunk: bytes) -> None:
        with self._lock:
            super().feed(chunk)

    def text(self) -> str:
        with self._lock:
            return super().text()


def _raw_socket(sock: Any) -> socket.socket:
    raw = getattr(sock, "_sock", sock)
    assert isinstance(raw, socket.socket)
    return raw


def _frames(sock: Any) -> Any:
    # The client's 60 s read timeout would end the stream of an agent that is silent for a minute.
    _raw_socket(sock).settimeout(None)
    return frames_iter(sock, tty=False)


def _pump(frames: Any, out: TailBuffer, err: TailBuffer, ready: threading.Event | None = None) -> None:
    # ``ready`` (the forwarder's stream) is set once the ready line was seen, or when the stream ends.
    seen = b""
    try:
        for stream_id, chunk in frames:
            (err if stream_id == 2 else out).feed(chunk)
            if ready is not None and not ready.is_set():
                seen = (seen + chunk)[-4096:]
                if forwarder.READY.encode() in seen:
                    ready.set()
    except Exception:  # the stream breaks when the container goes away; the tails are kept
        pass
    finally:
        if ready is not None:
            ready.set()


def _find_init() -> Path | None:
    # The engine's own init (a static tini, what it mounts for `--init`): the held layout runs a private,
    # execute-only copy of it. Without one, samples use the keeper layout.
    found = shutil.which("docker-init", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/libexec/docker"]))
    return Path(found).resolve() if found else None


def _is_sample_tmpfs(info: os.stat_result, fs: os.statvfs_result, size: int) -> bool:
    # What the sample's /output volume looks like from the host: a directory owned by the agent's uid, on a
    # filesystem of exactly the size we asked for.
    return stat.S_ISDIR(info.st_mode) and info.st_uid == AGENT_UID and fs.f_blocks * fs.f_frsize == size


def _is_our_volume(path: Path | None, size: int) -> bool:
    # The engine's mount point is only ours to read if we share its host and mount namespace.
    if path is None:
        return False
    try:
        info, fs = os.stat(path), os.statvfs(path)
    except OSError:
        return False
    return _is_sample_tmpfs(info, fs, size) and os.access(path, os.R_OK | os.X_OK)


def _hold_volume(path: Path, size: int) -> int | None:
    # An open descriptor keeps the tmpfs alive after the engine (lazily) unmounts it when the container stops.
    # Checked through the descriptor itself: no race between the check and what is held.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _is_sample_tmpfs(os.fstat(fd), os.fstatvfs(fd), size):
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def _name_part(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "-", text)[:40]


def connect() -> Any:
    """A Docker client for the engine named by the environment.

    Raises:
        SandboxError: the engine cannot be reached.
    """
    try:
        client = docker.from_env()
        client.ping()
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot reach the Docker engine: {exc}") from exc
    return client


def sweep(client: Any | None = None, run_id: str | None = None, *, orphans_only: bool = False) -> SweepReport:
    """Remove every container, volume and network labelled ``ispm.sandbox`` (of ``run_id`` only, if given).

    With ``orphans_only`` it spares resources whose owner process is still running on this host: that is
    what every backend start does, so a runner killed with ``kill -9`` leaves nothing after the next start,
    while a concurrent runner's samples are left alone. Per-owner scratch folders go the same way.

    Raises:
        SandboxError: the engine cannot be reached or listed. Failures to remove one resource are reported
            in ``failures`` instead.
    """
    engine = client if client is not None else connect()
    api = engine.api
    wanted = [f"{LABEL_SANDBOX}=1"] + ([f"{LABEL_RUN}={run_id}"] if run_id else [])
    report = SweepReport()

    def spare(labels: dict[str, str] | None) -> bool:
        return orphans_only and owner_alive((labels or {}).get(LABEL_OWNER, ""))

    try:
        containers = api.containers(all=True, filters={"label": wanted})
        volumes = api.volumes(filters={"label": wanted}).get("Volumes") or []
        networks = api.networks(filters={"label": wanted})
    except _ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot list sandbox resources: {exc}") from exc
    # Containers first: a volume or network still in use cannot be removed.
    kinds: list[tuple[str, list[Any], Callable[[Any], object], Callable[[Any], str], list[str]]] = [
        ("container", containers, lambda i: api.remove_container(i["Id"], force=True), lambda i: str(i["Id"])[:12],
         report.containers),
        ("volume", volumes, lambda i: api.remove_volume(i["Name"], force=True), lambda i: str(i["Name"]),
         report.volumes),
        ("network", networks, lambda i: api.remove_network(i["Id"]), lambda i: str(i["Name"]), report.networks),
    ]  # fmt: skip
    for kind, items, remove, name, removed_names in kinds:
        for item in items:
            if spare(item.get("Labels")):
                continue
            try:
                remove(item)
                removed_names.append(name(item))
            except docker.errors.NotFound:
                pass
            except _ENGINE_ERRORS as exc:
                report.failures.append(f"{kind} {name(item)}: {exc}")
    if run_id is None:
        removed, failures = sweep_scratch(orphans_only=orphans_only)
        report.directories += removed
        report.failures += failures
    if report.containers or report.volumes or report.networks or report.directories:
        _log.info(
            "sandbox.swept",
            run=run_id,
            containers=len(report.containers),
            volumes=len(report.volumes),
            networks=len(report.networks),
            directories=len(report.directories),
        )
    return report


class DockerBackend(Backend[_DockerSample]):
    """Runs each sample in a fresh container; see the module docs for the layout and the lockdown."""

    name = "docker"
    isolates = True

    def __init__(
        self,
        client: Any | None = None,
        *,
        sweep_on_start: bool = True,
        direct_read: bool = True,
        hold_output: bool = True,
    ) -> None:
        """Connect to the engine and (by default) sweep what dead runners left behind.

        ``direct_read`` lets collection read ``/output`` from the volume's host mount point when this process
        can see it (same host and mount namespace as the engine, and allowed to read it); otherwise, or
        with ``direct_read=False``, it streams ``get_archive``. Both paths are hostile-safe; the direct one
        saves the engine's per-archive rootfs mount, about 40 ms a sample on fuse-overlayfs.

        ``hold_output`` (with ``direct_read``) selects the held layout where this process can hold the
        volume: the agent is the container's main process and no exec is needed (see the module docs).
        Otherwise, or where the volume turns out not to be holdable, the keeper layout is used.

        Raises:
            SandboxError: the engine cannot be reached.
        """
        self.client = client if client is not None else connect()
        self.api = self.client.api
        self.direct_read = direct_read
        self._init = _find_init() if direct_read and hold_output else None
        self.holds_output = self._init is not None
        """Whether new samples use the held layout (cleared if a volume turns out not to be holdable)."""
        if sweep_on_start:
            sweep(self.client, orphans_only=True)

    def close(self) -> None:
        """Close the engine connection."""
        self.client.close()

    def sweep(self, run_id: str | None = None, *, orphans_only: bool = False) -> SweepReport:
        """See :func:`sweep`."""
        return sweep(self.client, run_id, orphans_only=orphans_only)

    # -- create ------------------------------------------------------------------------------------------

    def create(self, spec: SampleSpec) -> _DockerSample:
        """Make the output volume and the (not yet started) container.

        Raises:
            SandboxError: the image is missing or has no agent command, a mounted path is missing, or the
                engine refused.
        """
        for path, what in ((spec.world_file, "world snapshot"), (spec.docs_dir, "docs folder")):
            if not path.exists():
                raise SandboxError(f"{what} not found: {path}", sample_id=spec.sample_id)
        handle = _DockerSample(spec, make_sample_dir(spec))
        try:
            self._create(handle)
        except BaseException:
            try:
                self.remove(handle)
            except SandboxError as exc:
                _log.warning("sandbox.partial_cleanup_failed", sample=spec.sample_id, error=str(exc))
            raise
        return handle

    def _create(self, handle: _DockerSample) -> None:
        spec = handle.spec
        try:
            config = self.api.inspect_image(spec.image).get("Config") or {}
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image not found: {spec.image} (build it first)", sample_id=spec.sample_id) from exc
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot inspect image {spec.image}: {exc}", sample_id=spec.sample_id) from exc
        handle.agent_command = list(spec.command or [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])])
        if not handle.agent_command:
            raise SandboxError(f"image {spec.image} has no entrypoint or command", sample_id=spec.sample_id)
        handle.workdir = config.get("WorkingDir") or "/tmp"
        if spec.gateway_socket_dir is not None and spec.gateway_token is None:
            raise SandboxError("gateway_socket_dir is set but gateway_token is not", sample_id=spec.sample_id)

        write_task_dir(handle.folder / "task", spec)
        bin_dir = handle.folder / "bin"
        bin_dir.mkdir(mode=0o755)
        bin_dir.chmod(0o755)
        if spec.gateway_socket_dir is not None:
            script = bin_dir / "forwarder.py"
            shutil.copyfile(Path(forwarder.__file__), script)
            script.chmod(0o644)
        try:
            volume = self.api.create_volume(
                name=f"ispm-out-{_name_part(spec.sample_id)}-{secrets.token_hex(4)}",
                driver="local",
                driver_opts={
                    "type": "tmpfs",
                    "device": "tmpfs",
                    # The kernel enforces the size; nr_inodes bounds a flood of empty files.
                    "o": f"size={spec.output_bytes},nr_inodes=4096,uid=10001,gid=10001,mode=0755,nosuid,nodev,noexec",
                },
                labels=spec.labels(),
            )
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot create the output volume: {exc}", sample_id=spec.sample_id) from exc
        handle.volume = str(volume["Name"])
        handle.volume_path = Path(str(volume.get("Mountpoint") or "")) if volume.get("Mountpoint") else None
        # Held only where this process sees the (still empty) mount point; start confirms it is the tmpfs.
        handle.held = self.holds_output and handle.volume_path is not None and os.access(handle.volume_path, os.X_OK)
        if handle.held:
            assert self._init is not None
            init = bin_dir / "init"
            shutil.copyfile(self._init, init)
            # Execute-only for the agent: exec'ing a file it cannot read leaves the init non-dumpable, so the
            # agent (same uid) can neither ptrace it nor read its memory; as pid 1 it ignores SIGKILL/SIGSTOP.
            init.chmod(0o711)
        self._create_container(handle)

    def _create_container(self, handle: _DockerSample) -> None:
        spec = handle.spec
        assert handle.volume is not None
        mounts = [
            Mount("/task", str(handle.folder / "task"), type="bind", read_only=True),
            Mount(f"/world/{spec.world_file.name}", str(spec.world_file.resolve()), type="bind", read_only=True),
            Mount("/docs", str(spec.docs_dir.resolve()), type="bind", read_only=True),
            Mount("/output", handle.volume, type="volume", no_copy=True),
        ]
        if spec.replay_dir is not None:
            mounts.append(Mount("/replay", str(spec.replay_dir.resolve()), type="bind", read_only=True))
        env = {"HOME": "/tmp", "ISPM_AGENT_CONTRACT": "ispm.agent/v1"}
        if spec.gateway_socket_dir is not None or handle.held:
            mounts.append(Mount(FORWARDER_DIR, str(handle.folder / "bin"), type="bind", read_only=True))
        if spec.gateway_socket_dir is not None:
            assert spec.gateway_token is not None
            mounts.append(Mount(GATEWAY_DIR, str(spec.gateway_socket_dir.resolve()), type="bind", read_only=True))
            env |= gateway_env(spec.gateway_token.get_secret_value(), spec.gateway_model)
        env |= spec.env
        if handle.held:
            # The agent itself, behind the init and the gate, as the main process; nothing is logged to disk
            # (stdout and stderr are attached), so 100 MB of output costs no disk.
            command = [INIT_PATH, "--", *GATE, *handle.agent_command]
            run_as, workdir, init, keep_stdin, log_config = AGENT_USER, handle.workdir, False, True, "none"
        else:
            command = self._forwarder_command() if spec.gateway_socket_dir is not None else KEEP_ALIVE
            run_as, workdir, init, keep_stdin, log_config = KEEPER_USER, "/", True, False, "json-file"
        try:
            host_config = self.api.create_host_config(
                mounts=mounts,
                tmpfs={"/tmp": f"rw,nosuid,nodev,noexec,size={spec.tmp_bytes},mode=1777"},
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                init=init,
                network_mode="none",
                ipc_mode="private",
                shm_size=16 * 1024**2,
                pids_limit=spec.pids,
                mem_limit=spec.memory_bytes,
                memswap_limit=spec.memory_bytes,
                nano_cpus=int(spec.cpus * 1e9),
                log_config=LogConfig(type=log_config),
            )
            created = self.api.create_container(
                spec.image,
                name=f"ispm-{_name_part(spec.run_id)}-{_name_part(spec.sample_id)}-{secrets.token_hex(4)}",
                entrypoint=command,
                command=[],
                user=run_as,
                working_dir=workdir,
                environment=env,
                labels=spec.labels(),
                host_config=host_config,
                # With it the client sets StdinOnce: the engine closes the agent's stdin after the gate line.
                stdin_open=keep_stdin,
            )
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot create the container: {exc}", sample_id=spec.sample_id) from exc
        handle.container = str(created["Id"])

    @staticmethod
    def _forwarder_command() -> list[str]:
        return [
            "python3",
            "-I",
            f"{FORWARDER_DIR}/forwarder.py",
            "--socket",
            f"{GATEWAY_DIR}/{GATEWAY_SOCKET_NAME}",
            "--port",
            str(FORWARDER_PORT),
        ]

    # -- run ---------------------------------------------------------------------------------------------

    def run(self, handle: _DockerSample) -> AgentEnd:
        """Start the sample and wait for the agent's end or the time limit.

        Held layout: attach, start, hold ``/output``, start the forwarder (gateway path), open the gate.
        Keeper layout: start the keeper, then the agent as an exec.

        Raises:
            SandboxError: the engine failed to start the container or the agent.
        """
        started = time.perf_counter()
        if handle.held:
            self._start_held(handle)
            if handle.output_fd is None:
                self._check_still_running(handle)
                # Running, yet the mount point is not its tmpfs (another mount namespace): the agent never ran.
                # Use the keeper layout from now on, starting with this sample.
                _log.warning("sandbox.cannot_hold_output", sample=handle.spec.sample_id, path=str(handle.volume_path))
                self.holds_output = False
                self._discard_container(handle)
                handle.held = False
                self._create_container(handle)
            else:
                return self._run_held(handle, started)
        return self._run_keeper(handle, started)

    def _start_held(self, handle: _DockerSample) -> None:
        spec, cid = handle.spec, handle.container
        try:
            # Attached before the start, so no output is missed; stdin carries the gate line.
            handle.attach = self.api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            self.api.start(cid)
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot start the container: {exc}", sample_id=spec.sample_id) from exc
        handle.started_at = time.time() - 1.0  # the engine's clock may lag ours: look a little earlier
        assert handle.volume_path is not None
        handle.output_fd = _hold_volume(handle.volume_path, spec.output_bytes)

    def _check_still_running(self, handle: _DockerSample) -> None:
        # A container that stopped behind a shut gate had an image that cannot run it (no /bin/sh, say):
        # that sample fails, and the layout stays.
        try:
            state = self.api.inspect_container(handle.container)["State"]
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot inspect the container: {exc}", sample_id=handle.spec.sample_id) from exc
        if not state.get("Running"):
            raise SandboxError(
                f"the container stopped before its agent started (exit code {state.get('ExitCode')}); "
                "an agent image needs /bin/sh, as ispm/base has",
                sample_id=handle.spec.sample_id,
            )

    def _discard_container(self, handle: _DockerSample) -> None:
        if handle.attach is not None:
            handle.attach.close()
            handle.attach = None
        try:
            self.api.remove_container(handle.container, force=True)
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot remove the container: {exc}", sample_id=handle.spec.sample_id) from exc
        handle.container = None

    def _run_held(self, handle: _DockerSample, started: float) -> AgentEnd:
        spec, cid = handle.spec, handle.container
        if spec.gateway_socket_dir is not None:
            problem = self._exec_forwarder(handle)
            if problem is not None:
                handle.timings.start = time.perf_counter() - started
                return AgentEnd(failure=("gateway_error", problem))
        ended: dict[str, Any] = {}

        def wait() -> None:
            try:
                ended["status"] = self.api.wait(cid)
            except _ENGINE_ERRORS as exc:
                ended["error"] = exc

        waiter = threading.Thread(target=wait, name=f"sandbox-wait-{spec.sample_id}", daemon=True)
        waiter.start()
        handle.reader = threading.Thread(
            target=_pump,
            args=(_frames(handle.attach), handle.stdout, handle.stderr),
            name=f"sandbox-{spec.sample_id}",
            daemon=True,
        )
        handle.reader.start()
        try:
            gate = _raw_socket(handle.attach)
            gate.sendall(b"go\n")
            gate.shutdown(socket.SHUT_WR)
        except OSError as exc:
            raise SandboxError(f"cannot start the agent: {exc}", sample_id=spec.sample_id) from exc
        agent_started = time.perf_counter()
        handle.timings.start = agent_started - started

        waiter.join(spec.time_limit_s)
        timed_out = waiter.is_alive()
        handle.timings.agent = time.perf_counter() - agent_started
        if timed_out:
            # Still running: see whether it is stuck on the pids limit, then kill it. What it wrote is held.
            handle.pids_full = self._pids_exhausted(handle)
            try:
                self.api.kill(cid)
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: it stopped by itself meanwhile
                    raise SandboxError(f"cannot kill the agent: {exc}", sample_id=spec.sample_id) from exc
            except _ENGINE_ERRORS as exc:
                raise SandboxError(f"cannot kill the agent: {exc}", sample_id=spec.sample_id) from exc
            waiter.join(_KILL_WAIT_S)
            return AgentEnd(timed_out=True)
        if "error" in ended:
            raise SandboxError(f"cannot wait for the agent: {ended['error']}", sample_id=spec.sample_id)
        return AgentEnd(exit_code=int(ended["status"]["StatusCode"]))

    def _exec_forwarder(self, handle: _DockerSample) -> str | None:
        # The forwarder runs as the keeper's uid, which the agent cannot signal; the gate stays shut until it
        # says it listens, so the agent never races it to the port.
        try:
            exec_id = self.api.exec_create(
                handle.container, self._forwarder_command(), stdout=True, stderr=True, user=KEEPER_USER, workdir="/"
            )["Id"]
            handle.forwarder_stream = self.api.exec_start(exec_id, socket=True)
        except _ENGINE_ERRORS as exc:
            return f"cannot start the gateway forwarder: {exc}"
        ready = threading.Event()
        logs = TailBuffer(4096)
        threading.Thread(
            target=_pump,
            args=(_frames(handle.forwarder_stream), logs, logs, ready),
            name=f"sandbox-forwarder-{handle.spec.sample_id}",
            daemon=True,
        ).start()
        ready.wait(_READY_TIMEOUT_S)
        text = logs.text()
        if forwarder.READY in text:
            return None
        return f"the gateway forwarder did not start within {_READY_TIMEOUT_S:g} s: {text.strip() or 'no output'}"

    def _run_keeper(self, handle: _DockerSample, started: float) -> AgentEnd:
        spec, cid = handle.spec, handle.container
        try:
            self.api.start(cid)
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot start the container: {exc}", sample_id=spec.sample_id) from exc
        handle.started_at = time.time() - 1.0  # the engine's clock may lag ours: look a little earlier
        if spec.gateway_socket_dir is not None:
            problem = self._wait_forwarder(handle)
            if problem is not None:
                handle.timings.start = time.perf_counter() - started
                return AgentEnd(failure=("gateway_error", problem))
        try:
            handle.exec_id = str(
                self.api.exec_create(
                    cid, handle.agent_command, stdout=True, stderr=True, user=AGENT_USER, workdir=handle.workdir
                )["Id"]
            )
            stream = self.api.exec_start(handle.exec_id, socket=True)
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot start the agent: {exc}", sample_id=spec.sample_id) from exc
        handle.attach = stream
        handle.reader = threading.Thread(
            target=_pump, args=(_frames(stream), handle.stdout, handle.stderr), name=f"sandbox-{spec.sample_id}",
            daemon=True,
        )  # fmt: skip
        handle.reader.start()
        agent_started = time.perf_counter()
        handle.timings.start = agent_started - started

        deadline = agent_started + spec.time_limit_s
        idle = 0.005
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                handle.timings.agent = time.perf_counter() - agent_started
                self._freeze(handle)
                return AgentEnd(timed_out=True)
            if handle.reader.is_alive():
                handle.reader.join(min(remaining, _POLL_S))
            # The exec's own state decides: the stream outlives the agent while an orphan holds its stdout,
            # and ends early if the agent closes stdout and stderr but runs on.
            running, exit_code = self._exec_state(handle)
            if not running:
                handle.timings.agent = time.perf_counter() - agent_started
                return AgentEnd(exit_code=exit_code)
            if not handle.reader.is_alive():
                # Nothing to block on: poll, quickly at first (the engine records an exit just after the EOF).
                time.sleep(min(remaining, idle))
                idle = min(idle * 2, _POLL_S)

    def _exec_state(self, handle: _DockerSample) -> tuple[bool, int | None]:
        try:
            info = self.api.exec_inspect(handle.exec_id)
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot inspect the agent: {exc}", sample_id=handle.spec.sample_id) from exc
        code = info.get("ExitCode")
        return bool(info["Running"]), int(code) if code is not None and not info["Running"] else None

    def _wait_forwarder(self, handle: _DockerSample) -> str | None:
        # The keeper prints one line once it listens; the agent must not race it to the port.
        deadline = time.perf_counter() + _READY_TIMEOUT_S
        logs = b""
        while time.perf_counter() < deadline:
            try:
                logs = self.api.logs(handle.container, stdout=True, stderr=True)
                if forwarder.READY.encode() in logs:
                    return None
                if not self.api.inspect_container(handle.container)["State"]["Running"]:
                    break
            except _ENGINE_ERRORS as exc:
                return f"cannot watch the gateway forwarder start: {exc}"
            time.sleep(0.02)
        tail = logs.decode("utf-8", "replace")[-2000:]
        return f"the gateway forwarder did not start within {_READY_TIMEOUT_S:g} s: {tail.strip() or 'no output'}"

    def _freeze(self, handle: _DockerSample) -> None:
        # Pausing stops the agent and anything it left behind, so /output holds still while it is read.
        if handle.paused or not handle.collectable:
            return
        try:
            self.api.pause(handle.container)
            handle.paused = True
        except docker.errors.APIError as exc:
            # 409: not running (the keeper is gone, and the tmpfs with it) or already paused.
            if exc.status_code != 409:
                raise SandboxError(f"cannot pause the container: {exc}", sample_id=handle.spec.sample_id) from exc
            try:
                state = self.api.inspect_container(handle.container)["State"]
            except _ENGINE_ERRORS as inner:
                raise SandboxError(f"cannot inspect the container: {inner}", sample_id=handle.spec.sample_id) from inner
            handle.paused = bool(state.get("Paused"))
            handle.collectable = bool(state.get("Running"))
        except _ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot pause the container: {exc}", sample_id=handle.spec.sample_id) from exc

    # -- collect -----------------------------------------------------------------------------------------

    def collect(self, handle: _DockerSample, end: AgentEnd) -> SampleOutput:
        """Read ``/output`` of the stopped (or frozen) agent and classify the sample.

        Held layout: the container has stopped (or, on a failed gateway start, the agent never ran), so
        nothing can write any more; ``/output`` is read through the held descriptor. Keeper layout: the
        container is paused before reading unless the agent exited cleanly and ``/output`` is read from the
        volume's mount point: that read never follows a link and tolerates a leftover process still writing
        (the agent only spoils its own answer), while ``get_archive`` would fail on a file that changes under
        it. The pause costs ~10 ms a sample.

        Raises:
            SandboxError: the engine failed to pause the container or to stream ``/output``.
        """
        spec = handle.spec
        clean = not end.timed_out and end.failure is None and end.exit_code == 0
        if handle.held:
            direct = True
            handle.collectable = handle.output_fd is not None
        else:
            direct = self.direct_read and _is_our_volume(handle.volume_path, spec.output_bytes)
            if not (clean and direct):
                self._freeze(handle)
        if not end.timed_out and end.failure is None and end.exit_code not in (0, None):
            end.oom_killed = self._oom_seen(handle, end.exit_code)
        # Held: checked at the time limit, before the kill (a stopped container has no pids to count).
        failed = end.timed_out or end.exit_code not in (0, None)
        if failed and (handle.pids_full or (not handle.held and self._pids_exhausted(handle))):
            end.notes.append(f"the pids limit of {spec.pids} was reached")
        if not handle.collectable and end.failure is None:
            end.failure = ("sandbox_error", "the container stopped before its output could be collected")
        if handle.reader is not None:
            handle.reader.join(0.1)  # output already in the pipe when the agent stopped
        end.stdout_tail, end.stderr_tail = handle.stdout.text(), handle.stderr.text()
        files = self._read_output(handle, direct) if handle.collectable else None
        return build_output(spec.task_id, spec.epoch, end, files, spec.limits, time_limit_s=spec.time_limit_s)

    def _oom_seen(self, handle: _DockerSample, exit_code: int) -> bool:
        # The engine may deliver the event a moment after the exec's exit: look twice for a SIGKILL.
        attempts = 4 if exit_code == SIGKILL_EXIT else 1
        for attempt in range(attempts):
            try:
                events = self.api.events(
                    since=f"{handle.started_at:.6f}",
                    until=f"{time.time():.6f}",
                    filters={"container": handle.container, "event": "oom"},
                    decode=True,
                )
                if any(True for _ in events):
                    return True
            except _ENGINE_ERRORS as exc:
                _log.warning("sandbox.oom_check_failed", sample=handle.spec.sample_id, error=str(exc))
                return False
            if attempt + 1 < attempts:
                time.sleep(0.1)
        return False

    def _pids_exhausted(self, handle: _DockerSample) -> bool:
        try:
            stats = self.api.stats(handle.container, stream=False, one_shot=True)
        except _ENGINE_ERRORS:
            return False
        pids = stats.get("pids_stats") or {}
        return bool(pids.get("limit")) and int(pids.get("current", 0)) >= int(pids["limit"])

    def _read_output(self, handle: _DockerSample, direct: bool) -> dict[str, OutputFile]:
        spec = handle.spec
        if handle.output_fd is not None:
            # The tmpfs root as the held descriptor reaches it; it may no longer be mounted anywhere.
            try:
                return files_from_dir(Path(f"/proc/self/fd/{handle.output_fd}"), spec.limits)
            except OSError as exc:
                raise SandboxError(f"cannot read /output: {exc}", sample_id=spec.sample_id) from exc
        if direct and handle.volume_path is not None:
            try:
                return files_from_dir(handle.volume_path, spec.limits)
            except OSError as exc:
                raise SandboxError(f"cannot read /output: {exc}", sample_id=spec.sample_id) from exc
        # Bounded by the volume's size plus one tar header per possible inode.
        limit = spec.output_bytes + 4096 * 1024 + 1024**2
        try:
            chunks, _ = self.api.get_archive(handle.container, "/output", chunk_size=256 * 1024)
            reader = io.BufferedReader(ChunkReader(chunks, limit), buffer_size=256 * 1024)
            files = files_from_tar(reader, spec.limits)
            while reader.read(1024**2):  # drain the stream so the connection can be reused
                pass
        except (*_ENGINE_ERRORS, OSError) as exc:
            raise SandboxError(f"cannot read /output: {exc}", sample_id=spec.sample_id) from exc
        except Exception as exc:  # tarfile's errors: the engine's archive is not one we can read
            raise SandboxError(f"cannot parse the /output archive: {exc}", sample_id=spec.sample_id) from exc
        return files

    # -- remove ------------------------------------------------------------------------------------------

    def remove(self, handle: _DockerSample) -> None:
        """Force-remove the container (paused or not), then the volume, the held descriptor and the host folder.

        Raises:
            SandboxError: the container or volume could not be removed.
        """
        problems: list[str] = []
        if handle.container is not None:
            try:
                self.api.remove_container(handle.container, force=True)
                handle.container = None
            except docker.errors.NotFound:
                handle.container = None
            except _ENGINE_ERRORS as exc:
                problems.append(f"container: {exc}")
        if handle.volume is not None and handle.container is None:
            for attempt in range(5):
                try:
                    self.api.remove_volume(handle.volume, force=True)
                    handle.volume = None
                    break
                except docker.errors.NotFound:
                    handle.volume = None
                    break
                except _ENGINE_ERRORS as exc:
                    # A volume can stay "in use" for a moment after its container is gone.
                    if attempt == 4:
                        problems.append(f"volume: {exc}")
                    time.sleep(0.05 * (attempt + 1))
        for stream in (handle.attach, handle.forwarder_stream):
            if stream is not None:
                stream.close()
        handle.attach = handle.forwarder_stream = None
        if handle.output_fd is not None:
            os.close(handle.output_fd)  # frees the tmpfs, unmounted since the container stopped
            handle.output_fd = None
        if handle.reader is not None:
            handle.reader.join(2.0)
        shutil.rmtree(handle.folder, ignore_errors=True)
        if problems:
            raise SandboxError("cleanup failed: " + "; ".join(problems), sample_id=handle.spec.sample_id)
