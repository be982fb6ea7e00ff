"""The ``ispm`` sandbox provider: Inspect's ``SandboxEnvironment`` over our locked-down sandbox session.

Each sample gets a fresh :class:`~runner.sandbox.docker.session.SandboxSession` (docs/sandbox.md): the world
read-only, ``/task`` (when the sample's metadata names a task) and ``/docs``, no network, no capabilities, the
limits of a sample of ``ispm run``. Every command and every file operation runs as the agent's uid 10001; a
command as any other user (``root`` included) is refused with ``SandboxUserUnsupportedError``, since the sandbox
has no capabilities to give one. ``sandbox="ispm"`` needs no config; :class:`IspmSandboxConfig` may name another
image (an agent image built on our base image, for a bridged agent).

The Docker work is the session's; this module only translates between Inspect's contract and the session's
outcomes, on worker threads (the Docker SDK blocks).
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Any, Literal, overload

import anyio.to_thread
from inspect_ai.util import (
    ExecResult,
    OutputLimitExceededError,
    SandboxEnvironment,
    SandboxEnvironmentConfigType,
    SandboxEnvironmentLimits,
    SandboxUnavailableError,
    SandboxUserUnsupportedError,
    sandboxenv,
)
from pydantic import BaseModel, ConfigDict, Field

from runner.errors import IspmError, SandboxError
from runner.inspect_eval.names import registered
from runner.inspect_eval.task_set import task_by_id
from runner.sandbox.docker import engine
from runner.sandbox.docker.session import FileRead, SandboxSession, SessionSpec, require_image
from runner.sandbox.images import expected_tags
from runner.tasks.view import agent_files

AGENT_USERS = frozenset({"agent", "10001", "10001:10001"})
"""The names ``exec(user=...)`` accepts: the agent's own uid, under any of its spellings."""
TASK_METADATA_KEY = "task_id"
"""The sample metadata key naming the task whose ``/task`` the sandbox holds."""


class IspmSandboxConfig(BaseModel):
    """What ``sandbox=("ispm", IspmSandboxConfig(...))`` may change; everything else is the v1 lockdown."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    image: str | None = Field(default=None, min_length=1)
    """The container's image; ``None``: the base image of the current inputs (``ispm images`` builds it)."""
    run_id: str = Field(default="inspect", min_length=1, max_length=100)
    """The ``ispm.run`` label of the sandboxes, for ``ispm sandbox sweep --run``."""


def _config(config: SandboxEnvironmentConfigType | None) -> IspmSandboxConfig:
    if config is None:
        return IspmSandboxConfig()
    if isinstance(config, IspmSandboxConfig):
        return config
    raise ValueError(f"the ispm sandbox takes an IspmSandboxConfig or nothing, not {config!r}")


def _image(config: IspmSandboxConfig) -> str:
    return config.image or expected_tags()["base"]


_client: Any | None = None


def _engine() -> Any:
    # One Docker client for every session of the process: its connection pool serves each worker thread.
    global _client
    if _client is None:
        _client = engine.connect()
    return _client


