#!/usr/bin/python3
"""The reference agent (ispm.agent/v1): a tool-calling loop over the gateway, standard library only.

It is meant to be run as-is and read as an example of the agent contract. The model is reached only through
the host's gateway (``OPENAI_BASE_URL`` and the per-sample token in ``OPENAI_API_KEY``) with OpenAI
chat-completions and ``tools``. The model gets four tools:

- ``list_tables``: the snapshot's tables, from ``sqlite_master`` through ``ispm-sql --json``;
- ``describe_table``: the table's section of ``/docs/<vendor>.md``;
- ``run_sql``: one read-only query through ``ispm-sql --json`` (so it is in ``/output/queries.jsonl``); the
  result fed back to the model is capped;
- ``submit_answer``: writes ``/output/answer.json`` (``ispm.answer/v1``) and ends the loop.

Configuration (environment):

- ``ISPM_MODEL``: sent as ``model``; informational only, the gateway forwards to the run's candidate.
- ``ISPM_MAX_STEPS``: model calls at most (default 40).
- ``ISPM_TIME_BUDGET_S``: wall seconds for the whole loop (default: ``time_limit_seconds`` of
  ``/task/task.json`` minus a safety margin, so the agent stops before the sandbox kills it).
- ``ISPM_REQUEST_TIMEOUT_S``: seconds one model call may take (default 180, never past the budget).
- ``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``, ``ISPM_DOCS_DIR``, ``ISPM_SQL``: paths, for the local backend.

Exit codes: 0 when an answer was written, the submitted one or a best-effort one after the step or time budget
ran out; 1 when the gateway kept failing (a failure answer is still written); 2 when the task could not be
read. ``/output/trace.jsonl`` gets one JSON line per model call and per tool call.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VENDORS = ("hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas")
DEFAULT_MAX_STEPS = 40
DEFAULT_REQUEST_TIMEOUT_S = 180.0
# Kept back from the sandbox's time limit: one last answer must be written before the kill.
MIN_MARGIN_S = 5.0
MAX_MARGIN_S = 60.0
MARGIN_FRACTION = 0.1
# Gateway calls: a few tries on transport errors and retryable statuses, then a recorded failure.
MAX_ATTEMPTS = 3
BACKOFF_S = 1.0
# What one tool result may add to the conversation: the context window is the real budget.
RESULT_CHARS = 8_000
SQL_MAX_ROWS = 200
SQL_TIMEOUT_S = 30.0
# Nudges after a reply without a tool call, before its text is taken as the answer.
MAX_NUDGES = 2
ARGS_SUMMARY_CHARS = 300
# Once this close to the end (seconds, or 15 % of the budget if less), the model is told to submit.
LAST_CALL_S = 60.0
LAST_CALL = "You are about to run out of turns or time: call submit_answer now with what you have found."

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_tables",
            "description": "List every table in the snapshot database, with its vendor prefix.",
            "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "describe_table",
            "description": "Return the documentation of one table: its meaning, columns and keys.",
            "parameters": {
                "type": "object",
                "properties": {"table": {"type": "string", "description": "Table name, e.g. okta_users."}},
                "required": ["table"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_sql",
            "description": (
                f"Run one read-only SQLite SELECT statement against the snapshot. At most {SQL_MAX_ROWS} rows "
                f"come back and long results are cut at {RESULT_CHARS} characters: aggregate or filter."
            ),
            "parameters": {
                "type": "object",
                "properties": {"sql": {"type": "string", "description": "One SQLite statement."}},
                "required": ["sql"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit_answer",
            "description": "Submit the final answer. This ends the investigation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "response": {"type": "string", "description": "The conclusion and its explanation."},
                    "verdict": {
                        "type": ["string", "null"],
                        "enum": ["yes", "no", None],
                        "description": "yes or no for verdict tasks; null for enumeration tasks.",
                    },
                    "evidence": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "vendor": {"type": "string", "enum": list(VENDORS)},
                                "kind": {"type": "string", "description": "person, account, group, role, ..."},
                                "identifier": {"type": "string", "description": "The vendor's identifier."},
                                "fact": {"type": "string", "description": "Why it matters, in one sentence."},
                            },
                            "required": ["vendor", "kind", "identifier", "fact"],
                        },
                    },
                    "queries": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "The SQL the conclusion rests on, verbatim.",
                    },
                },
                "required": ["response", "verdict", "evidence", "queries"],
            },
        },
    },
]

SYSTEM_PROMPT = """\
You are an identity-security analyst investigating a frozen snapshot of one company's identity and access \
estate. The snapshot covers these vendors: HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub and \
MongoDB Atlas. It is a read-only SQLite database; each vendor's tables share a prefix (okta_, aws_, ...).

