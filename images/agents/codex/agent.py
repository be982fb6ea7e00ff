#!/usr/bin/python3
"""Codex CLI as an ispm.agent/v1 agent: the real CLI, headless, with its own tools. Standard library only.

This is the whole wrapper; copy it to wrap another command-line agent. It:

1. reads ``/task/prompt.md`` and ``/task/task.json``;
2. writes Codex's own configuration file, ``$CODEX_HOME/config.toml`` (``CODEX_HOME`` is a fresh folder under
   ``/tmp``): a custom model provider pointing at the gateway's OpenAI Responses endpoint, ``web_search =
   "disabled"`` (a search the provider runs is refused by the gateway), no approval prompts and no sandbox of
   Codex's own (the container is the boundary), no analytics, feedback or update check (nothing but the gateway is
   reachable), and our instructions as ``developer_instructions``. Every other setting is Codex's default: its
   multi-agent tools stay on;
3. runs ``codex exec --json <prompt>``, telling the model to query the snapshot with ``ispm-sql`` (so every query
   lands in ``/output/queries.jsonl``) and to write ``/output/answer.json`` itself;
4. copies Codex's JSON events to ``/output/trace.jsonl`` (lines and file capped);
5. writes a failure answer when Codex ends, or is stopped at the time budget, without a valid one.

Configuration (environment): ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` (the gateway and the per-sample token;
the key is read by Codex through ``env_key``, never written to the file), ``ISPM_MODEL`` (the model Codex names;
the gateway answers with the run's candidate whatever is asked), ``ISPM_TIME_BUDGET_S`` (default: the task's time
limit minus a margin), ``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``, ``ISPM_CODEX`` (the CLI's path).

Exit codes: 0 when Codex wrote a valid answer; 1 when a failure answer had to be written; 2 when the task could
not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

CODEX = os.environ.get("ISPM_CODEX", "/opt/codex/bin/codex")
TASK_DIR = Path(os.environ.get("ISPM_TASK_DIR", "/task"))
OUTPUT_DIR = Path(os.environ.get("ISPM_OUTPUT_DIR", "/output"))
# Kept back from the sandbox's time limit so the failure answer is written before the kill.
MARGIN_S = 30.0
TRACE_LINE_CHARS = 20_000
TRACE_MAX_BYTES = 16 * 1024**2
ANSWER_FORMAT = "ispm.answer/v1"
PROVIDER = "ispm"

INSTRUCTIONS = """\
You are an identity-security analyst. You answer one question about a frozen, read-only SQLite snapshot of a \
company's identity estate (HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub, MongoDB Atlas).

- Query it only with a shell command and the `ispm-sql` command: `ispm-sql "SELECT ..."` (one statement per call; \
`ispm-sql --help` for options). Do not open the database any other way.
- The schema is documented in /docs (start with /docs/overview.md); read it before trusting a column.
- Finish by writing /output/answer.json with a shell command. It is a JSON object:
  {"format": "ispm.answer/v1", "response": "<the conclusion first, then a short explanation>",
   "verdict": "yes" | "no" | null  (null for a question that asks for a list),
   "evidence": [{"vendor": "hibob|okta|azure|aws|gcp|gws|github|atlas", "kind": "person|account|group|role|...",
                 "identifier": "<the vendor's own identifier>", "fact": "<why it matters>"}],
   "queries": ["<the SQL your conclusion rests on, verbatim>"]}
- You have about {minutes} minutes. Write the answer before the time runs out.
"""


def budget_s(task: dict[str, Any]) -> float:
    """Seconds Codex may run: ``ISPM_TIME_BUDGET_S``, else the task's limit minus a margin."""
    configured = os.environ.get("ISPM_TIME_BUDGET_S", "").strip()
    if configured:
        return float(configured)
    limit = float(task.get("time_limit_seconds") or 900)
    return max(10.0, limit - min(MARGIN_S, limit * 0.2))


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (JSON's escapes are a subset of TOML's)."""
    return json.dumps(text, ensure_ascii=False)


def codex_config(base_url: str, model: str, minutes: int) -> str:
    """Codex's ``config.toml``: the gateway as a custom Responses provider, and nothing else that calls out."""
    instructions = INSTRUCTIONS.replace("{minutes}", str(minutes))
    return f"""\
# Written by the ispm codex image at start (images/agents/codex/agent.py); see docs/agents.md.
model = {toml_string(model)}
model_provider = "{PROVIDER}"
# The provider would run a web search itself, outside the sandbox: the gateway refuses a request that offers it.
web_search = "disabled"
# Headless: never ask. The container (no network, read-only root, uid 10001) is the sandbox, and Codex's own
# (bubblewrap, Landlock) cannot start in it.
approval_policy = "never"
sandbox_mode = "danger-full-access"
# Nothing but the gateway is reachable; these would only wait on a network that is not there.
check_for_update_on_startup = false
developer_instructions = {toml_string(instructions)}

[analytics]
enabled = false

[feedback]
enabled = false

[model_providers.{PROVIDER}]
name = "ISPM gateway"
base_url = {toml_string(base_url)}
env_key = "OPENAI_API_KEY"
wire_api = "responses"
"""


