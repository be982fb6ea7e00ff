"""One root error, one subclass per stage.

Library code raises these with structured fields; only ``runner.cli`` turns them into
messages and exit codes.
"""

from __future__ import annotations


class IspmError(Exception):
    """Root of every error the runner raises on purpose."""


class WorldError(IspmError):
    """The world snapshot, its manifest or its docs are missing, malformed or tampered with."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or [message]
        super().__init__(message if not problems else message + "\n" + "\n".join(f"  - {p}" for p in problems))


class TaskError(IspmError):
    """A task file is malformed, or its witness queries or ground truth do not hold."""

    def __init__(self, message: str, *, path: str | None = None, task_id: str | None = None) -> None:
        self.path = path
        self.task_id = task_id
        where = ", ".join(x for x in (f"file {path}" if path else "", f"task {task_id}" if task_id else "") if x)
        super().__init__(f"{where}: {message}" if where else message)


class GatewayError(IspmError):
    """The model gateway or a provider client failed: a missing key, an unknown provider, a provider fault."""


class GradingError(IspmError):
    """Grading could not proceed: malformed votes, an unparseable witness, or inconsistent grader input."""


class SandboxError(IspmError):
    """A sandbox backend could not create, run, collect or remove a sample (the engine, not the agent, failed)."""

    def __init__(self, message: str, *, sample_id: str | None = None) -> None:
        self.sample_id = sample_id
        super().__init__(f"sample {sample_id}: {message}" if sample_id else message)