The snapshot is as of {as_of}. Treat that moment as "now" for every question about age, dormancy or expiry.

No key crosses vendors: to follow a person from one system to another, match on emails, aliases, logins, names \
or provisioning links, and mind differences in case and older email domains. Read the documentation of a table \
before you rely on what its columns mean.

Tools:
- list_tables: every table in the database.
- describe_table: the documentation of one table.
- run_sql: one read-only SQLite query; results are capped, so filter and aggregate.
- submit_answer: your final answer; call it exactly once, at the end.

This task is a {kind} task. {kind_hint}
Base every claim on query results. In submit_answer give:
- response: the conclusion first, then a short explanation a reviewer can check;
- verdict: {verdict_hint};
- evidence: one item per cited person, account, group, role, resource, policy or configuration fact, with its \
vendor (one of {vendors}), kind, the vendor's own identifier, and the fact that makes it relevant;
- queries: the SQL your conclusion rests on, verbatim.
You have at most {max_steps} model turns and about {budget_min} minutes; submit before you run out.
"""

_KIND_HINTS = {
    "verdict": ("The question has a yes or no answer.", '"yes" or "no"'),
    "enumeration": ("The question asks for a complete list; be exhaustive.", "null"),
}


class GatewayFailure(Exception):
    """The gateway could not give a reply after the bounded retries."""


class BudgetExhausted(Exception):
    """The time budget ran out before or during a model call."""


@dataclass
class Config:
    """Everything the agent reads from its environment and ``/task``."""

    base_url: str
    token: str
    model: str
    max_steps: int
    budget_s: float
    request_timeout_s: float
    task_dir: Path
    output_dir: Path
    docs_dir: Path
    sql_tool: str
    kind: str
    prompt: str
    as_of: str


@dataclass
class State:
    """What the loop has done so far; the material of a best-effort answer."""

    started: float = field(default_factory=time.monotonic)
    step: int = 0
    sql_ok: list[str] = field(default_factory=list)
    last_text: str = ""
    answered: bool = False


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value > 0 else default


def default_budget(time_limit_s: float) -> float:
    """The loop's wall budget for a sandbox time limit: the limit minus a margin of 10 % (5 s to 60 s)."""
    margin = min(MAX_MARGIN_S, max(MIN_MARGIN_S, time_limit_s * MARGIN_FRACTION))
    return max(1.0, time_limit_s - margin)


def read_as_of(docs_dir: Path) -> str:
    """The snapshot's as-of timestamp, as the docs' overview states it ("unknown" if it cannot be found)."""
    try:
        text = (docs_dir / "overview.md").read_text(encoding="utf-8")
    except OSError:
        return "unknown (see /docs/overview.md)"
    found = re.search(r"as of\W*(\d{4}-\d{2}-\d{2}T[0-9:.]+Z?)", text, flags=re.IGNORECASE)
    return found.group(1) if found else "unknown (see /docs/overview.md)"


def load_config() -> Config:
    """Read the environment and ``/task``. Raises ``OSError``/``ValueError`` when the task is unreadable."""
    task_dir = Path(os.environ.get("ISPM_TASK_DIR", "/task"))
    docs_dir = Path(os.environ.get("ISPM_DOCS_DIR", "/docs"))
    task = json.loads((task_dir / "task.json").read_text(encoding="utf-8"))
    if not isinstance(task, dict):
        raise ValueError("task.json is not a JSON object")
    limit = float(task.get("time_limit_seconds") or 900)
    return Config(
        base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8765/v1").rstrip("/"),
        token=os.environ.get("OPENAI_API_KEY", ""),
        model=os.environ.get("ISPM_MODEL", "candidate"),
        max_steps=int(_env_number("ISPM_MAX_STEPS", DEFAULT_MAX_STEPS)),
        budget_s=_env_number("ISPM_TIME_BUDGET_S", default_budget(limit)),
        request_timeout_s=_env_number("ISPM_REQUEST_TIMEOUT_S", DEFAULT_REQUEST_TIMEOUT_S),
        task_dir=task_dir,
        output_dir=Path(os.environ.get("ISPM_OUTPUT_DIR", "/output")),
        docs_dir=docs_dir,
        sql_tool=os.environ.get("ISPM_SQL", "ispm-sql"),
        kind=str(task.get("kind") or "verdict"),
        prompt=(task_dir / "prompt.md").read_text(encoding="utf-8"),
        as_of=read_as_of(docs_dir),
    )


