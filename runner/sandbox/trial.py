"""``ispm sandbox try`` and ``ispm sandbox sweep`` as plain functions: the CLI only parses and prints.

``try_sample`` runs one sample of one task with any image, the first thing a person bringing their own agent
image runs. It is never an official run: it may mount a replay recording, and it may use the local backend.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from runner.contract import SampleOutput
from runner.errors import SandboxError, TaskError
from runner.sandbox.backend import Backend, SampleSpec, SweepReport, run_linked
from runner.sandbox.docker import DockerBackend, sweep
from runner.sandbox.images import ensure_images, expected_tags
from runner.sandbox.local import LocalBackend
from runner.tasks.catalog import catalog
from runner.tasks.view import agent_files

if TYPE_CHECKING:
    from runner.gateway.server import Gateway

BackendName = Literal["docker", "local"]
# Short names a person may type for our own images; they resolve to the tag of the current inputs.
_SHORT_NAMES = {
    "null": "agent-null",
    "replay": "agent-replay",
    "reference": "agent-reference",
    "claude-code": "agent-claude-code",
    "openai-agents": "agent-openai-agents",
    "codex": "agent-codex",
    "gemini": "agent-gemini",
    "mini-swe-agent": "agent-mini-swe-agent",
    "base": "base",
}


def own_image(image: str) -> str | None:
    """Our image's name (``agent-null``…) when ``image`` names one of ours by its short or full name, else None."""
    name = _SHORT_NAMES.get(image, image)
    return name if name in expected_tags() else None


def resolve_image(image: str) -> str:
    """``null``, ``replay``, ``agent-null``… become the current digest tag of our image; anything else is kept."""
    name = _SHORT_NAMES.get(image, image)
    tags = expected_tags()
    return tags.get(name, image)


def make_backend(name: BackendName, *, board: str | None = None, remove_behind: bool = False) -> Backend[Any]:
    """A backend by name; ``board``'s (its start sweep touches only that board's sandboxes), if given; with
    ``remove_behind``, a Docker backend removes each stopped sample behind it, and its :meth:`~Backend.close` waits
    for those removals (a run's backend: the next sample need not wait for the last one's removal).

    Raises:
        SandboxError: Docker is not reachable (``docker``), or the name is unknown.
    """
    if name == "docker":
        return DockerBackend(board=board, remove_behind=remove_behind)
    if name == "local":
        return LocalBackend()
    raise SandboxError(f"unknown sandbox backend {name!r}; use docker or local")


def try_sample(
    image: str,
    task_id: str,
    *,
    backend: BackendName = "docker",
    time_limit_s: float = 900.0,
    replay_dir: Path | None = None,
    command: list[str] | None = None,
    gateway: Gateway | None = None,
    run_id: str = "try",
    board: str | None = None,
) -> SampleOutput:
    """Run one sample (epoch 1, run ``run_id``) of ``task_id`` with ``image`` and return what was collected.

    ``run_id`` names and labels (``ispm.run``) the sample's resources; ``board`` labels them (``ispm.board``) and
    limits the backend's start sweep to that board's: a board's smoke test names its board in both.

    With ``gateway``, the agent reaches it through the sandbox's gateway path with a fresh per-sample token.

    Raises:
        TaskError: no task has that id (or the task set does not load).
        SandboxError: the backend cannot start (for example, Docker is unreachable).
    """
    task = catalog().by_id.get(task_id)
    if task is None:
        raise TaskError(f"no task {task_id!r}; see `ispm tasks list`")
    name = own_image(image)
    if name is not None and backend == "docker":
        ensure_images(names=[name])  # one of ours is built the first time something names it
    spec = SampleSpec(
        task_id=task.id,
        run_id=run_id,
        board=board,
        image=resolve_image(image),
        command=command,
        task_files=agent_files(task, time_limit_seconds=int(time_limit_s)),
        time_limit_s=time_limit_s,
        replay_dir=replay_dir,
    )
    sandboxes = make_backend(backend, board=board)
    try:
        return run_linked(sandboxes, spec, gateway)
    finally:
        sandboxes.close()


def sweep_sandbox(run_id: str | None = None, *, orphans_only: bool = False) -> SweepReport:
    """Remove leftover sandbox containers, volumes and networks (of one run, if given), and dead owners' scratch
    folders (a sweep of every run; a live owner's are always spared).

    Raises:
        SandboxError: the Docker engine cannot be reached or listed.
    """
    return sweep(run_id=run_id, orphans_only=orphans_only)


def sample_summary(out: SampleOutput) -> list[str]:
    """The human lines ``ispm sandbox try`` prints for one collected sample."""
    lines = [
        f"{out.task_id} epoch {out.epoch}: {out.status}" + (f": {out.error}" if out.error else ""),
        f"exit code {out.exit_code}, oom killed {str(out.oom_killed).lower()}",
    ]
    if out.answer is not None:
        lines.append(
            f"answer: verdict {out.answer.verdict or '-'}, {len(out.answer.evidence)} evidence items, "
            f"{len(out.answer.queries)} queries, {len(out.answer.response)} characters of response"
        )
    lines.append(f"query log: {len(out.queries)} entries; trace: {len(out.trace)} entries")
    lines += [f"note: {note}" for note in out.notes]
    t = out.timings
    lines.append(
        f"timings (s): create {t.create:.3f}, start {t.start:.3f}, agent {t.agent:.3f}, "
        f"collect {t.collect:.3f}, remove {t.remove:.3f}"
    )
    for name, tail in (("stdout", out.stdout_tail), ("stderr", out.stderr_tail)):
        if tail.strip():
            lines.append(f"--- {name} (tail) ---\n{tail.rstrip()}")
    return lines
