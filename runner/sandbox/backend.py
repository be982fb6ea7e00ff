"""The sandbox backend interface: create, run, collect, remove, one sample at a time.

A backend turns a :class:`SampleSpec` into a :class:`~runner.contract.SampleOutput`. The four phases are
abstract; :meth:`Backend.run_sample` strings them together, times them, turns a :class:`SandboxError` into a
recorded ``sandbox_error`` sample, and calls ``remove`` in a ``finally``. Backends: ``docker`` (the default,
:mod:`runner.sandbox.docker`) and ``local`` (:mod:`runner.sandbox.local`, development only: it isolates
nothing, says so, and has ``isolates = False`` so official runs can refuse it). A Kubernetes backend would
be a third implementation of the same four methods.

Resources a backend makes carry an owner label (host, pid and process start time of the runner), so that
the sweep at every start removes what a killed runner left behind, and only that. A run's resources also carry
the *attempt* that made them (one start or resume of the run in one process), so a process that no longer owns a
run can remove its own sandboxes of it and spare the new owner's, which carry the same run id.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import socket
import stat
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from runner import log
from runner.contract import SampleOutput, SampleTimings
from runner.errors import SandboxError
from runner.paths import world_dir
from runner.sample_key import SampleKey
from runner.sandbox.collect import AgentEnd, CollectLimits
from runner.world import DOCS_DIR, SNAPSHOT_NAME

if TYPE_CHECKING:
    from runner.gateway.server import Gateway

_log = log.get(__name__)

GATEWAY_SOCKET_NAME = "gateway.sock"
FORWARDER_PORT = 8765
"""The loopback port the forwarder listens on inside a container (each sample has its own loopback)."""

LABEL_SANDBOX = "ispm.sandbox"
LABEL_RUN = "ispm.run"
LABEL_SAMPLE = "ispm.sample"
LABEL_OWNER = "ispm.owner"
LABEL_NODE = "ispm.node"
"""Set on a cluster node's sandboxes: which node made them (``runner.cluster``), for people and audits."""
LABEL_ATTEMPT = "ispm.attempt"
"""Set on a run's sandboxes: which start or resume of the run made them (:attr:`SampleSpec.attempt`)."""
LABEL_BOARD = "ispm.board"
"""Set on a board's sandboxes: which board made them (:attr:`SampleSpec.board`), so its sweeps spare another's."""


def _default_world_file() -> Path:
    return world_dir() / SNAPSHOT_NAME


def _default_docs_dir() -> Path:
    return world_dir() / DOCS_DIR