def system_prompt(cfg: Config) -> str:
    """General instructions: the task kind, the tools, the answer format and the as-of. No task-specific hints."""
    kind_hint, verdict_hint = _KIND_HINTS.get(cfg.kind, _KIND_HINTS["verdict"])
    return SYSTEM_PROMPT.format(
        as_of=cfg.as_of,
        kind=cfg.kind,
        kind_hint=kind_hint,
        verdict_hint=verdict_hint,
        vendors=", ".join(VENDORS),
        max_steps=cfg.max_steps,
        budget_min=max(1, round(cfg.budget_s / 60)),
    )


# -- output ------------------------------------------------------------------------------------------------


class Trace:
    """Appends one JSON object per step to ``trace.jsonl``; a write failure never stops the agent."""

    def __init__(self, path: Path, started: float) -> None:
        """Trace into ``path``; ``elapsed_s`` counts from ``started`` (a ``time.monotonic`` value)."""
        self.path = path
        self.started = started

    def write(self, **entry: Any) -> None:
        """Append ``entry`` with ``elapsed_s``."""
        entry["elapsed_s"] = round(time.monotonic() - self.started, 3)
        try:
            with self.path.open("a", encoding="utf-8") as sink:
                sink.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
        except OSError as exc:
            print(f"reference-agent: cannot write the trace: {exc}", file=sys.stderr)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"... [{len(text) - limit} more characters cut]"


def _summary(args: Any) -> str:
    return _clip(json.dumps(args, ensure_ascii=False, default=str), ARGS_SUMMARY_CHARS)


def clean_answer(args: dict[str, Any], fallback_queries: list[str]) -> dict[str, Any]:
    """An ``ispm.answer/v1`` object from the model's ``submit_answer`` arguments, coerced to the schema.

    Models get details wrong (a verdict of "Yes", an unknown vendor, a missing field); the answer must still
    validate, so values are normalised and evidence that cannot be valid is dropped rather than failing all.
    """
    verdict_raw = args.get("verdict")
    verdict = verdict_raw.strip().lower() if isinstance(verdict_raw, str) else None
    evidence: list[dict[str, str]] = []
    items = args.get("evidence")
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        vendor = str(item.get("vendor", "")).strip().lower()
        identifier = str(item.get("identifier", "")).strip()
        if vendor not in VENDORS or not identifier:
            continue
        evidence.append(
            {
                "vendor": vendor,
                "kind": str(item.get("kind") or "entity")[:64],
                "identifier": identifier[:2048],
                "fact": str(item.get("fact") or "")[:4096],
            }
        )
    queries_raw = args.get("queries")
    queries = [q for q in queries_raw if isinstance(q, str) and q.strip()] if isinstance(queries_raw, list) else []
    return {
        "format": "ispm.answer/v1",
        "response": str(args.get("response") or "")[:200_000],
        "verdict": verdict if verdict in ("yes", "no") else None,
        "evidence": evidence[:5000],
        "queries": (queries or fallback_queries)[:1000],
    }