def codex_home(config: str) -> Path:
    """A fresh ``CODEX_HOME`` under ``/tmp`` holding ``config``."""
    home = Path(tempfile.mkdtemp(prefix="codex-home-", dir="/tmp"))
    (home / "config.toml").write_text(config, encoding="utf-8")
    return home


def codex_env(home: Path) -> dict[str, str]:
    """The CLI's environment: ours, with its home set."""
    env = dict(os.environ)
    env.setdefault("HOME", "/tmp")
    env["CODEX_HOME"] = str(home)
    return env


def codex_command(prompt: str) -> list[str]:
    """``codex exec`` headless: JSON events on stdout; everything else comes from ``config.toml``."""
    return [
        CODEX,
        "exec",
        "--json",
        "--skip-git-repo-check",  # /tmp is not a repository, and no repository is needed
        "--ephemeral",  # no session files: the trace is /output/trace.jsonl
        "--color",
        "never",
        prompt,
    ]


def copy_events(stream: TextIO, trace: Path, last: dict[str, Any]) -> None:
    """Copy each JSON event line to ``trace`` (capped); keep the last agent message and how the turn ended."""
    written = 0
    with trace.open("a", encoding="utf-8") as sink:
        for line in stream:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                kind = event.get("type")
                item = event.get("item")
                if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
                    last["message"] = str(item.get("text") or "")
                elif kind in ("turn.completed", "turn.failed", "error"):
                    last["ended"] = event
            text = line.rstrip("\n")[:TRACE_LINE_CHARS]
            if written + len(text) < TRACE_MAX_BYTES:
                sink.write(text + "\n")
                sink.flush()
                written += len(text) + 1


def run_codex(command: list[str], env: dict[str, str], timeout_s: float, trace: Path) -> tuple[str, dict[str, Any]]:
    """Run Codex until it ends or ``timeout_s`` passes; returns how it ended and what :func:`copy_events` kept."""
    last: dict[str, Any] = {}
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, env=env, cwd="/tmp"
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


def failure_answer(reason: str, last: dict[str, Any], queries: list[str]) -> dict[str, Any]:
    """A valid answer that says why there is no real one, with Codex's last message or error if it had one."""
    response = f"No answer was written: Codex {reason}."
    message = str(last.get("message") or "").strip()
    ended = last.get("ended") or {}
    error = ended.get("error", {}).get("message") if ended.get("type") == "turn.failed" else ended.get("message")
    if message:
        response += "\n\nCodex's final message:\n" + message[:20_000]
    elif isinstance(error, str) and error.strip():
        response += "\n\nCodex's error:\n" + error.strip()[:20_000]
    return {"format": ANSWER_FORMAT, "response": response, "verdict": None, "evidence": [], "queries": queries}


def main() -> int:
    """Run Codex on the task; leave a valid ``answer.json`` behind in every case."""
    try:
        task = json.loads((TASK_DIR / "task.json").read_text(encoding="utf-8"))
        prompt = (TASK_DIR / "prompt.md").read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"codex-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    timeout_s = budget_s(task)
    model = os.environ.get("ISPM_MODEL", "").strip() or "gpt-5.5"
    base_url = os.environ.get("OPENAI_BASE_URL", "").strip() or "http://127.0.0.1:8765/v1"
    started = time.monotonic()
    try:
        home = codex_home(codex_config(base_url, model, max(1, round(timeout_s / 60))))
        ended, last = run_codex(codex_command(prompt), codex_env(home), timeout_s, OUTPUT_DIR / "trace.jsonl")
    except OSError as exc:
        ended, last = f"could not be started ({exc})", {}
    answer_path = OUTPUT_DIR / "answer.json"
    print(f"codex-agent: {ended} after {time.monotonic() - started:.1f} s")
    if answer_is_valid(answer_path):
        return 0
    reason = f"{ended}, and its answer.json is not valid" if answer_path.exists() else ended
    answer = failure_answer(reason, last, logged_queries(OUTPUT_DIR))
    answer_path.write_text(json.dumps(answer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 1


if __name__ == "__main__":
    sys.exit(main())
