"""Claude Code's scripted session against the fake provider, for the tests that run the real agent.

Its main loop carries the Bash tool: it runs the SQL through ``ispm-sql``, writes the answer with a heredoc, then
says so. Anything else it sends is a side request (none seen in 2.1.332 with ``--bare``), answered with a short
text so that it never consumes the main loop's script.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fake_provider import Seen, ToolCall, Turn, Usage


def claude_code_turns(
    sql: str, answer: dict[str, Any], *, opening: str, usages: tuple[Usage, Usage, Usage]
) -> list[Turn]:
    """The main loop's three replies: ``opening`` and the SQL, the answer written, the last word; one usage each."""
    query, write, last = usages
    heredoc = f"cat > /output/answer.json <<'EOF'\n{json.dumps(answer)}\nEOF"
    return [
        Turn(
            text=opening,
            tool_calls=[
                ToolCall("Bash", {"command": f'ispm-sql "{sql}"', "description": "Count users"}, id="toolu_sql")
            ],
            usage=query,
        ),
        Turn(
            text="",
            tool_calls=[ToolCall("Bash", {"command": heredoc, "description": "Answer"}, id="toolu_answer")],
            usage=write,
        ),
        Turn(text="The answer is in /output/answer.json.", usage=last),
    ]


def tool_names(body: object) -> list[str]:
    """The tools a request body offers, in Messages' shape or (translated by the gateway) chat completions'."""
    tools = (body.get("tools") or []) if isinstance(body, dict) else []
    return [str(t.get("name") or (t.get("function") or {}).get("name")) for t in tools if isinstance(t, dict)]


def claude_responder(turns: list[Turn]) -> Callable[[Seen], Turn]:
    """Answers the main loop (requests offering the Bash tool) from ``turns``, anything else with a short text."""
    pending = list(turns)

    def respond(seen: Seen) -> Turn:
        if "Bash" in tool_names(seen.body) and pending:
            return pending.pop(0)
        return Turn(text="ok", usage=Usage(input_tokens=17, output_tokens=3))

    return respond
