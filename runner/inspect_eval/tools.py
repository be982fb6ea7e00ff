"""The default solver's two tools: ``sql`` runs ``ispm-sql`` in the sandbox, ``submit`` writes our answer format.

Both act in the sample's sandbox as the agent, exactly as an agent image does under ``ispm run``: ``ispm-sql``
logs every query to ``/output/queries.jsonl``, and ``submit`` writes ``/output/answer.json`` (``ispm.answer/v1``),
which the scorer collects from the sandbox like any agent's answer.
"""

from __future__ import annotations

from inspect_ai.tool import Tool, ToolError, tool
from inspect_ai.util import sandbox
from pydantic import ValidationError

from runner.contract import Answer
from runner.inspect_eval.names import registered

ANSWER_PATH = "/output/answer.json"
SQL_TOOL = "/usr/local/bin/ispm-sql"
MAX_TOOL_OUTPUT = 32 * 1024
"""Characters of a query's printed result the model sees; the rest is cut with a note."""


@tool(name=registered("sql"))
def sql(max_rows: int = 200, timeout_s: int = 30) -> Tool:
    """The ``sql`` tool: one read-only query against the world, logged, at most ``max_rows`` rows."""

    async def execute(query: str) -> str:
        """Run one read-only SQLite query against the ISPM world and return the rows as an aligned table.

        The world is one SQLite database of eight vendors' tables; its documentation is in /docs. Every query
        is logged. Only one statement per call; writes and ATTACH are refused.

        Args:
            query: One SQLite SELECT (or WITH ... SELECT) statement.
        """
        command = [SQL_TOOL, "--table", "--max-rows", str(max_rows), "--timeout", str(timeout_s), "-"]
        result = await sandbox().exec(command, input=query, timeout=timeout_s + 15)
        if not result.success:
            raise ToolError(_cut(result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}"))
        return _cut(result.stdout)

    return execute


DOCS = ("overview", "hibob", "okta", "azure", "aws", "gcp", "gws", "github", "atlas")
"""The pages of ``/docs``: the overview, then one per vendor."""


@tool(name=registered("schema_docs"))
def schema_docs() -> Tool:
    """The ``schema_docs`` tool: one page of ``/docs``, the world's schema documentation."""

    async def execute(page: str) -> str:
        """Read one page of the world's schema documentation: what each table and column means.

        Args:
            page: "overview" (start there), or a vendor: hibob, okta, azure, aws, gcp, gws, github or atlas.
        """
        name = page.strip().lower()
        if name not in DOCS:
            raise ToolError(f"no page {page!r}: the pages are {', '.join(DOCS)}")
        return _cut(await sandbox().read_file(f"/docs/{name}.md"))

    return execute


@tool(name=registered("submit"))
def submit() -> Tool:
    """The ``submit`` tool: writes ``/output/answer.json`` in our answer format and ends the agent's turn."""

    async def execute(
        response: str,
        verdict: str | None = None,
        evidence: list[dict[str, str]] | None = None,
        queries: list[str] | None = None,
    ) -> str:
        """Submit the final answer of the investigation.

        Args:
            response: The conclusion and the explanation that makes it auditable.
            verdict: For a yes/no question, "yes" or "no"; null for a question that asks for a list.
            evidence: Every person, account, group, role, resource, policy or configuration fact the conclusion
                rests on, each an object with "vendor" (hibob, okta, azure, aws, gcp, gws, github or atlas),
                "kind", "identifier" (the vendor's own identifier) and "fact" (why it matters, one sentence).
            queries: The SQL the conclusion rests on, verbatim.
        """
        try:
            answer = Answer.model_validate(
                {"response": response, "verdict": verdict, "evidence": evidence or [], "queries": queries or []}
            )
        except ValidationError as exc:
            raise ToolError(f"the answer is not in the expected format: {_problems(exc)}") from exc
        await sandbox().write_file(ANSWER_PATH, answer.model_dump_json(indent=2))
        return answer.response

    return execute


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])


def _cut(text: str) -> str:
    if len(text) <= MAX_TOOL_OUTPUT:
        return text
    return text[:MAX_TOOL_OUTPUT] + f"\n[{len(text) - MAX_TOOL_OUTPUT} more characters cut]"
