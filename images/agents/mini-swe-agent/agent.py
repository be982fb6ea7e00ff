#!/usr/bin/python3
"""mini-swe-agent as an ispm.agent/v1 agent: its ``mini`` command and its default agent, unchanged. Standard library.

This is the whole wrapper; copy it to wrap another command-line agent that is configured by its environment. It:

1. reads ``/task/prompt.md`` and ``/task/task.json``;
2. runs ``python3 -m minisweagent.run.mini --agent-class default`` (the ``mini`` command, its built-in ``mini.yaml``
   and its non-interactive ``DefaultAgent``) with the task and a few lines telling it to query the snapshot with
   ``ispm-sql`` (so every query lands in ``/output/queries.jsonl``), to write ``/output/answer.json`` and then to
   submit the way mini-swe-agent always ends (``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``);
3. copies mini-swe-agent's trajectory (each message: the model's turns with their bash tool calls, each command's
   output) to ``/output/trace.jsonl``, lines capped;
4. writes a failure answer when the agent ends, or is stopped at the time budget, without a valid one.

Everything mini-swe-agent is told comes from the environment (its documented variables), nothing from a config
file: the model is ``openai/$ISPM_MODEL`` (litellm's OpenAI provider, so chat completions at ``OPENAI_BASE_URL``,
the gateway, with the per-sample token in ``OPENAI_API_KEY``), ``MSWEA_COST_TRACKING=ignore_errors`` (a model
litellm cannot price would stop the agent on its first turn), ``MSWEA_CONFIGURED`` (no first-run set-up prompt)
and ``LITELLM_LOCAL_MODEL_COST_MAP`` (litellm reads its bundled price map instead of fetching one).

Configuration (environment): ``ISPM_MODEL``, ``ISPM_TIME_BUDGET_S`` (default: the task's time limit minus a
margin), ``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``.

Exit codes: 0 when the agent wrote a valid answer; 1 when a failure answer had to be written; 2 when the task could
not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TASK_DIR = Path(os.environ.get("ISPM_TASK_DIR", "/task"))
OUTPUT_DIR = Path(os.environ.get("ISPM_OUTPUT_DIR", "/output"))
WORK_DIR = Path("/tmp/mini-swe-agent")
TRAJECTORY = WORK_DIR / "trajectory.json"
# Kept back from the sandbox's time limit so the failure answer is written before the kill.
MARGIN_S = 30.0
TRACE_LINE_CHARS = 20_000
TRACE_MAX_BYTES = 16 * 1024**2
ANSWER_FORMAT = "ispm.answer/v1"

INSTRUCTIONS = """\
You are an identity-security analyst. Answer the question below about a frozen, read-only SQLite snapshot of a \
company's identity estate (HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub, MongoDB Atlas). There is no \
codebase to change.

- Query it only with the `ispm-sql` command: `ispm-sql "SELECT ..."` (one statement per command; \
`ispm-sql --help` for options). Do not open the database any other way.
- The schema is documented in /docs (start with /docs/overview.md); read it before trusting a column.
- Finish by writing /output/answer.json, then submit. The answer is a JSON object:
  {"format": "ispm.answer/v1", "response": "<the conclusion first, then a short explanation>",
   "verdict": "yes" | "no" | null  (null for a question that asks for a list),
   "evidence": [{"vendor": "hibob|okta|azure|aws|gcp|gws|github|atlas", "kind": "person|account|group|role|...",
                 "identifier": "<the vendor's own identifier>", "fact": "<why it matters>"}],
   "queries": ["<the SQL your conclusion rests on, verbatim>"]}
- You have about {minutes} minutes. Write the answer before the time runs out.

The question:

"""


def budget_s(task: dict[str, Any]) -> float:
    """Seconds the agent may run: ``ISPM_TIME_BUDGET_S``, else the task's limit minus a margin."""
    configured = os.environ.get("ISPM_TIME_BUDGET_S", "").strip()
    if configured:
        return float(configured)
    limit = float(task.get("time_limit_seconds") or 900)
    return max(10.0, limit - min(MARGIN_S, limit * 0.2))


def mini_env() -> dict[str, str]:
    """mini-swe-agent's configuration, all of it: the gateway as litellm's OpenAI endpoint, no prompts, no fetches."""
    env = dict(os.environ)
    env.setdefault("HOME", "/tmp")
    model = env.get("ISPM_MODEL", "").strip() or "candidate"
    env |= {
        "MSWEA_MODEL_NAME": f"openai/{model}",  # litellm's OpenAI provider: chat completions at OPENAI_BASE_URL
        "MSWEA_COST_TRACKING": "ignore_errors",  # else a model litellm cannot price stops the agent
        "MSWEA_CONFIGURED": "true",  # no first-run set-up questions
        "MSWEA_GLOBAL_CONFIG_DIR": str(WORK_DIR / "config"),  # its .env and last run, on the writable /tmp
        "MSWEA_SILENT_STARTUP": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # the bundled price map: nothing but the gateway is reachable
        "LITELLM_TELEMETRY": "False",
        "HF_HUB_OFFLINE": "1",  # datasets is imported by mini-swe-agent; never let it look for a hub
    }
    return env