@sandboxenv(name=registered("ispm"))
class IspmSandboxEnvironment(SandboxEnvironment):
    """One sample's locked-down container."""

    def __init__(self, session: SandboxSession) -> None:
        """Wrap a started ``session``."""
        super().__init__()
        self.session = session

    @classmethod
    def config_deserialize(cls, config: dict[str, Any]) -> BaseModel:
        """An :class:`IspmSandboxConfig` from its fields (as an eval log stores it)."""
        return IspmSandboxConfig.model_validate(config)

    @classmethod
    def default_concurrency(cls) -> int | None:
        """Two sandboxes at once, as an official run of v1."""
        return 2

    def default_polling_interval(self) -> float:
        """How often Inspect polls its sandbox tools (``exec_remote``, the agent bridge): 0.2 s, as for its docker
        sandbox; an exec here costs well under that."""
        return 0.2

    @classmethod
    async def task_init(cls, task_name: str, config: SandboxEnvironmentConfigType | None) -> None:
        """Check that the engine answers and the image is there before any sample starts.

        Raises:
            RuntimeError: the engine cannot be reached, or the image is missing (``ispm images`` builds ours).
        """
        image = _image(_config(config))
        try:
            await anyio.to_thread.run_sync(lambda: require_image(_engine(), image))
        except SandboxError as exc:
            raise RuntimeError(f"the ispm sandbox cannot start: {exc}") from exc

    @classmethod
    async def sample_init(
        cls, task_name: str, config: SandboxEnvironmentConfigType | None, metadata: dict[str, str]
    ) -> dict[str, SandboxEnvironment]:
        """A fresh session; with ``/task`` of the task the metadata names (``task_id``), else none.

        Raises:
            ValueError: the metadata names a task that is not in the task set.
            RuntimeError: the engine could not make the session.
        """
        settings = _config(config)
        task_id = metadata.get(TASK_METADATA_KEY)
        files = None
        if task_id is not None:
            try:
                files = agent_files(task_by_id(str(task_id)))
            except IspmError as exc:
                raise ValueError(f"the sample's metadata names task {task_id!r}: {exc}") from exc
        spec = SessionSpec(
            session_id=f"{task_id or 'world'}-{secrets.token_hex(4)}",
            run_id=settings.run_id,
            image=_image(settings),
            task_files=files,
        )
        try:
            session = await anyio.to_thread.run_sync(SandboxSession, spec, _engine())
        except SandboxError as exc:
            raise RuntimeError(str(exc)) from exc
        return {"default": cls(session)}

    @classmethod
    async def sample_cleanup(
        cls,
        task_name: str,
        config: SandboxEnvironmentConfigType | None,
        environments: dict[str, SandboxEnvironment],
        interrupted: bool,
    ) -> None:
        """Remove each session's container, volume and host folder (a sweep retries what fails)."""
        for environment in environments.values():
            if isinstance(environment, IspmSandboxEnvironment):
                # Labelled: what fails here, the next backend start or `ispm sandbox sweep` removes.
                with contextlib.suppress(SandboxError):
                    await anyio.to_thread.run_sync(environment.session.remove)

    @classmethod
    async def cli_cleanup(cls, id: str | None) -> None:
        """``inspect sandbox cleanup ispm [RUN]``: remove the sandboxes labelled with run ``RUN`` (default
        ``inspect``, what :class:`IspmSandboxConfig` labels them), and never an ``ispm run``'s."""
        run_id = id or IspmSandboxConfig().run_id
        await anyio.to_thread.run_sync(lambda: engine.sweep(_engine(), run_id))

    async def exec(
        self,
        cmd: list[str],
        input: str | bytes | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        timeout_retry: bool = True,
        concurrency: bool = True,
    ) -> ExecResult[str]:
        """Run ``cmd`` as the agent (see the module doc); ``timeout_retry`` is not used: a timeout is final.

        Raises:
            SandboxUserUnsupportedError: ``user`` is not the agent.
            SandboxUnavailableError: the engine could not start the command.
            TimeoutError: ``timeout`` passed; the command's process group was killed.
            PermissionError: ``cmd[0]`` is not executable.
            OutputLimitExceededError: stdout or stderr passed Inspect's exec output limit.
        """
        if user is not None and user not in AGENT_USERS:
            raise SandboxUserUnsupportedError(
                f"the ispm sandbox runs every command as the agent (uid 10001), not as {user!r}: it has no "
                "capabilities to switch users"
            )
        limit = SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE
        stdin = input.encode("utf-8") if isinstance(input, str) else input
        try:
            outcome = await anyio.to_thread.run_sync(
                lambda: self.session.exec(
                    cmd, stdin=stdin, workdir=cwd, env=env, timeout_s=timeout, output_limit=limit
                ),
                abandon_on_cancel=True,
            )
        except SandboxError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        stdout = outcome.stdout.decode("utf-8", "replace")
        stderr = outcome.stderr.decode("utf-8", "replace")
        if outcome.over_limit is not None:
            kept = stdout if outcome.over_limit == "stdout" else stderr
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_EXEC_OUTPUT_SIZE_STR, kept)
        if outcome.timed_out:
            raise TimeoutError(f"the command ran past its timeout of {timeout} s and was killed")
        code = outcome.exit_code if outcome.exit_code is not None else 1
        if code == 126 and "permission denied" in (stdout + stderr).lower():
            raise PermissionError(f"cannot execute {cmd[0]!r}: {(stdout + stderr).strip()}")
        return ExecResult(success=code == 0, returncode=code, stdout=stdout, stderr=stderr)

    async def write_file(self, file: str, contents: str | bytes) -> None:
        """Write ``file`` as the agent, making its folders.

        Raises:
            PermissionError: the agent may not write there (a read-only mount, a file without write permission).
            IsADirectoryError: ``file`` is a directory.
            SandboxUnavailableError: the engine could not run the write.
            OSError: the write failed otherwise (a full file system).
        """
        data = contents.encode("utf-8") if isinstance(contents, str) else contents
        try:
            result = await anyio.to_thread.run_sync(self.session.write_file, file, data)
        except SandboxError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        _raise_for(result, file, "write")

    @overload
    async def read_file(self, file: str, text: Literal[True] = True) -> str: ...

    @overload
    async def read_file(self, file: str, text: Literal[False]) -> bytes: ...

    async def read_file(self, file: str, text: bool = True) -> str | bytes:
        """Read ``file`` as the agent, at most Inspect's read limit; text keeps its newlines as they are.

        Raises:
            FileNotFoundError, PermissionError, IsADirectoryError: as the agent would meet them.
            OutputLimitExceededError: the file is larger than the limit.
            UnicodeDecodeError: ``text`` and the file is not UTF-8.
            SandboxUnavailableError: the engine could not run the read.
        """
        limit = SandboxEnvironmentLimits.MAX_READ_FILE_SIZE
        try:
            result = await anyio.to_thread.run_sync(self.session.read_file, file, limit)
        except SandboxError as exc:
            raise SandboxUnavailableError(str(exc)) from exc
        if result.status == "too_large":
            raise OutputLimitExceededError(SandboxEnvironmentLimits.MAX_READ_FILE_SIZE_STR, None)
        _raise_for(result, file, "read")
        return result.data.decode("utf-8") if text else result.data


def _raise_for(result: FileRead, file: str, verb: str) -> None:
    # Inspect's file errors, each naming the file.
    if result.status == "ok":
        return
    if result.status == "not_found":
        raise FileNotFoundError(f"cannot {verb} {file}: no such file")
    if result.status == "permission_denied":
        raise PermissionError(f"cannot {verb} {file}: permission denied")
    if result.status == "is_directory":
        raise IsADirectoryError(f"cannot {verb} {file}: it is a directory")
    raise OSError(f"cannot {verb} {file}: {result.detail or result.status}")
