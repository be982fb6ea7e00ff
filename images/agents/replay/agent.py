#!/usr/bin/python3
"""The replay agent (ispm.agent/v1): replays a recorded investigation, then its recorded answer.

It reads the task id from /task/task.json, loads the recording /replay/<task_id>.json
(``{"queries": [SQL, ...], "answer": {...}}``), runs every query through ``ispm-sql`` so that each
one lands in /output/queries.jsonl exactly as an agent's would, and writes the recorded answer to
/output/answer.json.

A recording that holds gold answers is mounted only into non-official (calibration) runs; the
runner, not this script, enforces that. With no recording for the task it writes nothing, says
why on stderr and exits 3. A recorded query that fails is reported on stderr and the replay goes
on: the query log keeps the error, which is what an audit of the recording needs to see.

The local backend moves the folders with $ISPM_TASK_DIR, $ISPM_OUTPUT_DIR and $ISPM_REPLAY_DIR,
and the tool with $ISPM_SQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

EXIT_NO_RECORDING = 3
EXIT_BAD_INPUT = 4


class ReplayError(Exception):
    """The task file or the recording is missing or malformed."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _env_path(name: str, default: str) -> Path:
    return Path(os.environ.get(name, default))


def read_task_id(task_dir: Path) -> str:
    """The ``task_id`` from task.json; refuses ids that could point outside the replay folder."""
    try:
        task = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"cannot read {task_dir / 'task.json'}: {exc}", EXIT_BAD_INPUT) from exc
    task_id = task.get("task_id") if isinstance(task, dict) else None
    # The id becomes a file name: refuse anything that could name a path outside the replay folder.
    if not isinstance(task_id, str) or not task_id or Path(task_id).name != task_id or task_id[0] == ".":
        raise ReplayError(f"task.json has no usable task_id: {task_id!r}", EXIT_BAD_INPUT)
    return task_id


def load_recording(replay_dir: Path, task_id: str) -> tuple[list[str], dict[str, Any]]:
    """The recorded queries and answer for ``task_id``."""
    path = replay_dir / f"{task_id}.json"
    if not path.is_file():
        raise ReplayError(f"no recording for task {task_id!r} at {path}", EXIT_NO_RECORDING)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"cannot read recording {path}: {exc}", EXIT_BAD_INPUT) from exc
    queries = data.get("queries") if isinstance(data, dict) else None
    answer = data.get("answer") if isinstance(data, dict) else None
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise ReplayError(f"recording {path}: 'queries' must be a list of SQL strings", EXIT_BAD_INPUT)
    if not isinstance(answer, dict):
        raise ReplayError(f"recording {path}: 'answer' must be an object", EXIT_BAD_INPUT)
    return queries, answer


def replay_query(tool: str, sql: str, env: dict[str, str]) -> int:
    """Run one query through the SQL tool (SQL on stdin, so any text survives); returns its exit code."""
    done = subprocess.run([tool, "--json", "-"], input=sql, text=True, env=env, stdout=subprocess.DEVNULL, check=False)
    return done.returncode


def main() -> int:
    """Replay the recording for this task; see the module docstring for the exit codes."""
    task_dir = _env_path("ISPM_TASK_DIR", "/task")
    output = _env_path("ISPM_OUTPUT_DIR", "/output")
    replay_dir = _env_path("ISPM_REPLAY_DIR", "/replay")
    try:
        task_id = read_task_id(task_dir)
        queries, answer = load_recording(replay_dir, task_id)
    except ReplayError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return exc.code

    env = dict(os.environ)
    # The tool logs to /output/queries.jsonl by default; follow the output folder if it moved.
    env.setdefault("ISPM_QUERY_LOG", str(output / "queries.jsonl"))
    tool = os.environ.get("ISPM_SQL", "ispm-sql")
    for number, sql in enumerate(queries, start=1):
        code = replay_query(tool, sql, env)
        if code != 0:
            print(f"replay: query {number} of {len(queries)} exited {code}", file=sys.stderr)

    (output / "answer.json").write_text(json.dumps(answer, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"replay: task {task_id}: {len(queries)} queries replayed, answer written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
