#!/usr/bin/python3
"""An ispm.agent/v1 agent on Google's Gemini API: the ``google-genai`` SDK, streamed, a plain tool loop.

This is the whole agent; copy it to wrap another agent on the SDK. The SDK (``google-genai``, pinned with every
dependency in ``requirements.txt``) is installed into the image by the host's pip. The agent:

- reaches the gateway as any ``google-genai`` program does, configured by the environment alone: the SDK reads
  ``GOOGLE_GEMINI_BASE_URL`` (the gateway) and ``GEMINI_API_KEY`` (the per-sample token, sent as
  ``x-goog-api-key``); the model name is ``ISPM_MODEL`` (the gateway answers with the run's candidate whatever is
  asked);
- streams every turn (``generate_content_stream``, ``streamGenerateContent?alt=sse``), with the SDK's automatic
  function calling off: the loop runs the tools itself;
- has two function tools: ``run_sql`` (one read-only query through ``ispm-sql``, so it is in
  ``/output/queries.jsonl``) and ``submit_answer`` (writes ``/output/answer.json`` and ends the loop);
- writes one line per model text, tool call and tool result to ``/output/trace.jsonl`` (each line cut at
  2,000 characters, the file at 2 MB);
- writes a failure answer if the loop ends, fails or runs out of time without a submitted one.

Configuration (environment): ``ISPM_MODEL``, ``ISPM_MAX_TURNS`` (default 40), ``ISPM_TIME_BUDGET_S`` (default:
the task's time limit minus a margin), ``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``, ``ISPM_SQL``.

Exit codes: 0 when the model submitted an answer; 1 when a failure answer had to be written; 2 when the task
could not be read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from google import genai
from google.genai import types

TASK_DIR = Path(os.environ.get("ISPM_TASK_DIR", "/task"))
OUTPUT_DIR = Path(os.environ.get("ISPM_OUTPUT_DIR", "/output"))
SQL_TOOL = os.environ.get("ISPM_SQL", "ispm-sql")
ANSWER_FORMAT = "ispm.answer/v1"
# Kept back from the sandbox's time limit so the failure answer is written before the kill.
MARGIN_S = 30.0
SQL_MAX_ROWS = 200
SQL_TIMEOUT_S = 30
RESULT_CHARS = 8_000
TRACE_CHARS = 2_000
TRACE_BYTES = 2 * 1024 * 1024
NUDGES = 2  # turns without a tool call the model is reminded to submit, before the loop gives up

INSTRUCTIONS = """\
You are an identity-security analyst. You answer one question about a frozen, read-only SQLite snapshot of a \
company's identity estate (HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub, MongoDB Atlas); each \
vendor's tables share a prefix (okta_, aws_, ...). No key crosses vendors: match people on emails, logins and names.
Query the snapshot with run_sql (SQLite; start with SELECT name FROM sqlite_master WHERE type = 'table'). \
Base every claim on query results, then call submit_answer exactly once: the conclusion first in response, \
verdict yes or no for a yes/no question and null for a question that asks for a list, one evidence item per \
cited entity, and the SQL your conclusion rests on in queries. You have about {minutes} minutes.
"""

VENDORS = ["hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas"]
# Gemini's own schema dialect (OpenAPI, upper-case types), in the SDK's types.Schema.
TOOLS = types.Tool(
    function_declarations=[
        types.FunctionDeclaration(
            name="run_sql",
            description="Run one read-only SQLite statement against the snapshot; at most 200 rows come back.",
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={"sql": types.Schema(type=types.Type.STRING, description="One SQLite SELECT statement.")},
                required=["sql"],
            ),
        ),
        types.FunctionDeclaration(
            name="submit_answer",
            description="Submit the final answer. This ends the investigation.",
            parameters=types.Schema(
                type=types.Type.OBJECT,
                properties={
                    "response": types.Schema(
                        type=types.Type.STRING, description="The conclusion first, then a short explanation."
                    ),
                    "verdict": types.Schema(
                        type=types.Type.STRING,
                        enum=["yes", "no"],
                        nullable=True,
                        description="yes or no for a yes/no question; null for a question that asks for a list.",
                    ),
                    "evidence": types.Schema(
                        type=types.Type.ARRAY,
                        description="One item per cited person, account, group, role, resource or policy.",
                        items=types.Schema(
                            type=types.Type.OBJECT,
                            properties={
                                "vendor": types.Schema(type=types.Type.STRING, enum=VENDORS),
                                "kind": types.Schema(
                                    type=types.Type.STRING, description="person, account, group, role..."
                                ),
                                "identifier": types.Schema(
                                    type=types.Type.STRING, description="The vendor's identifier."
                                ),
                                "fact": types.Schema(
                                    type=types.Type.STRING, description="Why it matters, in one sentence."
                                ),
                            },
                            required=["vendor", "kind", "identifier", "fact"],
                        ),
                    ),
                    "queries": types.Schema(
                        type=types.Type.ARRAY,
                        items=types.Schema(type=types.Type.STRING),
                        description="The SQL the conclusion rests on, verbatim.",
                    ),
                },
                required=["response", "verdict", "evidence", "queries"],
            ),
        ),
    ]
)


def run_sql(sql: str) -> str:
    """One read-only query through ``ispm-sql``: its JSON rows, or the error."""
    command = [SQL_TOOL, "--json", "--max-rows", str(SQL_MAX_ROWS), "--timeout", str(SQL_TIMEOUT_S), "--", sql]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SQL_TIMEOUT_S + 10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: the SQL tool failed: {exc}"
    if done.returncode not in (0, 3):  # 3: the query log could not be written, but the result is there
        return "error: " + (done.stderr.strip() or f"exit code {done.returncode}")
    out = done.stdout.strip()
    return out if len(out) <= RESULT_CHARS else out[:RESULT_CHARS] + " ... [cut: filter or aggregate]"


def write_answer(answer: dict[str, Any]) -> None:
    """Write ``answer.json`` atomically, so a kill mid-write never leaves half an answer."""
    scratch = OUTPUT_DIR / ".answer.json.tmp"
    scratch.write_text(json.dumps(answer, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(scratch, OUTPUT_DIR / "answer.json")


def submit_answer(args: dict[str, Any]) -> str:
    """Write the submitted answer as ``ispm.answer/v1``."""
    verdict = args.get("verdict")
    write_answer(
        {
            "format": ANSWER_FORMAT,
            "response": str(args.get("response") or ""),
            "verdict": verdict if verdict in ("yes", "no") else None,
            "evidence": [e for e in args.get("evidence") or [] if isinstance(e, dict)],
            "queries": [str(q) for q in args.get("queries") or []],
        }
    )
    return "submitted"


def trace(entry: dict[str, Any]) -> None:
    """Append one line to ``trace.jsonl``, cut to its bound; a failed write never stops the agent."""
    line = json.dumps(entry, ensure_ascii=False, default=str)
    if len(line) > TRACE_CHARS:
        line = json.dumps({"event": entry.get("event"), "cut": line[:TRACE_CHARS]}, ensure_ascii=False)
    path = OUTPUT_DIR / "trace.jsonl"
    try:
        if path.exists() and path.stat().st_size + len(line) > TRACE_BYTES:
            return
        with path.open("a", encoding="utf-8") as sink:
            sink.write(line + "\n")
    except OSError as exc:
        print(f"gemini-agent: cannot write the trace: {exc}", file=sys.stderr)


def budget_s(task: dict[str, Any]) -> float:
    """Seconds the run may take: ``ISPM_TIME_BUDGET_S``, else the task's limit minus a margin."""
    configured = os.environ.get("ISPM_TIME_BUDGET_S", "").strip()
    if configured:
        return float(configured)
    limit = float(task.get("time_limit_seconds") or 900)
    return max(10.0, limit - min(MARGIN_S, limit * 0.2))


