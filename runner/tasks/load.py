"""Load the task set from ``tasks/v1/*.yaml``. All or nothing: one bad file and nothing loads."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import ValidationError

from runner.errors import TaskError
from runner.tasks.model import Task

TASK_SET_DIR = "v1"
# PyYAML's safe loader in libyaml's C, where PyYAML was built with it (its wheels are): the same documents, parsed
# some twenty times faster, which is most of a run's start-up otherwise (127 files).
_SAFE_LOADER = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


def load_task_file(path: Path) -> Task:
    """Parse and validate one task file. Raises ``TaskError`` naming the file (and task, if known)."""
    try:
        raw = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TaskError(f"malformed YAML: {exc}", path=str(path)) from exc
    task_id = raw.get("id") if isinstance(raw, dict) else None
    if not isinstance(raw, dict):
        raise TaskError("a task file must hold one mapping", path=str(path))
    try:
        task = Task.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'task'}: {e['msg']}" for e in exc.errors())
        raise TaskError(f"invalid task: {problems}", path=str(path), task_id=task_id) from exc
    return task


def load_tasks(tasks_root: Path) -> list[Task]:
    """Every task of the v1 set, sorted by id.

    Raises:
        TaskError: on the first malformed file, unknown vendor or category, or duplicate id.
    """
    folder = tasks_root / TASK_SET_DIR
    if not folder.is_dir():
        raise TaskError(f"task folder not found: {folder}")
    seen: dict[str, Path] = {}
    tasks = []
    for path in sorted(folder.glob("*.yaml")):
        task = load_task_file(path)
        if task.id in seen:
            raise TaskError(f"duplicate id, also in {seen[task.id]}", path=str(path), task_id=task.id)
        if path.stem != task.id:
            raise TaskError(f"file name must be {task.id}.yaml", path=str(path), task_id=task.id)
        seen[task.id] = path
        tasks.append(task)
    return sorted(tasks, key=lambda t: t.id)