class SampleSpec(BaseModel):
    """Everything a backend needs to run one sample of one task."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    task_id: str
    epoch: int = Field(default=1, ge=1)
    run_id: str = "adhoc"
    """Labels every resource of the sample (``ispm.run``), so a run's leftovers can be swept alone."""
    attempt: str | None = None
    """The start or resume of the run that made the sample, in one process: a random id per scheduling of the run
    (``runner.run.scheduler``), labelled ``ispm.attempt``. Two attempts of one run (a board worker that lost its
    lease, and the worker that took the run over) share the run id and may share the owner: this tells their
    sandboxes apart, so the first can sweep its own and spare the other's. ``None`` outside a run."""
    board: str | None = None
    """The board whose run or smoke test made the sample (its ``board_id``), labelled ``ispm.board``: boards that
    share an engine sweep only their own. Set by the sample runner, never from the run's spec (the record's)."""
    image: str
    """The agent image. Its entrypoint and command are the agent, unless ``command`` overrides them."""
    command: list[str] | None = None
    """Run this instead of the image's entrypoint and command (tests, custom agents)."""
    task_files: dict[str, str]
    """``/task``: exactly ``prompt.md`` and ``task.json`` (see ``runner.tasks.view.agent_files``)."""
    time_limit_s: float = Field(default=900.0, gt=0)
    """Wall time of the agent, enforced from outside; then the sample is killed and recorded as ``timeout``."""
    memory_bytes: int = Field(default=2 * 1024**3, ge=16 * 1024**2)
    """Memory limit (swap is not allowed on top)."""
    cpus: float = Field(default=1.0, gt=0)
    pids: int = Field(default=256, ge=8)
    """Processes and threads, the keeper included."""
    output_bytes: int = Field(default=32 * 1024**2, ge=1024**2)
    """Size of ``/output``; writes past it fail with ENOSPC."""
    tmp_bytes: int = Field(default=64 * 1024**2, ge=1024**2)
    """Size of the ``/tmp`` scratch space."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the agent. Never a provider key: the gateway token is the only credential."""
    world_file: Path = Field(default_factory=_default_world_file)
    """The snapshot, mounted read-only at ``/world/<its name>``."""
    docs_dir: Path = Field(default_factory=_default_docs_dir)
    """The schema docs, mounted read-only at ``/docs``."""
    replay_dir: Path | None = None
    """Mounted read-only at ``/replay`` for the replay agent. Holds gold answers: calibration runs only."""
    gateway_socket_dir: Path | None = None
    """A directory holding the gateway's Unix socket ``gateway.sock``, mounted read-only at ``/ispm/gateway``."""
    gateway_token: SecretStr | None = None
    """The per-sample gateway token, given to the agent as ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY``."""
    node: str | None = None
    """The cluster node that runs the sample (its Ray node id), labelled ``ispm.node`` on its resources."""
    gateway_model: str | None = None
    """The candidate's model name, given to the agent as ``ISPM_MODEL`` (informational: the gateway decides)."""
    limits: CollectLimits = Field(default_factory=CollectLimits)
    """How much of the output the host reads."""
    log_tail_bytes: int = Field(default=16 * 1024, ge=256)
    """How much of the end of stdout and of stderr is kept."""

    @field_validator("task_files")
    @classmethod
    def _exactly_the_task_files(cls, value: dict[str, str]) -> dict[str, str]:
        if set(value) != {"prompt.md", "task.json"}:
            raise ValueError(f"task_files must be exactly prompt.md and task.json, not {sorted(value)}")
        return value

    @property
    def key(self) -> SampleKey:
        """Which sample this is."""
        return SampleKey(task_id=self.task_id, epoch=self.epoch)

    @property
    def sample_id(self) -> str:
        """``<task>.e<epoch>``: unique within a run, the gateway's sample key and the ``ispm.sample`` label."""
        return self.key.label()

    def labels(self) -> dict[str, str]:
        """The labels on every resource this sample makes."""
        labels = {
            LABEL_SANDBOX: "1",
            LABEL_RUN: self.run_id,
            LABEL_SAMPLE: self.sample_id,
            LABEL_OWNER: owner_id(),
        }
        if self.node is not None:
            labels[LABEL_NODE] = self.node
        if self.attempt is not None:
            labels[LABEL_ATTEMPT] = self.attempt
        if self.board is not None:
            labels[LABEL_BOARD] = self.board
        return labels


class SandboxNaming(Protocol):
    """What names and labels a sandbox's resources: a :class:`SampleSpec`, or an Inspect session's spec
    (:mod:`runner.sandbox.docker.session`)."""

    @property
    def sample_id(self) -> str:
        """Unique within a run: the ``ispm.sample`` label and the prefix of the sandbox's names."""
        ...

    @property
    def output_bytes(self) -> int:
        """Size of ``/output``."""
        ...

    def labels(self) -> dict[str, str]:
        """The labels on every resource the sandbox makes."""
        ...


class SweepReport(BaseModel):
    """What a sweep removed (and what it could not)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    containers: list[str] = Field(default_factory=list)
    """Short ids of the containers removed."""
    volumes: list[str] = Field(default_factory=list)
    """Names of the volumes removed."""
    networks: list[str] = Field(default_factory=list)
    """Names of the networks removed."""
    directories: list[str] = Field(default_factory=list)
    """Scratch folders removed (only by a sweep of every run)."""
    failures: list[str] = Field(default_factory=list)
    """One line per resource that could not be removed: its kind, name and the engine's error."""


def gateway_env(token: str, model: str | None = None, port: int = FORWARDER_PORT) -> dict[str, str]:
    """The environment that points stock SDKs at the gateway through the loopback forwarder on ``port``.

    OpenAI SDKs read ``OPENAI_BASE_URL``/``OPENAI_API_KEY``; Anthropic's and Claude Code read
    ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``; Google's ``google-genai`` reads
    ``GOOGLE_GEMINI_BASE_URL`` and ``GEMINI_API_KEY``. Every key is the per-sample token. ``ISPM_MODEL`` is the
    candidate's model name, for agents that must name one: the gateway sends every request to the candidate
    whatever it names.
    """
    root = f"http://127.0.0.1:{port}"
    env = {
        "OPENAI_BASE_URL": f"{root}/v1",
        "OPENAI_API_KEY": token,
        "ANTHROPIC_BASE_URL": root,
        "ANTHROPIC_API_KEY": token,
        "ANTHROPIC_AUTH_TOKEN": token,
        "GOOGLE_GEMINI_BASE_URL": root,
        "GEMINI_API_KEY": token,
        "ISPM_GATEWAY_URL": f"{root}/v1",
        "ISPM_GATEWAY_TOKEN": token,
        "ISPM_GATEWAY_SOCKET": f"/ispm/gateway/{GATEWAY_SOCKET_NAME}",
    }
    if model:
        env["ISPM_MODEL"] = model
    return env


