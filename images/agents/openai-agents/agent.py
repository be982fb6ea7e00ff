#!/usr/bin/python3
"""An ispm.agent/v1 agent on the OpenAI Agents SDK: Responses API, streamed, two function tools.

This is the whole agent; copy it to wrap another agent framework. The SDK (``openai-agents``, pinned with every
dependency in ``requirements.txt``) is installed into the image by the host's pip. The agent:

- talks to the gateway's Responses endpoint: ``OPENAI_BASE_URL`` and the per-sample token in ``OPENAI_API_KEY``;
  the model name is ``ISPM_MODEL`` (the gateway answers with the run's candidate whatever is asked);
- runs one ``Runner.run_streamed`` with tracing disabled (nothing may leave the sandbox but model calls);
- has two tools: ``run_sql`` (one read-only query through ``ispm-sql``, so it is in ``/output/queries.jsonl``)
  and ``submit_answer`` (writes ``/output/answer.json`` and ends the run);
- writes one line per streamed item (tool call, tool output, message) to ``/output/trace.jsonl``;
- writes a failure answer if the run ends, fails or runs out of time without a submitted one.

Configuration (environment): ``ISPM_MODEL``, ``ISPM_MAX_TURNS`` (default 40), ``ISPM_TIME_BUDGET_S`` (default:
the task's time limit minus a margin), ``ISPM_TASK_DIR``, ``ISPM_OUTPUT_DIR``, ``ISPM_SQL``.

Exit codes: 0 when the model submitted an answer; 1 when a failure answer had to be written; 2 when the task
could not be read.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from agents import (  # type: ignore[import-not-found]
    Agent,
    ModelSettings,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    StopAtTools,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from pydantic import BaseModel, Field

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

INSTRUCTIONS = """\
You are an identity-security analyst. You answer one question about a frozen, read-only SQLite snapshot of a \
company's identity estate (HiBob, Okta, Azure AD, Google Workspace, AWS, GCP, GitHub, MongoDB Atlas); each \
vendor's tables share a prefix (okta_, aws_, ...). No key crosses vendors: match people on emails, logins and names.
Query the snapshot with run_sql (SQLite; start with SELECT name FROM sqlite_master WHERE type = 'table'). \
Base every claim on query results, then call submit_answer exactly once: the conclusion first in response, \
verdict yes or no for a yes/no question and null for a question that asks for a list, one evidence item per \
cited entity, and the SQL your conclusion rests on in queries. You have about {minutes} minutes.
"""


class Evidence(BaseModel):
    """One cited entity, as ``ispm.answer/v1`` wants it."""

    vendor: Literal["hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas"]
    """The vendor whose identifier this is."""
    kind: str = Field(description="person, account, group, role, resource, policy, ...")
    """What it is."""
    identifier: str = Field(description="The vendor's own identifier (login, UPN, ARN, ...).")
    """The vendor's identifier."""
    fact: str = Field(description="Why it matters, in one sentence.")
    """Why it matters."""


def run_sql(sql: str) -> str:
    """Run one read-only SQLite statement against the snapshot; at most 200 rows come back.

    Args:
        sql: One SQLite SELECT statement.
    """
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


def submit_answer(
    response: str, verdict: Literal["yes", "no"] | None, evidence: list[Evidence], queries: list[str]
) -> str:
    """Submit the final answer. This ends the investigation.

    Args:
        response: The conclusion first, then a short explanation a reviewer can check.
        verdict: yes or no for a yes/no question; null for a question that asks for a list.
        evidence: One item per cited person, account, group, role, resource or policy.
        queries: The SQL the conclusion rests on, verbatim.
    """
    items = [item.model_dump() for item in evidence]
    write_answer(
        {"format": ANSWER_FORMAT, "response": response, "verdict": verdict, "evidence": items, "queries": queries}
    )
    return "submitted"


def trace(entry: dict[str, Any]) -> None:
    """Append one line to ``trace.jsonl``; a failed write never stops the agent."""
    try:
        with (OUTPUT_DIR / "trace.jsonl").open("a", encoding="utf-8") as sink:
            sink.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    except OSError as exc:
        print(f"openai-agents-agent: cannot write the trace: {exc}", file=sys.stderr)


def budget_s(task: dict[str, Any]) -> float:
    """Seconds the run may take: ``ISPM_TIME_BUDGET_S``, else the task's limit minus a margin."""
    configured = os.environ.get("ISPM_TIME_BUDGET_S", "").strip()
    if configured:
        return float(configured)
    limit = float(task.get("time_limit_seconds") or 900)
    return max(10.0, limit - min(MARGIN_S, limit * 0.2))


def make_agent(minutes: int) -> Any:
    """The SDK agent: the gateway's Responses endpoint, the two tools, and a stop right after ``submit_answer``."""
    client = AsyncOpenAI(base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY"))
    model = OpenAIResponsesModel(model=os.environ.get("ISPM_MODEL") or "candidate", openai_client=client)
    return Agent(
        name="ispm-analyst",
        instructions=INSTRUCTIONS.format(minutes=minutes),
        model=model,
        model_settings=ModelSettings(store=False),  # nothing kept by the provider: each request is complete
        tools=[function_tool(run_sql), function_tool(submit_answer)],
        tool_use_behavior=StopAtTools(stop_at_tool_names=["submit_answer"]),
    )


async def investigate(prompt: str, minutes: int, max_turns: int) -> None:
    """One streamed run; every completed item goes to the trace."""
    result = Runner.run_streamed(
        make_agent(minutes), prompt, max_turns=max_turns, run_config=RunConfig(tracing_disabled=True)
    )
    async for event in result.stream_events():
        if event.type == "run_item_stream_event":
            raw: Any = getattr(event.item, "raw_item", None)
            item = raw.model_dump(exclude_none=True) if hasattr(raw, "model_dump") else raw
            text = json.dumps(item, ensure_ascii=False, default=str)
            trace({"event": event.name, "item": item if len(text) <= TRACE_CHARS else text[:TRACE_CHARS] + "..."})
    usage = result.context_wrapper.usage
    trace({"event": "run_end", "requests": usage.requests, "tokens": usage.total_tokens})


def main() -> int:
    """Run the agent on the task; leave a valid ``answer.json`` behind in every case."""
    try:
        task = json.loads((TASK_DIR / "task.json").read_text(encoding="utf-8"))
        prompt = (TASK_DIR / "prompt.md").read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"openai-agents-agent: cannot read the task: {exc}", file=sys.stderr)
        return 2
    set_tracing_disabled(True)
    timeout_s = budget_s(task)
    started = time.monotonic()
    try:
        max_turns = int(os.environ.get("ISPM_MAX_TURNS") or 40)
        asyncio.run(asyncio.wait_for(investigate(prompt, max(1, round(timeout_s / 60)), max_turns), timeout_s))
        ended = "the run ended"
    except TimeoutError:
        ended = f"the time budget of {timeout_s:g} s ran out"
    except Exception as exc:  # the SDK's errors (max turns, model failures) and any bug: still leave an answer
        ended = f"the run failed: {type(exc).__name__}: {str(exc)[:1000]}"
    trace({"event": "end", "seconds": round(time.monotonic() - started, 3), "detail": ended})
    if (OUTPUT_DIR / "answer.json").exists():
        return 0
    write_answer({"format": ANSWER_FORMAT, "response": f"No answer was submitted: {ended}.", "verdict": None})
    print(f"openai-agents-agent: {ended}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
