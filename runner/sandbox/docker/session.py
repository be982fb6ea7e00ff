"""A sandbox session: one locked-down container that a host drives command by command (Inspect's sandbox model).

``ispm run`` starts the agent *inside* the container and waits for it; Inspect runs the agent on the host and
asks the sandbox to run commands and read and write files. A session is the same container as a sample's
(docs/sandbox.md: read-only root, the world read-only, ``/task`` and ``/docs``, ``/output`` a size-capped tmpfs
volume, no network, no capabilities, the same caps on pids, memory and CPU) held up by a keeper (uid 65534)
in the keeper layout, and every command is an exec as the agent's uid 10001.

One difference, for Inspect's tooling: ``/var/tmp`` is a size-capped tmpfs that allows ``exec``. Inspect
installs its sandbox tools there (the agent bridge's model proxy, ``bash_session``, ``exec_remote``) and runs
them as the default user, since root is not available here. What it costs the lockdown: README, "From Inspect".

Files are read and written by the agent's uid too (``cat`` in the container), so the file system's own
permissions apply to Inspect exactly as to the agent. Every read is capped on the host.
"""

from __future__ import annotations

import posixpath
import secrets
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any, Literal

import docker.errors
from docker.types import Mount
from docker.utils.socket import frames_iter
from pydantic import BaseModel, ConfigDict, Field

from runner.contract import AGENT_CONTRACT
from runner.errors import SandboxError
from runner.paths import world_dir
from runner.sandbox.backend import (
    LABEL_OWNER,
    LABEL_RUN,
    LABEL_SAMPLE,
    LABEL_SANDBOX,
    make_sample_dir,
    owner_id,
    staged,
)
from runner.sandbox.collect import CollectLimits, OutputFile
from runner.sandbox.docker import engine, lockdown, volume
from runner.sandbox.docker.engine import ENGINE_ERRORS, engine_errors, name_part, output_archive
from runner.sandbox.docker.layout import AGENT_USER, KEEPER_USER
from runner.sandbox.docker.streams import raw_socket
from runner.world import DOCS_DIR, SNAPSHOT_NAME

WORKDIR = "/tmp"
"""The session's working directory (relative paths resolve against it) and ``HOME``, as in a sample."""
EXEC_TMP = "/var/tmp"
"""The one scratch folder that allows ``exec``: Inspect's sandbox tools live there."""
TIMEOUT = "/usr/bin/timeout"
"""Wraps a command that has a timeout. By absolute path: it runs before the command, never the image's PATH."""
SHELL = "/bin/sh"
KILL_AFTER_S = 2
"""How long a timed-out command has after SIGTERM before ``timeout`` sends its process group SIGKILL."""
BACKSTOP_S = 10.0
"""How long past its timeout the host waits for a command's stream before it gives up on it."""

# The file scripts: the path is "$1", never interpolated; each outcome has its own exit code.
_EXIT_NOT_FOUND, _EXIT_DENIED, _EXIT_IS_DIR, _EXIT_TOO_LARGE = 66, 77, 78, 79
_READ_SCRIPT = f"""f=$1
[ -d "$f" ] && exit {_EXIT_IS_DIR}
[ -e "$f" ] || exit {_EXIT_NOT_FOUND}
[ -r "$f" ] || exit {_EXIT_DENIED}
size=$(stat -L -c %s -- "$f") || exit 1
[ "$size" -gt "$2" ] && exit {_EXIT_TOO_LARGE}
exec cat -- "$f"
"""
_WRITE_SCRIPT = f"""f=$1
[ -d "$f" ] && exit {_EXIT_IS_DIR}
d=$(dirname -- "$f")
mkdir -p -- "$d" 2>/dev/null || exit {_EXIT_DENIED}
[ -w "$d" ] || [ -e "$f" ] || exit {_EXIT_DENIED}
[ ! -e "$f" ] || [ -w "$f" ] || exit {_EXIT_DENIED}
exec cat > "$f"
"""
FileStatus = Literal["ok", "not_found", "permission_denied", "is_directory", "too_large", "failed"]
_FILE_OUTCOMES: dict[int, FileStatus] = {
    0: "ok",
    _EXIT_NOT_FOUND: "not_found",
    _EXIT_DENIED: "permission_denied",
    _EXIT_IS_DIR: "is_directory",
    _EXIT_TOO_LARGE: "too_large",
}


def _default_world_file() -> Path:
    return world_dir() / SNAPSHOT_NAME


def _default_docs_dir() -> Path:
    return world_dir() / DOCS_DIR


