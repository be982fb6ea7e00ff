"""The SQL in a trace, found and laid out for reading, at a bounded cost.

An agent's SQL reaches a reader two ways: in a tool call's arguments (``run_sql {"sql": ...}``, or a shell command
``ispm-sql "SELECT ..."`` in Claude Code's Bash tool) and in the host's query log. :func:`sql_of_call` finds it in a
call; :func:`format_sql` re-indents it.

**SQL as it ran.** Laying out never changes a statement's tokens, their case or a function's name: a reviewer sees
the statement that ran (a pretty printer that rebuilds the statement from its parse would show ``substr(x, 7)`` as
``SUBSTRING(x, 7)``). :func:`format_sql` cuts the text into SQLite tokens with sqlglot's tokenizer and changes only
the whitespace between two tokens: a line break before each clause (``FROM``, ``WHERE``, a join, ...), indented by
the depth of parentheses, and one space for any other run of whitespace. Text that is not whitespace between two
tokens (a comment) is kept exactly; two tokens that touched still touch. A test holds every statement's tokens and
non-blank characters unchanged.

Both read agent-supplied text, so both are bounded. Tokenizing is linear in the text, so a size bound bounds the
time: a text over :data:`MAX_FORMAT_CHARS`, or one the tokenizer refuses, is shown exactly as written. Formatting is
only ever for display: the text kept in the timeline is the agent's own.
"""

from __future__ import annotations

import shlex
from typing import Any

from sqlglot.dialects.sqlite import SQLite
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import Token, TokenType

MAX_FORMAT_CHARS = 8_000
"""SQL longer than this is shown as written, not laid out."""
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


_CLAUSES = frozenset(
    {
        TokenType.SELECT, TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING,
        TokenType.ORDER_BY, TokenType.LIMIT, TokenType.OFFSET, TokenType.UNION, TokenType.INTERSECT,
        TokenType.EXCEPT, TokenType.WINDOW, TokenType.WITH, TokenType.VALUES, TokenType.JOIN, TokenType.LEFT,
        TokenType.RIGHT, TokenType.INNER, TokenType.CROSS, TokenType.FULL, TokenType.NATURAL, TokenType.OUTER,
    }
)  # fmt: skip
"""Tokens that start a line: the clauses of a statement and the joins."""
_JOIN_WORDS = frozenset({TokenType.LEFT, TokenType.RIGHT, TokenType.INNER, TokenType.CROSS, TokenType.FULL,
                         TokenType.NATURAL, TokenType.OUTER})  # fmt: skip
"""Words that belong with a following ``JOIN`` (``LEFT OUTER JOIN`` stays on one line)."""


def format_sql(sql: str) -> str:
    """``sql`` re-indented, one clause a line, its tokens untouched (see the module docs); as written when too long
    or not tokenizable."""
    if len(sql) > MAX_FORMAT_CHARS or not sql.strip():
        return sql
    try:
        tokens = SQLite().tokenize(sql)
    except (SqlglotError, ValueError, IndexError):
        return sql
    if not tokens or any(t.start > t.end or sql[t.start : t.end + 1] == "" for t in tokens):
        return sql
    pieces: list[str] = []
    depth = 0
    for i, token in enumerate(tokens):
        if i:
            pieces.append(_gap(sql[tokens[i - 1].end + 1 : token.start], tokens[i - 1], token, depth))
        pieces.append(sql[token.start : token.end + 1])
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            depth = max(0, depth - 1)
    laid_out = "".join(pieces)
    return laid_out if _same_tokens(laid_out, tokens, sql) else sql


def _gap(between: str, before: Token, token: Token, depth: int) -> str:
    """What goes between two tokens: a comment kept as written, else a line break, a space or nothing."""
    if between.strip():
        return between  # a comment: exactly as the agent wrote it
    if before.token_type == TokenType.SEMICOLON:
        return "\n\n"
    kind, prior = token.token_type, before.token_type
    breaks = (
        kind in _CLAUSES
        and prior != TokenType.L_PAREN
        and not (kind == TokenType.JOIN and prior in _JOIN_WORDS)
        and not (kind == TokenType.OUTER and prior in _JOIN_WORDS)
        and not (kind == TokenType.SELECT and prior == TokenType.ALIAS)
    )
    if breaks:
        return "\n" + "  " * depth
    return " " if between else ""


def _same_tokens(laid_out: str, tokens: list[Token], sql: str) -> bool:
    # The promise, checked on every text: the same tokens, as written, in the same order.
    try:
        again = SQLite().tokenize(laid_out)
    except (SqlglotError, ValueError, IndexError):
        return False
    return [laid_out[t.start : t.end + 1] for t in again] == [sql[t.start : t.end + 1] for t in tokens]


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