@contextmanager
def gateway_link(gateway: Gateway, sample_id: str) -> Iterator[tuple[Path, SecretStr]]:
    """A per-sample gateway socket directory and token, for ``SampleSpec.gateway_socket_dir``/``gateway_token``.

    Listens on ``<dir>/gateway.sock`` bound to ``sample_id`` (a token that leaks to another sample is refused
    there), issues the token, and on exit revokes it (which closes the listener) and removes the directory.

    Raises:
        GatewayError: the socket cannot be bound, or the sample already holds a live token.
    """
    folder = Path(tempfile.mkdtemp(prefix="", dir=process_scratch()))
    # The container's keeper (uid 65534) must traverse it; the socket itself is 0666 and the token guards it.
    folder.chmod(0o755)
    try:
        gateway.listen_unix(folder / GATEWAY_SOCKET_NAME, sample_id=sample_id)
        token = gateway.issue_token(sample_id)
        try:
            yield folder, SecretStr(token)
        finally:
            gateway.revoke(sample_id)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_linked(backend: Backend[Any], spec: SampleSpec, gateway: Gateway | None) -> SampleOutput:
    """Run ``spec`` through ``backend``, linked to ``gateway`` when there is one (:func:`gateway_link`: a per-sample
    socket and token, revoked once the sample ends); never raises for the sample's own failure.

    Raises:
        GatewayError: the sample's socket cannot be bound, or it already holds a live token.
    """
    if gateway is None:
        return backend.run_sample(spec)
    with gateway_link(gateway, spec.sample_id) as (folder, token):
        update = {"gateway_socket_dir": folder, "gateway_token": token, "gateway_model": gateway.model}
        return backend.run_sample(spec.model_copy(update=update))


# -- ownership ---------------------------------------------------------------------------------------------


def _process_start(pid: int) -> str | None:
    # Field 22 of /proc/<pid>/stat, after the parenthesised command (which may hold spaces).
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return raw.rsplit(")", 1)[1].split()[19]


def owner_id() -> str:
    """``<host>:<pid>:<start ticks>`` of this process: who owns the resources it makes."""
    return f"{socket.gethostname()}:{os.getpid()}:{_process_start(os.getpid()) or 0}"


def owner_alive(owner: str) -> bool:
    """Whether the runner that labelled a resource ``owner`` still runs.

    Owners on another host (or in another pid namespace) cannot be checked and count as alive: only an
    explicit sweep removes their resources. A pid that now belongs to a newer process counts as dead.
    """
    host, _, rest = owner.partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    return _process_start(int(pid_text)) == start


SCRATCH_ROOT = Path("/tmp/ispm-scratch")
"""Where every host folder a container mounts lives: fixed and neutral (never ``$TMPDIR``, which may name a user's
home), so the sandbox's mount table names neither the checkout, nor the run, nor the runner's process."""
OWNER_FILE = "owner"
"""In each process's scratch folder (never mounted): ``<pid>-<start ticks>`` of the process that owns it."""
_UNOWNED_GRACE_S = 60.0
"""A scratch folder without its owner file is being made, or was left by a process killed in between: swept after
this long."""

_scratch_lock = threading.Lock()
_scratch: dict[int, Path] = {}
"""This process's scratch folder, by pid (a forked child makes its own)."""
_staged: dict[tuple[object, ...], Path] = {}
"""Copies of worlds and docs folders in this process's scratch folder, by what their source was when copied."""


def _owner_token(pid: int) -> str:
    # Scratch folders are on this host, so pid and start time name the owner.
    return f"{pid}-{_process_start(pid) or 0}"


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def _remove_process_folder(folder: Path) -> None:
    # Sample folders go in their own finally; what is left at a clean exit is the staged worlds and the owner file.
    for key, path in list(_staged.items()):
        if path.parent.parent == folder:
            shutil.rmtree(path.parent, ignore_errors=True)
            _staged.pop(key, None)
    with contextlib.suppress(OSError):
        if [p.name for p in folder.iterdir()] == [OWNER_FILE]:
            (folder / OWNER_FILE).unlink()
    _remove_if_empty(folder)