def require_image(client: Any, image: str) -> None:
    """Check that the engine ``client`` reaches has ``image``.

    Raises:
        SandboxError: the image is missing (``ispm images`` builds ours), or the engine refused.
    """
    try:
        client.api.inspect_image(image)
    except docker.errors.ImageNotFound as exc:
        raise SandboxError(f"image not found: {image} (run `ispm images`)") from exc
    except ENGINE_ERRORS as exc:
        raise SandboxError(f"cannot inspect image {image}: {exc}") from exc


class SessionSpec(BaseModel):
    """One session's container: what it holds and its limits (the defaults are a sample's, ``SampleSpec``)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    session_id: str = Field(min_length=1, max_length=200)
    """Unique within the run: the ``ispm.sample`` label (an Inspect sample's id and epoch)."""
    run_id: str = Field(default="inspect", min_length=1, max_length=200)
    """The ``ispm.run`` label, so ``ispm sandbox sweep --run`` finds the sessions of one Inspect eval."""
    image: str
    """The image the container runs (the base image holds ``ispm-sql``)."""
    task_files: dict[str, str] | None = None
    """``/task``'s ``prompt.md`` and ``task.json``; ``None``: no ``/task``, the world and the docs alone."""
    memory_bytes: int = Field(default=2 * 1024**3, ge=16 * 1024**2)
    """Memory limit (swap is not allowed on top); the tmpfs folders are charged to it too."""
    cpus: float = Field(default=1.0, gt=0)
    """CPU limit, in cores."""
    pids: int = Field(default=256, ge=8)
    """Processes and threads, the keeper included."""
    output_bytes: int = Field(default=32 * 1024**2, ge=1024**2)
    """Size of ``/output``."""
    tmp_bytes: int = Field(default=64 * 1024**2, ge=1024**2)
    """Size of ``/tmp``, the working directory (``noexec``)."""
    exec_tmp_bytes: int = Field(default=256 * 1024**2, ge=1024**2)
    """Size of ``/var/tmp``, which allows ``exec`` for Inspect's sandbox tools."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment of every command."""
    world_file: Path = Field(default_factory=_default_world_file)
    """The snapshot, mounted read-only at ``/world/<its name>``."""
    docs_dir: Path = Field(default_factory=_default_docs_dir)
    """The schema docs, mounted read-only at ``/docs``."""
    limits: CollectLimits = Field(default_factory=CollectLimits)
    """How much of ``/output`` the host reads when it collects."""

    @property
    def sample_id(self) -> str:
        """The session's id, as the scratch folder and the volume name take it."""
        return self.session_id

    def labels(self) -> dict[str, str]:
        """The labels on the session's container and volume: a sweep removes them as it removes a sample's."""
        return {LABEL_SANDBOX: "1", LABEL_RUN: self.run_id, LABEL_SAMPLE: self.session_id, LABEL_OWNER: owner_id()}


class ExecOutcome(BaseModel):
    """What one command did, as the host saw it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    exit_code: int | None
    """The command's exit status; ``None`` when the host gave up on it (``timed_out``) or stopped reading."""
    stdout: bytes
    """Its standard output, at most the asked limit."""
    stderr: bytes
    """Its standard error, at most the asked limit."""
    timed_out: bool = False
    """It ran past its timeout and was killed with its process group."""
    over_limit: Literal["stdout", "stderr"] | None = None
    """The stream that passed the output limit; the host stopped reading there."""
    elapsed_s: float = 0.0
    """Wall time from the exec's start to its end."""


class FileRead(BaseModel):
    """A file read from the session, as the agent's uid may read it."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    status: FileStatus
    """``ok``, or why there are no bytes."""
    data: bytes = b""
    """The file's bytes when ``ok``."""
    detail: str = ""
    """The container's own message for ``failed``."""


class SandboxSession:
    """A running session container; every method may be called from any thread."""

    def __init__(self, spec: SessionSpec, client: Any | None = None) -> None:
        """Make and start the session's container (its ``/output`` volume, ``/task`` folder and mounts).

        Raises:
            SandboxError: the image or a mounted path is missing, or the engine refused.
        """
        self.spec = spec
        self.client = client if client is not None else engine.connect()
        self.api = self.client.api
        self.container: str | None = None
        self.volume: str | None = None
        for path, what in ((spec.world_file, "world snapshot"), (spec.docs_dir, "docs folder")):
            if not path.exists():
                raise SandboxError(f"{what} not found: {path}", sample_id=spec.session_id)
        self.folder = make_sample_dir(spec)
        try:
            self._start()
        except BaseException:
            self.remove()
            raise

    def _start(self) -> None:
        spec = self.spec
        try:
            require_image(self.client, spec.image)
        except SandboxError as exc:
            raise SandboxError(str(exc), sample_id=spec.session_id) from exc
        self.volume, _ = volume.create(self.api, spec)
        mounts = [
            Mount(f"/world/{spec.world_file.name}", str(staged(spec.world_file, "world")), type="bind", read_only=True),
            Mount("/docs", str(staged(spec.docs_dir, "docs")), type="bind", read_only=True),
            Mount("/output", self.volume, type="volume", no_copy=True),
        ]
        if spec.task_files is not None:
            _write_task_dir(self.folder / "task", spec.task_files)
            mounts.insert(0, Mount("/task", str(self.folder / "task"), type="bind", read_only=True))
        with engine_errors("cannot create the container", spec.session_id):
            host_config = lockdown.host_config(
                self.api,
                mounts=mounts,
                tmpfs={
                    WORKDIR: lockdown.tmpfs_options(spec.tmp_bytes),
                    EXEC_TMP: lockdown.tmpfs_options(spec.exec_tmp_bytes, executable=True),
                },
                pids=spec.pids,
                memory_bytes=spec.memory_bytes,
                cpus=spec.cpus,
                engine_init=True,
                log_driver="none",
            )
            created = self.api.create_container(
                spec.image,
                name=f"ispm-{name_part(spec.run_id)}-{name_part(spec.session_id)}-{secrets.token_hex(4)}",
                entrypoint=["sleep", "infinity"],
                command=[],
                user=KEEPER_USER,
                working_dir="/",
                environment={"HOME": WORKDIR, "ISPM_AGENT_CONTRACT": AGENT_CONTRACT} | spec.env,
                labels=spec.labels(),
                host_config=host_config,
            )
        self.container = str(created["Id"])
        with engine_errors("cannot start the container", spec.session_id):
            self.api.start(self.container)

    # -- commands ----------------------------------------------------------------------------------------

    def exec(
        self,
        command: list[str],
        *,
        stdin: bytes | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
        output_limit: int = 10 * 1024**2,
    ) -> ExecOutcome:
        """Run ``command`` as the agent's uid; ``workdir`` (relative to :data:`WORKDIR`) is its directory.

        With ``timeout_s`` it runs under ``timeout``, which ends its whole process group (SIGTERM, then SIGKILL
        after :data:`KILL_AFTER_S`). Each output stream is kept up to ``output_limit`` bytes; past that the
        host stops reading and says which stream it was.

        Raises:
            SandboxError: the engine could not start the command (the container is gone, say).
        """
        if not command:
            raise SandboxError("an empty command", sample_id=self.spec.session_id)
        argv = command
        if timeout_s is not None:
            argv = [TIMEOUT, f"--kill-after={KILL_AFTER_S}", f"{max(timeout_s, 0.001):g}s", *command]
        cwd = posixpath.join(WORKDIR, workdir) if workdir else WORKDIR
        with engine_errors("cannot start the command", self.spec.session_id):
            exec_id = str(
                self.api.exec_create(
                    self.container,
                    argv,
                    stdout=True,
                    stderr=True,
                    stdin=stdin is not None,
                    user=AGENT_USER,
                    workdir=cwd,
                    environment=env or None,
                )["Id"]
            )
            stream = self.api.exec_start(exec_id, socket=True)
        started = time.perf_counter()
        sock = raw_socket(stream)
        writer = None
        if stdin is not None:
            writer = threading.Thread(target=_feed, args=(sock, stdin), name="ispm-session-stdin", daemon=True)
            writer.start()
        deadline = None if timeout_s is None else started + timeout_s + KILL_AFTER_S + BACKSTOP_S
        out, err, over, gave_up = _drain(stream, sock, output_limit, deadline)
        elapsed = time.perf_counter() - started
        try:
            stream.close()
        finally:
            sock.close()
        if writer is not None:
            writer.join(1.0)
        code = None if gave_up or over else self._exit_code(exec_id)
        timed_out = gave_up or (
            timeout_s is not None and code in (124, 128 + 9) and elapsed >= timeout_s - 0.05  # timeout's own codes
        )
        return ExecOutcome(
            exit_code=None if timed_out else code,
            stdout=out,
            stderr=err,
            timed_out=timed_out,
            over_limit=over,
            elapsed_s=round(elapsed, 4),
        )

    def _exit_code(self, exec_id: str) -> int | None:
        # The stream ends a moment before the engine records the exit.
        for _ in range(50):
            with engine_errors("cannot inspect the command", self.spec.session_id):
                state = self.api.exec_inspect(exec_id)
            if not state.get("Running"):
                code = state.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.01)
        return None

    def read_file(self, path: str, limit: int) -> FileRead:
        """The bytes of ``path`` (relative to :data:`WORKDIR`), as the agent's uid reads them, at most ``limit``.

        Raises:
            SandboxError: the engine could not run the read.
        """
        outcome = self.exec([SHELL, "-c", _READ_SCRIPT, "sh", path, str(limit)], output_limit=limit)
        if outcome.over_limit == "stdout":
            return FileRead(status="too_large")
        status = _FILE_OUTCOMES.get(outcome.exit_code or 0, "failed") if outcome.exit_code is not None else "failed"
        if status == "ok":
            return FileRead(status="ok", data=outcome.stdout)
        return FileRead(status=status, detail=outcome.stderr.decode("utf-8", "replace").strip())

    def write_file(self, path: str, data: bytes) -> FileRead:
        """Write ``data`` to ``path`` (relative to :data:`WORKDIR`) as the agent's uid, making its folders.

        Returns a :class:`FileRead` without bytes: ``ok``, or why the write failed.

        Raises:
            SandboxError: the engine could not run the write.
        """
        outcome = self.exec([SHELL, "-c", _WRITE_SCRIPT, "sh", path], stdin=data, output_limit=64 * 1024)
        status = _FILE_OUTCOMES.get(outcome.exit_code or 0, "failed") if outcome.exit_code is not None else "failed"
        if status == "too_large" or (status == "ok" and outcome.exit_code is None):
            status = "failed"
        return FileRead(status=status, detail=outcome.stderr.decode("utf-8", "replace").strip())

    # -- collection and removal --------------------------------------------------------------------------

    def collect_output(self) -> dict[str, OutputFile]:
        """The files of ``/output``, each within its cap, symlinks reported and never followed.

        The container is paused while ``/output`` streams out, so nothing left running can change it under the
        read, and resumed afterwards.

        Raises:
            SandboxError: ``/output`` could not be read or its archive parsed.
        """
        spec = self.spec
        with engine_errors("cannot pause the container", spec.session_id):
            self.api.pause(self.container)
        try:
            return output_archive(self.api, self.container, spec.output_bytes, spec.limits, spec.session_id)
        finally:
            with engine_errors("cannot resume the container", spec.session_id):
                self.api.unpause(self.container)

    def remove(self) -> None:
        """Remove the container, its volume and its host folder. Idempotent.

        Raises:
            SandboxError: the container or the volume could not be removed (a sweep will).
        """
        self.container, self.volume, problems = volume.remove_with_container(self.api, self.container, self.volume)
        shutil.rmtree(self.folder, ignore_errors=True)
        if problems:
            raise SandboxError("cleanup failed: " + "; ".join(problems), sample_id=self.spec.session_id)


