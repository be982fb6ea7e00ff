"""The Docker backend: every sample in a fresh, locked-down container, driven through the Docker SDK.

What the container looks like, and why each protection is there: docs/sandbox.md. What differs between the
held and the keeper layout lives in :mod:`.held` and :mod:`.keeper`; this module makes and removes the
sample's resources and asks its layout for the rest.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

import docker.errors
from docker.types import Mount
from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_fixed

from runner import log
from runner.contract import AGENT_CONTRACT, SampleOutput
from runner.errors import SandboxError
from runner.sandbox import forwarder
from runner.sandbox.backend import (
    Backend,
    Removals,
    SampleSpec,
    SweepReport,
    gateway_env,
    make_sample_dir,
    stage_into,
    staged,
    write_task_dir,
)
from runner.sandbox.collect import AgentEnd, build_output
from runner.sandbox.docker import cgroup, engine, lockdown, volume
from runner.sandbox.docker.engine import ENGINE_ERRORS, engine_errors, name_part
from runner.sandbox.docker.held import HeldLayout, find_init
from runner.sandbox.docker.keeper import KeeperLayout
from runner.sandbox.docker.layout import BIN_DIR, GATEWAY_DIR, DockerSample, Layout

_log = log.get(__name__)

SIGKILL_EXIT = 137


class DockerBackend(Backend[DockerSample]):
    """Runs each sample in a fresh container; see docs/sandbox.md for the layouts and the lockdown."""

    name = "docker"
    isolates = True

    def __init__(
        self,
        client: Any | None = None,
        *,
        sweep_on_start: bool = True,
        direct_read: bool = True,
        hold_output: bool = True,
        board: str | None = None,
        remove_behind: bool = False,
    ) -> None:
        """Connect to the engine and (by default) sweep what dead runners left behind (of ``board`` only, if given:
        a board's backend never sweeps another board's sandboxes on a shared engine).

        ``remove_behind`` removes each sample whose container has stopped on a thread of the backend's, behind the
        sample (:class:`~runner.sandbox.backend.Removals`): its container, volume and host folder are gone once
        :meth:`wait_removed` or :meth:`close` returns, not when ``run_sample`` does. A run's backend does that.

        ``direct_read`` lets collection read ``/output`` from the volume's host mount point when this process
        can see it (same host and mount namespace as the engine, and allowed to read it); otherwise, or
        with ``direct_read=False``, it streams ``get_archive``. Both paths are hostile-safe; the direct one
        saves the engine's per-archive rootfs mount, about 40 ms a sample on fuse-overlayfs.

        ``hold_output`` (with ``direct_read``) selects the held layout where this process can hold the
        volume: the agent is the container's main process and no exec is needed (docs/sandbox.md).
        Otherwise, or where the volume turns out not to be holdable, the keeper layout is used.

        Raises:
            SandboxError: the engine cannot be reached.
        """
        self.client = client if client is not None else engine.connect()
        self.api = self.client.api
        self.direct_read = direct_read
        try:
            self._pids_hierarchy = cgroup.pids_hierarchy(self.api.info())
        except (*ENGINE_ERRORS, OSError):
            self._pids_hierarchy = None
        self._init = find_init() if direct_read and hold_output else None
        self.holds_output = self._init is not None
        """Whether new samples use the held layout (cleared if a volume turns out not to be holdable)."""
        self.removals = Removals() if remove_behind else None
        if sweep_on_start:
            engine.sweep(self.client, board=board, orphans_only=True)
            cgroup.sweep(self._pids_hierarchy)

    def close(self) -> None:
        """Wait for the removals behind the samples, then close the engine connection."""
        super().close()
        self.client.close()

    def removable_behind(self, handle: DockerSample) -> bool:
        """Whether the sample's container has stopped: its agent, and everything it started, has ended."""
        return handle.layout is not None and handle.layout.stopped()

    def fault(self) -> str | None:
        """Why the engine cannot run samples now (it does not answer); ``None`` when it answers."""
        return engine.engine_fault(self.client)

    def sweep(
        self,
        run_id: str | None = None,
        *,
        attempt: str | None = None,
        board: str | None = None,
        orphans_only: bool = False,
    ) -> SweepReport:
        """See :func:`runner.sandbox.docker.engine.sweep`."""
        return engine.sweep(self.client, run_id, attempt=attempt, board=board, orphans_only=orphans_only)

    # -- create ------------------------------------------------------------------------------------------

    def create(self, spec: SampleSpec) -> DockerSample:
        """Make the output volume and the (not yet started) container.

        Raises:
            SandboxError: the image is missing or has no agent command, a mounted path is missing, or the
                engine refused.
        """
        for path, what in ((spec.world_file, "world snapshot"), (spec.docs_dir, "docs folder")):
            if not path.exists():
                raise SandboxError(f"{what} not found: {path}", sample_id=spec.sample_id)
        sample = DockerSample(spec, make_sample_dir(spec))
        try:
            self._create(sample)
        except BaseException:
            try:
                self.remove(sample)
            except SandboxError as exc:
                _log.warning("sandbox.partial_cleanup_failed", sample=spec.sample_id, error=str(exc))
            raise
        return sample

    def _create(self, sample: DockerSample) -> None:
        spec = sample.spec
        try:
            config = self.api.inspect_image(spec.image).get("Config") or {}
        except docker.errors.ImageNotFound as exc:
            raise SandboxError(f"image not found: {spec.image} (build it first)", sample_id=spec.sample_id) from exc
        except ENGINE_ERRORS as exc:
            raise SandboxError(f"cannot inspect image {spec.image}: {exc}", sample_id=spec.sample_id) from exc
        sample.agent_command = list(spec.command or [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])])
        if not sample.agent_command:
            raise SandboxError(f"image {spec.image} has no entrypoint or command", sample_id=spec.sample_id)
        sample.workdir = config.get("WorkingDir") or "/tmp"
        if spec.gateway_socket_dir is not None and spec.gateway_token is None:
            raise SandboxError("gateway_socket_dir is set but gateway_token is not", sample_id=spec.sample_id)

        write_task_dir(sample.folder / "task", spec)
        bin_dir = sample.folder / "bin"
        bin_dir.mkdir(mode=0o755)
        bin_dir.chmod(0o755)
        if spec.gateway_socket_dir is not None:
            script = bin_dir / "forwarder.py"
            shutil.copyfile(Path(forwarder.__file__), script)
            script.chmod(0o644)
        sample.volume, sample.volume_path = volume.create(self.api, spec)
        sample.layout = self._layout(sample)
        sample.layout.prepare(bin_dir)
        self._create_container(sample)

    def _layout(self, sample: DockerSample) -> Layout:
        # Held only where this process sees the (still empty) mount point; the start confirms it is the tmpfs.
        path = sample.volume_path
        if self._init is not None and self.holds_output and path is not None and os.access(path, os.X_OK):
            return HeldLayout(self.api, sample, self._init, self._fall_back_to_keeper)
        return KeeperLayout(self.api, sample, direct_read=self.direct_read)

    def _fall_back_to_keeper(self, sample: DockerSample) -> Layout:
        # The held container runs, yet the mount point is not its tmpfs (another mount namespace): the agent
        # never ran. Use the keeper layout from now on, starting with this sample.
        self.holds_output = False
        for stream in sample.streams:
            stream.close()
        sample.streams.clear()
        with engine_errors("cannot remove the container", sample.spec.sample_id):
            self.api.remove_container(sample.container, force=True)
        sample.container = None
        sample.layout = KeeperLayout(self.api, sample, direct_read=self.direct_read)
        self._create_container(sample)
        return sample.layout

    def _create_container(self, sample: DockerSample) -> None:
        spec, plan = sample.spec, sample.the_layout().plan()
        assert sample.volume is not None
        # Every bind source is a copy in the neutral scratch folder: no mount names the checkout or the run.
        world, docs = staged(spec.world_file, "world"), staged(spec.docs_dir, "docs")
        mounts = [
            Mount("/task", str(sample.folder / "task"), type="bind", read_only=True),
            Mount(f"/world/{spec.world_file.name}", str(world), type="bind", read_only=True),
            Mount("/docs", str(docs), type="bind", read_only=True),
            Mount("/output", sample.volume, type="volume", no_copy=True),
        ]
        if spec.replay_dir is not None:
            replay = sample.folder / "replay"
            if not replay.exists():
                stage_into(spec.replay_dir, replay)
            mounts.append(Mount("/replay", str(replay), type="bind", read_only=True))
        env = {"HOME": "/tmp", "ISPM_AGENT_CONTRACT": AGENT_CONTRACT}
        if spec.gateway_socket_dir is not None or plan.needs_bin:
            mounts.append(Mount(BIN_DIR, str(sample.folder / "bin"), type="bind", read_only=True))
        if spec.gateway_socket_dir is not None:
            assert spec.gateway_token is not None
            mounts.append(Mount(GATEWAY_DIR, str(spec.gateway_socket_dir.resolve()), type="bind", read_only=True))
            env |= gateway_env(spec.gateway_token.get_secret_value(), spec.gateway_model)
        env |= spec.env
        board = f"{name_part(spec.board)}-" if spec.board is not None else ""
        if sample.cgroup is None:
            sample.cgroup = cgroup.make(self._pids_hierarchy)
        with engine_errors("cannot create the container", spec.sample_id):
            host_config = lockdown.host_config(
                self.api,
                mounts=mounts,
                tmpfs={"/tmp": lockdown.tmpfs_options(spec.tmp_bytes)},
                pids=spec.pids,
                cgroup_parent=sample.cgroup.parent if sample.cgroup is not None else None,
                memory_bytes=spec.memory_bytes,
                cpus=spec.cpus,
                engine_init=plan.engine_init,
                log_driver=plan.log_driver,
            )
            created = self.api.create_container(
                spec.image,
                name=f"ispm-{board}{name_part(spec.run_id)}-{name_part(spec.sample_id)}-{secrets.token_hex(4)}",
                entrypoint=plan.entrypoint,
                command=[],
                user=plan.user,
                working_dir=plan.workdir,
                environment=env,
                labels=spec.labels(),
                host_config=host_config,
                # With it the client sets StdinOnce: the engine closes the agent's stdin after the gate line.
                stdin_open=plan.stdin_open,
            )
        sample.container = str(created["Id"])

    # -- run ---------------------------------------------------------------------------------------------

    def run(self, handle: DockerSample) -> AgentEnd:
        """Start the sample and wait for the agent's end or the time limit, as its layout does it.

        Raises:
            SandboxError: the engine failed to start the container or the agent.
        """
        return handle.the_layout().run(time.perf_counter())

    # -- collect -----------------------------------------------------------------------------------------

    def collect(self, handle: DockerSample, end: AgentEnd) -> SampleOutput:
        """Read ``/output`` of the stopped (or frozen) agent and classify the sample.

        Raises:
            SandboxError: the engine failed to pause the container or to stream ``/output``.
        """
        spec, layout = handle.spec, handle.the_layout()
        layout.settle(end)
        if not end.timed_out and end.failure is None and end.exit_code not in (0, None):
            end.oom_killed = self._oom_seen(handle, end.exit_code)
        failed = end.timed_out or end.exit_code not in (0, None)
        # Whatever the exit code, a limit hit is said: an agent that survived its fork bomb or a killed child.
        oom = end.oom_killed
        if not oom and end.failure is None and (end.timed_out or end.exit_code == 0):
            oom = self._oom_seen(handle, 0)
        if oom:
            end.limits_reached.append("memory")
        counted = handle.cgroup is not None and handle.cgroup.pids_reached(spec.pids)
        if counted or (failed and layout.pids_reached()):
            end.notes.append(f"the pids limit of {spec.pids} was reached")
            end.limits_reached.append("pids")
        if handle.collectable and layout.output_full():
            end.notes.append(f"/output is full: its cap of {spec.output_bytes} bytes was reached")
            end.limits_reached.append("output")
        if not handle.collectable and end.failure is None:
            end.failure = ("sandbox_error", "the container stopped before its output could be collected")
        if handle.reader is not None:
            handle.reader.join(0.1)  # output already in the pipe when the agent stopped
        end.stdout_tail, end.stderr_tail = handle.stdout.text(), handle.stderr.text()
        files = layout.read_output() if handle.collectable else None
        return build_output(spec.task_id, spec.epoch, end, files, spec.limits, time_limit_s=spec.time_limit_s)

    def _oom_seen(self, sample: DockerSample, exit_code: int) -> bool:
        # The engine reports an OOM kill as an `oom` event on the container, also for an exec; it may deliver
        # it a moment after the exit: look again for a SIGKILL.
        def seen() -> bool:
            events = self.api.events(
                since=f"{sample.started_at:.6f}",
                until=f"{time.time():.6f}",
                filters={"container": sample.container, "event": "oom"},
                decode=True,
            )
            return any(True for _ in events)

        try:
            return Retrying(
                retry=retry_if_result(lambda found: not found),
                stop=stop_after_attempt(4 if exit_code == SIGKILL_EXIT else 1),
                wait=wait_fixed(0.1),
                retry_error_callback=lambda _: False,
            )(seen)
        except ENGINE_ERRORS as exc:
            _log.warning("sandbox.oom_check_failed", sample=sample.spec.sample_id, error=str(exc))
            return False

    # -- remove ------------------------------------------------------------------------------------------

    def remove(self, handle: DockerSample) -> None:
        """Force-remove the container (paused or not), then the volume, what the layout holds and the host folder.

        Raises:
            SandboxError: the container or volume could not be removed.
        """
        left = volume.remove_with_container(self.api, handle.container, handle.volume)
        handle.container, handle.volume, problems = left
        for stream in handle.streams:
            stream.close()
        handle.streams.clear()
        if handle.layout is not None:
            handle.layout.release()
        if handle.cgroup is not None and handle.container is None:
            handle.cgroup.remove()
        if handle.reader is not None:
            handle.reader.join(2.0)
        shutil.rmtree(handle.folder, ignore_errors=True)
        if problems:
            raise SandboxError("cleanup failed: " + "; ".join(problems), sample_id=handle.spec.sample_id)