def scratch_root() -> Path:
    """Where backends keep per-sample host folders: one randomly named folder per owner process, whose owner file
    lets a sweep find orphans."""
    return SCRATCH_ROOT


def _checked_root() -> Path:
    root = scratch_root()
    with contextlib.suppress(FileExistsError):
        root.mkdir(mode=0o1777)
        root.chmod(0o1777)  # shared by every user's runners, like /tmp itself (the umask narrowed the mkdir)
    found = os.lstat(root)
    # A fixed name in a shared /tmp: someone else may have put a folder, or a link, there first.
    shared_safely = not found.st_mode & 0o022 or found.st_mode & stat.S_ISVTX
    if not stat.S_ISDIR(found.st_mode) or found.st_uid not in (0, os.geteuid()) or not shared_safely:
        raise SandboxError(f"{root} is not a folder of root's or ours that others cannot tamper with: not using it")
    return root


def process_scratch() -> Path:
    """This process's scratch folder (made on first use, 0755: the engine's mounts and the agent must read it)."""
    pid = os.getpid()
    with _scratch_lock:
        mine = _scratch.get(pid)
        if mine is not None and mine.is_dir():
            return mine
        mine = Path(tempfile.mkdtemp(prefix="", dir=_checked_root()))
        (mine / OWNER_FILE).write_text(_owner_token(pid), encoding="utf-8")
        mine.chmod(0o755)
        _scratch[pid] = mine
        atexit.register(_remove_process_folder, mine)
        return mine


def make_sample_dir(spec: SandboxNaming) -> Path:
    """A fresh, randomly named per-sample host folder in this process's scratch folder (0755: the agent reads it).

    ``spec`` is only for the caller's symmetry: the name never says which sample, run or process it is.
    """
    del spec
    folder = Path(tempfile.mkdtemp(prefix="", dir=process_scratch()))
    folder.chmod(0o755)
    return folder