def _write_task_dir(folder: Path, files: dict[str, str]) -> None:
    # As runner.sandbox.backend.write_task_dir, from the files alone: readable by the agent's uid.
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)


def _feed(sock: socket.socket, data: bytes) -> None:
    # Stdin on its own thread, so a command that answers while it reads (cat) cannot deadlock the host.
    try:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)  # the engine closes the command's stdin on this end of file
    except OSError:
        pass  # the command ended before reading it all, or the host stopped reading


def _drain(
    stream: Any, sock: socket.socket, limit: int, deadline: float | None
) -> tuple[bytes, bytes, Literal["stdout", "stderr"] | None, bool]:
    # (stdout, stderr, the stream over the limit, whether the backstop deadline passed)
    buffers = {1: bytearray(), 2: bytearray()}
    sock.settimeout(None if deadline is None else max(deadline - time.perf_counter(), 0.001))
    try:
        for stream_id, chunk in frames_iter(stream, tty=False):  # type: ignore[no-untyped-call]
            target = buffers[2 if stream_id == 2 else 1]
            if len(target) + len(chunk) > limit:
                target += chunk[: limit - len(target)]
                return bytes(buffers[1]), bytes(buffers[2]), "stderr" if stream_id == 2 else "stdout", False
            target += chunk
            if deadline is not None:
                sock.settimeout(max(deadline - time.perf_counter(), 0.001))
    except TimeoutError:
        return bytes(buffers[1]), bytes(buffers[2]), None, True
    except OSError:
        pass  # the stream broke (the container went away): what came so far is the output
    return bytes(buffers[1]), bytes(buffers[2]), None, False
