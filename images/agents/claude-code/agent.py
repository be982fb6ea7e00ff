#!/usr/bin/python3
"""Claude Code as an ispm.agent/v1 agent: the real CLI, headless, with its Bash tool. Standard library only.

This is the whole wrapper; copy it to wrap another command-line agent. It:

1. reads ``/task/prompt.md`` and ``/task/task.json``;
2. runs ``claude -p <prompt> --output-format stream-json --verbose`` with only the Bash and Read tools, no
   permission prompts, the model from ``ISPM_MODEL`` and all optional traffic off, telling it to query the
   snapshot with ``ispm-sql`` (so every query lands in ``/output/queries.jsonl``) and to write
   ``/output/answer.json`` itself;
3. copies Claude Code's event stream to ``/output/trace.jsonl`` (lines capped);
4. writes a failure answer when Claude Code ends, or is stopped at the time budget, without a valid one.

The model is reached through the gateway's Anthropic Messages endpoint: ``ANTHROPIC_BASE_URL`` and
``ANTHROPIC_API_KEY`` (the per-sample token). When only the ``OPENAI_*`` variables are set, they are used.

Configuration (environment): ``ISPM_MODEL`` (passed as ``--model``; the gateway answers with the run's
candidate whatever is asked), ``ISPM_TIME_BUDGET_S`` (default: the task's time limit minus a margin),
``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``, ``ISPM_CLAUDE`` (the CLI's path).

Exit codes: 0 when Claude Code wrote a valid answer; 1 when a failure answer had to be written; 2 when the task
could not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

CLAUDE = os.environ.get("ISPM_CLAUDE", "/opt/claude-code/bin/claude")
TASK_DIR = Path(os.environ.get("ISPM_TASK_DIR", "/task"))
OUTPUT_DIR = Path(os.environ.get("ISPM_OUTPUT_DIR", "/output"))
# Kept back from the sandbox's time limit so the failure answer is written before the kill.
MARGIN_S = 30.0
TRACE_LINE_CHARS = 20_000
TRACE_MAX_BYTES = 16 * 1024**2
ANSWER_FORMAT = "ispm.answer/v1"

INSTRUCTIONS = """\
You are an identity-security analyst. You answer one question about a frozen, read-only SQLite snapshot of a \
company's identity estate (HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub, MongoDB Atlas).

- Query it only with the Bash tool and the `ispm-sql` command: `ispm-sql "SELECT ..."` (one statement per call; \
`ispm-sql --help` for options). Do not open the database any other way.
- The schema is documented in /docs (start with /docs/overview.md); read it before trusting a column.
- Finish by writing /output/answer.json with the Bash tool. It is a JSON object:
  {"format": "ispm.answer/v1", "response": "<the conclusion first, then a short explanation>",
   "verdict": "yes" | "no" | null  (null for a question that asks for a list),
   "evidence": [{"vendor": "hibob|okta|azure|aws|gcp|gws|github|atlas", "kind": "person|account|group|role|...",
                 "identifier": "<the vendor's own identifier>", "fact": "<why it matters>"}],
   "queries": ["<the SQL your conclusion rests on, verbatim>"]}
- You have about {minutes} minutes. Write the answer before the time runs out.
"""


def budget_s(task: dict[str, Any]) -> float:
    """Seconds Claude Code may run: ``ISPM_TIME_BUDGET_S``, else the task's limit minus a margin."""
    configured = os.environ.get("ISPM_TIME_BUDGET_S", "").strip()
    if configured:
        return float(configured)
    limit = float(task.get("time_limit_seconds") or 900)
    return max(10.0, limit - min(MARGIN_S, limit * 0.2))