def _source_key(source: Path) -> tuple[object, ...]:
    # What the source is now: a changed file or folder is copied again, an unchanged one reused.
    resolved = source.resolve()
    files = sorted(p for p in resolved.rglob("*") if p.is_file()) if resolved.is_dir() else [resolved]
    return (str(resolved), *((str(p), p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in files))


def _copy_readable(source: Path, target: Path) -> None:
    # Readable by the agent's uid whatever the source's modes; the mounts are read-only anyway.
    if source.is_dir():
        shutil.copytree(source, target, symlinks=False)
        for path in [target, *target.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
    else:
        shutil.copyfile(source, target)
        target.chmod(0o644)


def staged(source: Path, name: str) -> Path:
    """A copy of the file or folder ``source``, named ``name``, in this process's scratch folder: what a container
    mounts instead of ``source``, whose path may name the checkout or a user's folder. Copied once per process
    while the source stays as it was."""
    key = (name, *_source_key(source))
    with _scratch_lock:
        copy = _staged.get(key)
    if copy is not None and copy.exists():
        return copy
    holder = Path(tempfile.mkdtemp(prefix="", dir=process_scratch()))
    holder.chmod(0o755)
    try:
        _copy_readable(source.resolve(), holder / name)
    except OSError as exc:
        shutil.rmtree(holder, ignore_errors=True)
        raise SandboxError(f"cannot copy {source} into the scratch folder: {exc}") from exc
    with _scratch_lock:
        _staged[key] = holder / name
    return holder / name


def stage_into(source: Path, folder: Path) -> Path:
    """A copy of ``source`` as ``folder`` (a sample's own, removed with the sample): for per-sample inputs."""
    try:
        _copy_readable(source.resolve(), folder)
    except OSError as exc:
        raise SandboxError(f"cannot copy {source} into the sample's folder: {exc}") from exc
    return folder


def write_task_dir(folder: Path, spec: SampleSpec) -> None:
    """Write ``/task``'s files, readable by the agent's uid."""
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    for name, text in spec.task_files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        path.chmod(0o644)


def _scratch_owner_alive(folder: Path) -> bool:
    try:
        token = (folder / OWNER_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        # Being made right now, or its maker was killed before it wrote the owner file.
        with contextlib.suppress(OSError):
            return time.time() - folder.stat().st_mtime < _UNOWNED_GRACE_S
        return False
    pid, _, start = token.partition("-")
    return pid.isdigit() and _process_start(int(pid)) == start


def sweep_scratch() -> tuple[list[str], list[str]]:
    """Remove the scratch folders of dead owners: (removed, failures).

    A live owner's folder is always spared, even by a sweep of every run: it holds its running samples' ``/task``,
    and a sweep from another process (``ispm sandbox sweep``) must not pull it from under them. The folders are on
    this host, so whether the owner lives is always known. Folders of other users' runners are theirs to sweep.
    """
    removed: list[str] = []
    failures: list[str] = []
    root = scratch_root()
    if not root.is_dir():
        return removed, failures
    for folder in sorted(root.iterdir()):
        if folder.is_symlink() or not folder.is_dir() or folder.lstat().st_uid != os.geteuid():
            continue
        if _scratch_owner_alive(folder):
            continue
        try:
            shutil.rmtree(folder)
            removed.append(str(folder))
        except OSError as exc:
            failures.append(f"{folder}: {exc}")
    return removed, failures


# -- the interface -----------------------------------------------------------------------------------------


class SampleHandle:
    """A sample between ``create`` and ``remove``: its spec, host folder and phase timings."""

    def __init__(self, spec: SampleSpec, folder: Path) -> None:
        """Track one sample of ``spec`` whose host files live in ``folder``."""
        self.spec = spec
        self.folder = folder
        self.timings = SampleTimings()


H = TypeVar("H", bound=SampleHandle)


class BackendFailed(SandboxError):
    """The backend itself failed under a sample (its Docker engine stopped answering): the sample's outcome is the
    host's fault, not the agent's, so the run stops (``interrupted``, resumable) and the sample is not journaled."""


REMOVALS_BEHIND = 4
"""How many samples' removals may wait behind their samples at once: a sample that ends when that many wait has its
thread wait for room, so removals never pile up."""


class Removals:
    """Samples' removals done behind them, one at a time on a thread of the backend's, at most ``bound`` waiting.

    A removal that fails is logged with its sample's id and left to the sweep (the run's and every start's), as an
    inline one is. The thread is a pool worker's: the interpreter waits for it at exit, so nothing handed over is
    dropped even if :meth:`wait` is never called.
    """

    def __init__(self, bound: int = REMOVALS_BEHIND) -> None:
        """No removal waiting yet; the thread starts with the first."""
        self._room = threading.BoundedSemaphore(bound)
        self._lock = threading.Lock()
        self._pending: set[Future[None]] = set()
        self._pool: ThreadPoolExecutor | None = None

    def hand_over(self, remove: Callable[[], None], sample_id: str, run_id: str) -> bool:
        """Queue ``remove`` (waiting for room first); False if it cannot be queued (the interpreter is ending):
        the caller removes inline then."""
        self._room.acquire()
        try:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-remove")
                future = self._pool.submit(_remove_logged, remove, sample_id, run_id)
                self._pending.add(future)
        except RuntimeError:  # the pool no longer takes work: the interpreter is shutting down
            self._room.release()
            return False
        future.add_done_callback(self._done)
        return True

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)
        self._room.release()

    def wait(self) -> None:
        """Return once every removal handed over so far has ended (removed, or failed and logged)."""
        with self._lock:
            pending = list(self._pending)
        wait_for(pending)

    def close(self) -> None:
        """Wait for every removal handed over, and end the thread (a later hand-over starts another)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def _remove_logged(remove: Callable[[], None], sample_id: str, run_id: str) -> None:
    started = time.perf_counter()
    try:
        remove()
    except SandboxError as exc:
        _log.error("sandbox.remove_failed", sample=sample_id, run=run_id, error=str(exc), left_to="sweep")
    except Exception as exc:  # a bug must not end the thread silently: the sweep still removes what is left
        _log.exception("sandbox.remove_crashed", sample=sample_id, run=run_id, error=str(exc), left_to="sweep")
    else:
        _log.debug("sandbox.removed", sample=sample_id, run=run_id, seconds=round(time.perf_counter() - started, 4))


class Backend(ABC, Generic[H]):
    """One way of running samples. Subclasses implement the four phases; callers use :meth:`run_sample`."""

    name: ClassVar[str]
    isolates: ClassVar[bool]
    """False for a backend that must never serve an official run."""
    removals: Removals | None = None
    """Where the removal of a sample that no longer runs anything goes, behind it (``None``: inline, before
    :meth:`run_sample` returns). A backend that has one waits for them in :meth:`close` and :meth:`wait_removed`."""

    def fault(self) -> str | None:
        """Why this backend cannot run samples now, through no fault of a sample's (its engine stopped); ``None``
        when it can. Asked after a sample that did not end ``ok``: the answer decides whose fault that was."""
        return None

    @abstractmethod
    def create(self, spec: SampleSpec) -> H:
        """Make the sample's resources (nothing runs yet). Cleans up after itself if it fails.

        Raises:
            SandboxError: the resources could not be made (missing image, engine error).
        """

    @abstractmethod
    def run(self, handle: H) -> AgentEnd:
        """Start the agent and wait for it to end or for the time limit; fills ``start`` and ``agent`` timings.

        Raises:
            SandboxError: the engine failed while running the sample.
        """

    @abstractmethod
    def collect(self, handle: H, end: AgentEnd) -> SampleOutput:
        """Read the output of a finished (or stopped) agent and decide the sample's status.

        Raises:
            SandboxError: the output could not be read for a reason that is not the agent's.
        """

    @abstractmethod
    def remove(self, handle: H) -> None:
        """Remove every resource of the sample. Idempotent; safe on a partly created sample.

        Raises:
            SandboxError: something could not be removed (a later sweep will).
        """

    def sweep(
        self,
        run_id: str | None = None,
        *,
        attempt: str | None = None,
        board: str | None = None,
        orphans_only: bool = False,
    ) -> SweepReport:
        """Remove sandbox resources: every run's, or ``run_id``'s, or only those one ``attempt`` made (labelled
        ``ispm.attempt``), sparing another attempt's of the same run; with ``board``, only that board's.

        The default removes dead owners' scratch folders only (per process, so none when only an attempt's or a
        board's are asked for).
        """
        if attempt is not None or board is not None:
            return SweepReport()
        removed, failures = sweep_scratch()
        return SweepReport(directories=removed, failures=failures)

    def removable_behind(self, handle: H) -> bool:
        """Whether nothing of the sample runs any more, so its removal may wait behind it. The default: never."""
        return False

    def wait_removed(self) -> None:
        """Return once every sample run so far is removed (or its removal failed and was logged for the sweep)."""
        if self.removals is not None:
            self.removals.wait()

    def close(self) -> None:
        """Wait for the removals behind the samples, then release the backend's own resources (connections)."""
        if self.removals is not None:
            self.removals.close()

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        """Create, run, collect and remove one sample; never raises for a sample's own failure.

        A ``SandboxError`` in any phase becomes a ``sandbox_error`` sample with the message as its error, so
        the caller carries on with the next sample. ``remove`` always runs; if it fails the output says so
        in its notes. With :attr:`removals`, a sample that no longer runs anything (:meth:`removable_behind`) is
        handed over to be removed behind it and ``timings.remove`` is the hand-over (waiting for room included); a
        failure of that removal is logged and left to the sweep. :meth:`wait_removed` and :meth:`close` wait for
        them.
        """
        timings = SampleTimings()
        handle: H | None = None
        output: SampleOutput | None = None
        try:
            started = time.perf_counter()
            handle = self.create(spec)
            timings.create = time.perf_counter() - started
            end = self.run(handle)
            started = time.perf_counter()
            output = self.collect(handle, end)
            timings.collect = time.perf_counter() - started
        except SandboxError as exc:
            _log.error("sandbox.sample_failed", sample=spec.sample_id, run=spec.run_id, error=str(exc))
            output = SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="sandbox_error", error=str(exc))
        finally:
            if handle is not None:
                timings.start, timings.agent = handle.timings.start, handle.timings.agent
                started = time.perf_counter()
                if not self._remove_behind(handle):
                    try:
                        self.remove(handle)
                    except SandboxError as exc:
                        _log.error("sandbox.remove_failed", sample=spec.sample_id, run=spec.run_id, error=str(exc))
                        if output is not None:
                            output.notes.append(f"cleanup failed (a sweep will retry): {exc}")
                timings.remove = time.perf_counter() - started
        assert output is not None  # every path above either set it or raised past this point
        output.timings = SampleTimings(**{k: round(v, 4) for k, v in timings.model_dump().items()})
        return output

    def _remove_behind(self, handle: H) -> bool:
        # Only a sample that runs nothing any more: one still running (a keeper, an agent past a failed start) is
        # removed before run_sample returns, as it ends the agent.
        if self.removals is None or not self.removable_behind(handle):
            return False
        spec = handle.spec
        return self.removals.hand_over(lambda: self.remove(handle), spec.sample_id, spec.run_id)