def mini_command(task_text: str) -> list[str]:
    """The ``mini`` command, headless: its default config and its default (non-interactive) agent."""
    return [
        sys.executable,
        "-I",
        "-m",
        "minisweagent.run.mini",
        "--agent-class",
        "default",
        "--task",
        task_text,
        "--output",
        str(TRAJECTORY),
    ]


def run_mini(command: list[str], timeout_s: float) -> str:
    """Run mini-swe-agent until it ends or ``timeout_s`` passes; returns how it ended."""
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, env=mini_env(), cwd="/tmp")
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return f"was stopped at the time budget of {timeout_s:g} s"
    return f"exited with code {code}"


def read_trajectory(path: Path) -> dict[str, Any]:
    """mini-swe-agent's trajectory (it rewrites it after every step), or an empty one."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def object_of(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def trace_lines(trajectory: dict[str, Any]) -> list[str]:
    """One line per message: role, text, tool calls, and the command's output and return code (not the raw
    provider response, which the gateway keeps), each capped; then the run's exit status."""
    lines = []
    for message in trajectory.get("messages") or []:
        if not isinstance(message, dict):
            continue
        extra = object_of(message.get("extra"))
        entry = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls", "tool_call_id")}
        entry |= {k: extra[k] for k in ("actions", "returncode", "exit_status", "interrupt_type") if k in extra}
        lines.append(json.dumps(entry, ensure_ascii=False, default=str)[:TRACE_LINE_CHARS])
    info = object_of(trajectory.get("info"))
    stats = object_of(info.get("model_stats"))
    end = {"event": "end", "exit_status": info.get("exit_status"), "api_calls": stats.get("api_calls")}
    lines.append(json.dumps(end | {"mini_version": info.get("mini_version")}, ensure_ascii=False, default=str))
    return lines


def write_trace(lines: list[str], trace: Path) -> None:
    """Append ``lines`` to ``trace`` up to its size cap."""
    written = 0
    with trace.open("a", encoding="utf-8") as sink:
        for line in lines:
            if written + len(line) >= TRACE_MAX_BYTES:
                break
            sink.write(line + "\n")
            written += len(line) + 1


def answer_is_valid(path: Path) -> bool:
    """Whether ``path`` holds a JSON object with a ``response`` in the answer format (the host checks the rest)."""
    try:
        answer = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(answer, dict):
        return False
    return answer.get("format", ANSWER_FORMAT) == ANSWER_FORMAT and isinstance(answer.get("response"), str)


def logged_queries(output_dir: Path) -> list[str]:
    """The SQL that ``ispm-sql`` ran without error, from its log."""
    queries: list[str] = []
    try:
        lines = (output_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return queries
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and not entry.get("error") and isinstance(entry.get("sql"), str):
            queries.append(entry["sql"])
    return queries[:1000]


def last_words(trajectory: dict[str, Any]) -> str:
    """The model's last text, if it had any."""
    for message in reversed(trajectory.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "assistant" and isinstance(message.get("content"), str):
            return str(message["content"]).strip()
    return ""


def failure_answer(reason: str, trajectory: dict[str, Any], queries: list[str]) -> dict[str, Any]:
    """A valid answer that says why there is no real one, with the agent's exit status and last words."""
    status = object_of(trajectory.get("info")).get("exit_status")
    response = f"No answer was written: mini-swe-agent {reason}" + (f" ({status})." if status else ".")
    words = last_words(trajectory)
    if words:
        response += "\n\nmini-swe-agent's final message:\n" + words[:20_000]
    return {"format": ANSWER_FORMAT, "response": response, "verdict": None, "evidence": [], "queries": queries}


def main() -> int:
    """Run mini-swe-agent on the task; leave a valid ``answer.json`` behind in every case."""
    try:
        task = json.loads((TASK_DIR / "task.json").read_text(encoding="utf-8"))
        prompt = (TASK_DIR / "prompt.md").read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"mini-swe-agent-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    timeout_s = budget_s(task)
    task_text = INSTRUCTIONS.replace("{minutes}", str(max(1, round(timeout_s / 60)))) + prompt
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        ended = run_mini(mini_command(task_text), timeout_s)
    except OSError as exc:
        ended = f"could not be started ({exc})"
    trajectory = read_trajectory(TRAJECTORY)
    write_trace(trace_lines(trajectory), OUTPUT_DIR / "trace.jsonl")
    answer_path = OUTPUT_DIR / "answer.json"
    print(f"mini-swe-agent-agent: {ended} after {time.monotonic() - started:.1f} s", file=sys.stderr)
    if answer_is_valid(answer_path):
        return 0
    reason = f"{ended}, and its answer.json is not valid" if answer_path.exists() else ended
    answer = failure_answer(reason, trajectory, logged_queries(OUTPUT_DIR))
    answer_path.write_text(json.dumps(answer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 1


if __name__ == "__main__":
    sys.exit(main())