def merged(parts: list[Any]) -> list[Any]:
    """A streamed turn's parts as one message: consecutive plain text pieces joined (thoughts and calls kept)."""
    out: list[Any] = []
    for part in parts:
        plain = part.text is not None and not part.thought and not part.thought_signature
        last = out[-1] if out else None
        if plain and last is not None and last.text is not None and not last.thought and not last.thought_signature:
            out[-1] = types.Part(text=last.text + part.text)
        else:
            out.append(part)
    return out


def streamed_turn(client: Any, model: str, contents: list[Any], config: Any) -> list[Any]:
    """One streamed model turn: every part of candidate 0, in order."""
    parts: list[Any] = []
    for chunk in client.models.generate_content_stream(model=model, contents=contents, config=config):
        candidate = chunk.candidates[0] if chunk.candidates else None
        if candidate is not None and candidate.content is not None:
            parts += candidate.content.parts or []
    return merged(parts)


def call_tool(call: Any) -> tuple[str, bool]:
    """Run one function call: its result, and whether it ended the investigation."""
    args = dict(call.args or {})
    if call.name == "run_sql":
        return run_sql(str(args.get("sql") or "")), False
    if call.name == "submit_answer":
        return submit_answer(args), True
    return f"error: no tool named {call.name!r}; use run_sql or submit_answer", False