def claude_env() -> dict[str, str]:
    """The CLI's environment: the gateway as its Anthropic endpoint, and nothing optional that would call out."""
    env = dict(os.environ)
    env.setdefault("HOME", "/tmp")
    if "ANTHROPIC_BASE_URL" not in env and "OPENAI_BASE_URL" in env:
        env["ANTHROPIC_BASE_URL"] = env["OPENAI_BASE_URL"].rstrip("/").removesuffix("/v1")
    if "ANTHROPIC_API_KEY" not in env and "OPENAI_API_KEY" in env:
        env["ANTHROPIC_API_KEY"] = env["OPENAI_API_KEY"]
    env |= {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }
    return env


def claude_command(prompt: str, model: str, minutes: int) -> list[str]:
    """``claude`` headless: stream-json events on stdout, Bash and Read only, never a permission prompt."""
    return [
        CLAUDE,
        "--bare",  # no hooks, plugins sync, CLAUDE.md discovery or background prefetches
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",  # stream-json needs it with -p
        "--model",
        model,
        "--tools",
        "Bash,Read",
        "--dangerously-skip-permissions",  # the sandbox is the boundary: no network, read-only root
        "--no-session-persistence",
        "--append-system-prompt",
        INSTRUCTIONS.replace("{minutes}", str(minutes)),
    ]


def copy_events(stream: TextIO, trace: Path, last: dict[str, Any]) -> None:
    """Copy each stream-json line to ``trace`` (capped); keep the final ``result`` event in ``last``."""
    written = 0
    with trace.open("a", encoding="utf-8") as sink:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "result":
                last.update(event)
            text = line.rstrip("\n")[:TRACE_LINE_CHARS]
            if written + len(text) < TRACE_MAX_BYTES:
                sink.write(text + "\n")
                sink.flush()
                written += len(text) + 1


def run_claude(command: list[str], timeout_s: float, trace: Path) -> tuple[str, dict[str, Any]]:
    """Run Claude Code until it ends or ``timeout_s`` passes; returns how it ended and its ``result`` event."""
    last: dict[str, Any] = {}
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=claude_env(), cwd="/tmp"
    )
    assert process.stdout is not None
    reader = threading.Thread(target=copy_events, args=(process.stdout, trace, last), daemon=True)
    reader.start()
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return f"was stopped at the time budget of {timeout_s:g} s", last
    reader.join(timeout=5)
    return f"exited with code {code}", last


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


def failure_answer(reason: str, result_text: str, queries: list[str]) -> dict[str, Any]:
    """A valid answer that says why there is no real one, with Claude Code's last words if it had any."""
    response = f"No answer was written: Claude Code {reason}."
    if result_text.strip():
        response += "\n\nClaude Code's final message:\n" + result_text.strip()[:20_000]
    return {"format": ANSWER_FORMAT, "response": response, "verdict": None, "evidence": [], "queries": queries}


def main() -> int:
    """Run Claude Code on the task; leave a valid ``answer.json`` behind in every case."""
    try:
        task = json.loads((TASK_DIR / "task.json").read_text(encoding="utf-8"))
        prompt = (TASK_DIR / "prompt.md").read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"claude-code-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    timeout_s = budget_s(task)
    model = os.environ.get("ISPM_MODEL", "").strip() or "claude-sonnet-4-6"
    command = claude_command(prompt, model, max(1, round(timeout_s / 60)))
    started = time.monotonic()
    try:
        ended, last = run_claude(command, timeout_s, OUTPUT_DIR / "trace.jsonl")
    except OSError as exc:
        ended, last = f"could not be started ({exc})", {}
    answer_path = OUTPUT_DIR / "answer.json"
    print(f"claude-code-agent: {ended} after {time.monotonic() - started:.1f} s, {last.get('num_turns')} turns")
    if answer_is_valid(answer_path):
        return 0
    reason = f"{ended}, and its answer.json is not valid" if answer_path.exists() else ended
    answer = failure_answer(reason, str(last.get("result") or ""), logged_queries(OUTPUT_DIR))
    answer_path.write_text(json.dumps(answer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 1


if __name__ == "__main__":
    sys.exit(main())
