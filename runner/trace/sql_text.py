"""The SQL in a trace, found and laid out for reading, at a bounded cost.

An agent's SQL reaches a reader two ways: in a tool call's arguments (``run_sql {"sql": ...}``, or a shell command
``ispm-sql "SELECT ..."`` in Claude Code's Bash tool) and in the host's query log. :func:`sql_of_call` finds it in a
call; :func:`format_sql` lays it out with sqlglot's pretty printer in the SQLite dialect.

Both read agent-supplied text, so both are bounded. Parsing and printing are linear in the text (it is sqlglot's
name resolution, which this does not run, that grows quadratically: see ``runner.grading.bounded_coverage``), so a
size bound bounds the time: a text over :data:`MAX_FORMAT_CHARS`, one sqlglot cannot parse, or one nested deeper
than the interpreter's recursion allows is shown exactly as written. Formatting is only ever for display: the text
kept in the timeline is the agent's own.
"""

from __future__ import annotations

import shlex
from typing import Any

import sqlglot
from sqlglot.errors import SqlglotError

MAX_FORMAT_CHARS = 8_000
"""SQL longer than this is shown as written, not laid out (a worst-case text of this size, a long ``OR`` chain,
takes sqlglot about 0.2 s on a busy 2-core machine)."""
SAMPLE_FORMAT_CHARS = 200_000
"""Characters of SQL one page lays out in all; past it, SQL is shown as written (:class:`SqlLayout`)."""
MAX_COMMAND_CHARS = 100_000
"""A shell command longer than this is not searched for ``ispm-sql``."""
SQL_TOOL = "ispm-sql"
"""The SQL tool of the base image, as a shell command names it."""
_SQL_KEYS = ("sql", "query")


class SqlLayout:
    """Lays out SQL for one page or one printout, within a budget of characters over all the texts it is given."""

    def __init__(self, budget_chars: int = SAMPLE_FORMAT_CHARS) -> None:
        self.remaining = budget_chars
        """Characters still to spend; a text longer than what is left is shown as written."""

    def __call__(self, sql: str) -> str:
        """``sql`` laid out by :func:`format_sql` while the budget lasts; as written after."""
        if len(sql) > self.remaining:
            self.remaining = 0
            return sql
        self.remaining -= len(sql)
        return format_sql(sql)


def format_sql(sql: str) -> str:
    """``sql`` laid out one clause a line (SQLite dialect); as written when too long, unparsable, or too deep."""
    if len(sql) > MAX_FORMAT_CHARS or not sql.strip():
        return sql
    try:
        statements = sqlglot.parse(sql, read="sqlite")
        pieces = [s.sql(dialect="sqlite", pretty=True) for s in statements if s is not None]
    except (SqlglotError, RecursionError, ValueError):
        return sql
    return ";\n\n".join(pieces) if pieces else sql


def _from_command(command: str) -> str | None:
    """The SQL argument of the first ``ispm-sql`` in a shell command, if it has one."""
    if SQL_TOOL not in command or len(command) > MAX_COMMAND_CHARS:
        return None
    try:
        words = shlex.split(command, comments=False)
    except ValueError:  # an unbalanced quote: not something a shell would have run as written
        return None
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == SQL_TOOL:
            args = [w for w in words[i + 1 :] if not w.startswith("--")]
            if args:
                return args[0]
    return None


def sql_of_call(arguments: Any) -> str | None:
    """The SQL a tool call runs, read from its parsed arguments: a ``sql`` or ``query`` field, or the SQL given to
    ``ispm-sql`` in a ``command``; ``None`` when it runs none that can be seen."""
    if not isinstance(arguments, dict):
        return None
    for key in _SQL_KEYS:
        value = arguments.get(key)
        if isinstance(value, str) and value.strip():
            return value
    command = arguments.get("command")
    return _from_command(command) if isinstance(command, str) else None