def investigate(prompt: str, budget: float, max_turns: int) -> str:
    """The tool loop; how it ended."""
    deadline = time.monotonic() + budget
    client = genai.Client()  # GOOGLE_GEMINI_BASE_URL and GEMINI_API_KEY, from the environment
    model = os.environ.get("ISPM_MODEL") or "gemini-2.5-flash"
    config = types.GenerateContentConfig(
        system_instruction=INSTRUCTIONS.format(minutes=max(1, round(budget / 60))),
        tools=[TOOLS],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    contents = [types.Content(role="user", parts=[types.Part(text=prompt)])]
    nudges = 0
    for turn in range(1, max_turns + 1):
        if time.monotonic() >= deadline:
            return f"the time budget of {budget:g} s ran out"
        # A turn may take what is left of the budget: a hung request still leaves time for the failure answer.
        left = types.HttpOptions(timeout=max(1000, int((deadline - time.monotonic()) * 1000)))
        parts = streamed_turn(client, model, contents, config.model_copy(update={"http_options": left}))
        contents.append(types.Content(role="model", parts=parts))
        calls = [part.function_call for part in parts if part.function_call is not None]
        for part in parts:
            if part.text:
                trace({"event": "thought" if part.thought else "text", "turn": turn, "text": part.text})
        if not calls:
            nudges += 1
            if nudges > NUDGES:
                return "the model stopped without submitting an answer"
            reminder = "Continue the investigation with run_sql, or call submit_answer with your answer."
            contents.append(types.Content(role="user", parts=[types.Part(text=reminder)]))
            continue
        results = []
        done = False
        for call in calls:
            trace({"event": "tool_call", "turn": turn, "id": call.id, "name": call.name, "args": call.args})
            output, ended = call_tool(call)
            done = done or ended
            trace({"event": "tool_result", "turn": turn, "name": call.name, "output": output})
            response = types.FunctionResponse(id=call.id, name=call.name, response={"result": output})
            results.append(types.Part(function_response=response))
        contents.append(types.Content(role="user", parts=results))
        if done:
            return "the answer was submitted"
    return f"the model used its {max_turns} turns without submitting an answer"


def main() -> int:
    """Run the agent on the task; leave a valid ``answer.json`` behind in every case."""
    try:
        task = json.loads((TASK_DIR / "task.json").read_text(encoding="utf-8"))
        prompt = (TASK_DIR / "prompt.md").read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"gemini-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        ended = investigate(prompt, budget_s(task), max(1, int(os.environ.get("ISPM_MAX_TURNS") or 40)))
    except Exception as exc:  # the SDK's errors (the gateway's refusals, timeouts) and any bug: still leave an answer
        ended = f"the run failed: {type(exc).__name__}: {str(exc)[:1000]}"
    trace({"event": "end", "seconds": round(time.monotonic() - started, 3), "detail": ended})
    if (OUTPUT_DIR / "answer.json").exists():
        return 0
    write_answer({"format": ANSWER_FORMAT, "response": f"No answer was submitted: {ended}.", "verdict": None})
    print(f"gemini-agent: {ended}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
