"""The agent's view of a task: exactly the files a container gets under ``/task``."""

from __future__ import annotations

import json

from runner.tasks.model import AgentTaskFile, Task


def agent_files(task: Task, time_limit_seconds: int = 900) -> dict[str, str]:
    """``prompt.md`` and ``task.json`` for one task. Nothing host-only is in here."""
    task_file = AgentTaskFile(task_id=task.id, kind=task.kind, time_limit_seconds=time_limit_seconds)
    return {
        "prompt.md": task.prompt.rstrip() + "\n",
        "task.json": json.dumps(task_file.model_dump(mode="json"), indent=2, sort_keys=True) + "\n",
    }