def write_answer(output_dir: Path, answer: dict[str, Any]) -> None:
    """Write ``answer.json`` atomically, so a kill mid-write never leaves half an answer."""
    scratch = output_dir / ".answer.json.tmp"
    scratch.write_text(json.dumps(answer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, output_dir / "answer.json")


def fallback_answer(state: State, reason: str) -> dict[str, Any]:
    """A valid answer that says why the investigation stopped, with whatever the agent had found."""
    response = f"No final answer was submitted: {reason}."
    if state.last_text.strip():
        response += "\n\nThe model's last message:\n" + _clip(state.last_text.strip(), 20_000)
    return clean_answer({"response": response, "verdict": None, "evidence": [], "queries": []}, state.sql_ok)


# -- tools -------------------------------------------------------------------------------------------------


def _run_sql_tool(cfg: Config, sql: str, timeout_s: float) -> tuple[bool, str]:
    # The SQL tool, not sqlite3 directly: it enforces the budgets and logs every query to queries.jsonl.
    command = [cfg.sql_tool, "--json", "--max-rows", str(SQL_MAX_ROWS), "--timeout", f"{timeout_s:g}", "--", sql]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s + 10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"the SQL tool failed: {exc}"
    if done.returncode not in (0, 3):  # 3: the log could not be written, but the result is there
        return False, (done.stderr.strip().removeprefix("ispm-sql: error: ") or f"exit code {done.returncode}")
    return True, done.stdout.strip()


def list_tables(cfg: Config) -> str:
    """Every table's name, grouped by vendor prefix."""
    ok, out = _run_sql_tool(cfg, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", SQL_TIMEOUT_S)
    if not ok:
        return "error: " + out
    try:
        names = [str(row[0]) for row in json.loads(out)["rows"]]
    except (ValueError, KeyError, TypeError, IndexError):
        return _clip(out, RESULT_CHARS)
    return "\n".join(names) if names else "(no tables)"


def describe_table(cfg: Config, table: str) -> str:
    """The ``### `table``` section of ``/docs/<vendor>.md``, or a hint when there is none."""
    table = table.strip().strip("`").lower()
    vendor = table.split("_", 1)[0]
    if vendor not in VENDORS:
        return f"error: unknown table {table!r}; its prefix should be one of {', '.join(VENDORS)}"
    try:
        text = (cfg.docs_dir / f"{vendor}.md").read_text(encoding="utf-8")
    except OSError as exc:
        return f"error: cannot read the {vendor} documentation: {exc}"
    lines = text.splitlines()
    heading = re.compile(r"^###\s+`?" + re.escape(table) + r"`?\s*$")
    for start, line in enumerate(lines):
        if heading.match(line):
            end = start + 1
            while end < len(lines) and not lines[end].startswith(("## ", "### ")):
                end += 1
            return _clip("\n".join(lines[start:end]).strip(), RESULT_CHARS)
    documented = [m.group(1) for m in re.finditer(r"^###\s+`?([a-z0-9_]+)`?\s*$", text, flags=re.MULTILINE)]
    return f"error: {table!r} is not documented; documented {vendor} tables: {', '.join(documented)}"


def run_sql(cfg: Config, state: State, sql: str, remaining_s: float) -> str:
    """Run ``sql`` through ``ispm-sql --json`` and return its (capped) result or error."""
    if not sql.strip():
        return "error: empty query"
    ok, out = _run_sql_tool(cfg, sql, max(1.0, min(SQL_TIMEOUT_S, remaining_s - 5)))
    if not ok:
        return "error: " + out
    state.sql_ok.append(sql)
    return _clip(out, RESULT_CHARS)


# -- the model -----------------------------------------------------------------------------------------------


def _retryable(exc: urllib.error.HTTPError) -> bool:
    # The gateway says x-should-retry: false when it already retried the provider, or for a cap: trust it.
    if (exc.headers.get("x-should-retry") or "").lower() == "false":
        return False
    return exc.code == 429 or exc.code >= 500


def chat(cfg: Config, messages: list[dict[str, Any]], deadline: float) -> dict[str, Any]:
    """One chat-completions call through the gateway, with a few tries on transient failures.

    Raises:
        BudgetExhausted: the time budget ran out before a reply arrived.
        GatewayFailure: the gateway refused the request or kept failing.
    """
    body = json.dumps({"model": cfg.model, "messages": messages, "tools": TOOLS, "tool_choice": "auto"}).encode()
    headers = {"Authorization": f"Bearer {cfg.token}", "Content-Type": "application/json"}
    problem = "no attempt was made"
    for attempt in range(1, MAX_ATTEMPTS + 1):
        remaining = deadline - time.monotonic()
        if remaining < 1.0:
            raise BudgetExhausted(f"the time budget ran out waiting for the model ({problem})")
        request = urllib.request.Request(f"{cfg.base_url}/chat/completions", data=body, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=min(cfg.request_timeout_s, remaining)) as reply:
                parsed = json.loads(reply.read())
            if not isinstance(parsed, dict) or not parsed.get("choices"):
                raise GatewayFailure(f"the gateway's reply has no choices: {_clip(json.dumps(parsed), 500)}")
            return parsed
        except urllib.error.HTTPError as exc:
            detail = _clip(exc.read().decode("utf-8", "replace"), 500)
            problem = f"HTTP {exc.code}: {detail}"
            if not _retryable(exc):
                raise GatewayFailure(problem) from exc
        except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError) as exc:
            # URLError covers refused connections; ValueError a body that is not JSON.
            problem = f"{type(exc).__name__}: {exc}"
        if attempt < MAX_ATTEMPTS:
            time.sleep(min(BACKOFF_S * attempt, max(0.0, deadline - time.monotonic() - 1.0)))
    raise GatewayFailure(f"{problem} (after {MAX_ATTEMPTS} attempts)")


# -- the loop ------------------------------------------------------------------------------------------------


def _call_tool(cfg: Config, state: State, name: str, args: dict[str, Any], deadline: float) -> str:
    if name == "list_tables":
        return list_tables(cfg)
    if name == "describe_table":
        return describe_table(cfg, str(args.get("table", "")))
    if name == "run_sql":
        return run_sql(cfg, state, str(args.get("sql", "")), deadline - time.monotonic())
    return f"error: unknown tool {name!r}; use list_tables, describe_table, run_sql or submit_answer"


def investigate(cfg: Config, state: State, trace: Trace) -> int:
    """Run the tool-calling loop until an answer is submitted or a budget runs out; returns the exit code."""
    deadline = state.started + cfg.budget_s
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system_prompt(cfg)},
        {"role": "user", "content": cfg.prompt},
    ]
    nudges = 0
    warned = False
    while state.step < cfg.max_steps:
        state.step += 1
        # Tell the model when it is about to run out, so the answer is its own rather than a fallback.
        short_of_time = deadline - time.monotonic() < min(LAST_CALL_S, cfg.budget_s * 0.15)
        if not warned and state.step > 1 and (state.step == cfg.max_steps or short_of_time):
            warned = True
            messages.append({"role": "user", "content": LAST_CALL})
        try:
            reply = chat(cfg, messages, deadline)
        except BudgetExhausted as exc:
            trace.write(step=state.step, role="agent", event="budget_exhausted", detail=str(exc))
            write_answer(cfg.output_dir, fallback_answer(state, f"the time budget of {cfg.budget_s:g} s ran out"))
            return 0
        except GatewayFailure as exc:
            trace.write(step=state.step, role="agent", event="gateway_failure", detail=_clip(str(exc), 1000))
            write_answer(cfg.output_dir, fallback_answer(state, f"the model gateway failed: {exc}"))
            print(f"reference-agent: gateway failure: {exc}", file=sys.stderr)
            return 1
        message = reply["choices"][0].get("message") or {}
        state.last_text = str(message.get("content") or "") or state.last_text
        calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        trace.write(
            step=state.step,
            role="assistant",
            tools=[str((c.get("function") or {}).get("name")) for c in calls],
            content=_clip(str(message.get("content") or ""), ARGS_SUMMARY_CHARS),
            tokens=reply.get("usage"),
            model=reply.get("model"),
        )
        # Echo the assistant turn back as the protocol requires, with only the fields providers accept.
        echoed: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if calls:
            echoed["tool_calls"] = calls
        messages.append(echoed)
        if not calls:
            nudges += 1
            if nudges > MAX_NUDGES:
                answer = clean_answer({"response": state.last_text, "evidence": [], "queries": []}, state.sql_ok)
                write_answer(cfg.output_dir, answer)
                trace.write(step=state.step, role="agent", event="answer_from_text")
                return 0
            messages.append({"role": "user", "content": "Continue with the tools; finish by calling submit_answer."})
            continue
        nudges = 0
        for call in calls:
            function = call.get("function") or {}
            name = str(function.get("name"))
            try:
                args = json.loads(function.get("arguments") or "{}")
                if not isinstance(args, dict):
                    raise ValueError("the arguments are not a JSON object")
            except ValueError as exc:
                args, result = {}, f"error: the arguments are not valid JSON: {exc}"
            else:
                if name == "submit_answer":
                    write_answer(cfg.output_dir, clean_answer(args, state.sql_ok))
                    state.answered = True
                    trace.write(step=state.step, role="tool", tool=name, args=_summary(args))
                    return 0
                result = _call_tool(cfg, state, name, args, deadline)
            trace.write(step=state.step, role="tool", tool=name, args=_summary(args), result_chars=len(result))
            messages.append({"role": "tool", "tool_call_id": str(call.get("id", "")), "content": result})
    trace.write(step=state.step, role="agent", event="max_steps")
    write_answer(cfg.output_dir, fallback_answer(state, f"the limit of {cfg.max_steps} model turns was reached"))
    return 0


def main() -> int:
    """Load the configuration, investigate, and always leave an answer behind if at all possible."""
    state = State()
    try:
        cfg = load_config()
    except (OSError, ValueError) as exc:
        print(f"reference-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    trace = Trace(cfg.output_dir / "trace.jsonl", state.started)
    trace.write(step=0, role="agent", event="start", model=cfg.model, budget_s=cfg.budget_s, max_steps=cfg.max_steps)
    try:
        code = investigate(cfg, state, trace)
    except Exception as exc:  # a bug here must still leave a valid answer and a trace line
        trace.write(step=state.step, role="agent", event="crash", detail=_clip(repr(exc), 1000))
        write_answer(cfg.output_dir, fallback_answer(state, f"the agent failed: {type(exc).__name__}"))
        print(f"reference-agent: crashed: {exc!r}", file=sys.stderr)
        return 1
    trace.write(step=state.step, role="agent", event="end", answered=state.answered, exit_code=code)
    print(f"reference-agent: {state.step} steps, {len(state.sql_ok)} queries, answered={state.answered}")
    return code


if __name__ == "__main__":
    sys.exit(main())
