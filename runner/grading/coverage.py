"""Structural coverage: which of the witness SQL's tables and joins the agent's own SQL touched.

Everything here is deterministic and does no I/O except ``coverage_from_files``. sqlglot does the
parsing (SQLite dialect) and the name resolution (``optimizer.qualify`` and ``optimizer.scope``);
this module only decides what counts.

**Tables.** The world tables a statement reads, resolved through aliases, CTEs, derived tables
and subqueries. A CTE name is not a table; the tables inside its body are. With a schema, only its
tables count: a misspelled ``okta_user`` reads nothing. Table-valued functions (``json_each``) and
SQLite's own catalog (``sqlite_master``, ``sqlite_schema``, ...) are not world tables either.
Without a schema every other name counts, because nothing says which exist.

**Join edges.** An unordered pair of physical columns, ``((table, column), (table, column))``:

- an equality (``=``/``==``) in an ``ON`` or ``WHERE`` condition, reached through ``AND``, ``OR``,
  ``NOT`` and parentheses, whose sides read columns of two *different* sources. Two aliases of
  one table are different sources, so a self-join counts; ``a.x = a.y`` does not. A side may wrap
  its column in functions, because cross-vendor correlation in this world is made of exactly
  that (``lower(u.login) = h.email``); a side that reads several columns yields one edge per pair,
  except that row values ``(a, b) = (c, d)`` pair up by position (``a = c``, ``b = d``);
- joins at any depth of the ``FROM`` clause, parenthesised ones (``FROM (a JOIN b ON ...)``)
  included, and the joins in the recursive step of a recursive CTE, where the CTE's reference to
  itself resolves to the CTE (sqlglot gives that reference an empty scope of its own);
- ``USING`` and ``NATURAL``: sqlglot rewrites them into ``ON`` equalities. ``NATURAL`` needs the
  schema to know the shared columns; without one, it only yields edges between CTEs or derived
  tables, whose columns are known from their select lists;
- correlated subqueries: ``inner.col = outer.col`` inside a subquery is an equality between two
  sources like any other.

**Semi-joins (our decision).** ``x IN (SELECT y ...)`` yields the edge ``x``–``y`` (row values
pair up by position), and so does the scalar form ``x = (SELECT y ...)``. ``EXISTS`` adds nothing
of its own: its correlation predicate already yields the edge. ``NOT IN`` and ``NOT EXISTS`` count
the same way, because an anti-join investigates the same relationship. Comparisons other than
equality (``LIKE``, ``<``, ``IS``) are not join edges.

**Pass-through self-edges (our decision).** An edge from a column to itself, such as
``hibob_people.id = hibob_people.id``, counts only when both sides reach the table by the same
route: two aliases of the table itself (a genuine self-join, ``a.email = b.email AND a.id <> b.id``)
or two references to one CTE. When one side comes through a CTE that passed the key
through and the other joins back to the table (or to another CTE that passed the same key), the
edge only re-fetches the row it started from, relates no two things, and is dropped. With a
schema, an edge counts only between columns the world has.

A column of a CTE or derived table resolves to the physical columns its select-list entry reads
(through functions, and through every branch of a ``UNION``). Unqualified columns are attributed
by ``qualify`` using the schema when one is given. When ``qualify`` cannot finish (no schema and an
unqualified column in a subquery, or a column the schema does not know), the statement falls back
to sqlglot's table qualification plus a cautious attribution of our own: an unqualified column
goes to the innermost scope's only candidate source, and is dropped when that is ambiguous.

**Statements.** A text is split where SQLite would end a statement: at a ``;`` after which the text
so far is complete for ``sqlite3.complete_statement``, never at a ``;`` inside a string, a quoted
name, a comment or a trigger body. An unterminated string therefore swallows the rest of the text
into one statement, as SQLite reads it.

**Unparsed.** A statement that sqlglot cannot parse, or only parses as an opaque ``Command``, is
"unknown": it counts in ``unparsed``, with its reason, and contributes nothing. It never raises.
So is a statement over the size limit (``MAX_STATEMENT_TOKENS`` tokens), and a whole text over
``MAX_TEXT_CHARS`` characters or holding a NUL character (which SQLite rejects), without being
analysed: sqlglot's name resolution grows quadratically with the size of a condition. The time
limit is the grader's (``runner.grading.bounded_coverage``), since only another process can stop
an analysis that has started.

**Recall.** ``table_recall`` and ``join_recall`` are the fractions of the witness's tables and
edges that the agent's statements touched, taken together. ``join_recall`` is ``None`` when the
witness has no join edges (and ``table_recall`` when it reads no table): there is nothing to
recall, and a 1.0 would inflate averages. The
witness must parse completely, or ``coverage`` raises ``CoverageError``: a recall over an
unknown denominator would be a guess.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema
from sqlglot.tokenizer_core import Token

from runner.errors import GradingError

ColumnRef = tuple[str, str]
"""A physical column: (table, column), both lower-case."""

JoinEdge = tuple[ColumnRef, ColumnRef]
"""An unordered pair of physical columns, stored with the smaller one first."""

MAX_TEXT_CHARS = 100_000
"""A text longer than this is one unparsed statement, unanalysed (the longest witness has 5,400)."""
MAX_STATEMENT_TOKENS = 5_000
"""A statement of more tokens is unparsed, unanalysed (the largest witness has 1,100; 1,000 pasted ids take 2,000)."""

_DIALECT = Dialect.get_or_raise("sqlite")
# Internal errors sqlglot may raise on hostile input besides its own: deep nesting recurses.
_SQLGLOT_FAULTS = (SqlglotError, RecursionError)
# Top-level nodes that are statements; anything else sqlglot returned is not one it understood.
_STATEMENTS = (
    exp.Query, exp.DML, exp.DDL, exp.Values, exp.Pragma, exp.Analyze,
    exp.Transaction, exp.Commit, exp.Rollback, exp.Attach, exp.Detach,
)  # fmt: skip
# No quoting (names are compared lower-case) and no validation (agent SQL may be wrong).
_QUALIFY: dict[str, Any] = {
    "dialect": _DIALECT, "validate_qualify_columns": False, "quote_identifiers": False, "identify": False,
}  # fmt: skip


class CoverageError(GradingError):
    """The witness SQL cannot be analysed, so coverage has no denominator."""


class SqlSchema:
    """A snapshot schema prepared once for sqlglot. Names are case-insensitive, as in SQLite."""

    def __init__(self, tables: Mapping[str, Iterable[str]]) -> None:
        self.columns: dict[str, frozenset[str]] = {
            t.lower(): frozenset(c.lower() for c in cols) for t, cols in tables.items()
        }
        # qualify needs names, not types; TEXT is a placeholder every dialect accepts.
        self.mapping = MappingSchema(
            {t: dict.fromkeys(sorted(cols), "TEXT") for t, cols in self.columns.items()}, dialect=_DIALECT
        )


SchemaLike = SqlSchema | Mapping[str, Iterable[str]] | None
"""A ``SqlSchema``, a plain ``{table: [columns]}`` mapping, or nothing."""


class QueryStructure(BaseModel):
    """What one statement touched. ``sql`` is the statement's original text, never regenerated."""

    model_config = ConfigDict(frozen=True)

    sql: str
    """The statement exactly as written (trimmed of surrounding whitespace)."""
    parsed: bool
    """False when sqlglot could not parse the statement: its structure is unknown."""
    error: str | None = None
    """Why the statement is unknown, when it is."""
    tables: list[str] = []
    """Physical tables, sorted."""
    joins: list[JoinEdge] = []
    """Join edges, sorted."""


class CoverageReport(BaseModel):
    """The agent's structural coverage of the witness SQL (the ``ispm coverage --json`` object)."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    witness_tables: list[str]
    """Physical tables the witness reads, sorted."""
    agent_tables: list[str]
    """Physical tables the agent's statements read, taken together, sorted."""
    witness_joins: list[JoinEdge]
    """The witness's join edges, sorted."""
    agent_joins: list[JoinEdge]
    """The agent's join edges, taken together, sorted."""
    table_recall: float | None
    """Share of witness tables the agent touched; ``None`` if the witness reads no table."""
    join_recall: float | None
    """Share of witness join edges the agent touched; ``None`` if the witness has none."""
    extra_tables: list[str]
    """Tables the agent touched that the witness does not, sorted."""
    unparsed: int
    """How many of the agent's statements sqlglot could not parse, or were over a size or time limit."""
    unparsed_reasons: list[str] = []
    """Why each unparsed agent statement is unknown, in the agent's order (one entry per ``unparsed``)."""


def extract_structures(sql: str, schema: SchemaLike = None) -> list[QueryStructure]:
    """Split ``sql`` into statements and extract each one's tables and join edges.

    Empty statements (stray semicolons, comment-only text) are skipped. Never raises for bad SQL:
    an unparseable statement comes back with ``parsed=False``.
    """
    prepared = _prepare(schema)
    return [_structure(text, tokens, unknown, prepared) for text, tokens, unknown in _split(sql)]


def coverage(witness_sql: str, agent_sql: str | Iterable[str], schema: SchemaLike = None) -> CoverageReport:
    """Compare the union of the agent's statements with the witness's.

    ``agent_sql`` is one text or several (for example every logged query); each may hold several
    ``;``-separated statements.

    Raises:
        CoverageError: when the witness holds no statement or a statement sqlglot cannot parse.
    """
    prepared = _prepare(schema)
    texts = [agent_sql] if isinstance(agent_sql, str) else list(agent_sql)
    return compare_structures(
        extract_structures(witness_sql, prepared), [s for text in texts for s in extract_structures(text, prepared)]
    )


def compare_structures(witness: Sequence[QueryStructure], agent: Sequence[QueryStructure]) -> CoverageReport:
    """The coverage report for already-analysed witness and agent statements.

    Raises:
        CoverageError: when the witness holds no statement or a statement sqlglot cannot parse.
    """
    if not witness:
        raise CoverageError("the witness SQL holds no statement")
    for number, s in enumerate(witness, start=1):
        if not s.parsed:
            raise CoverageError(f"witness statement {number} cannot be parsed: {s.error}")
    w_tables = {t for s in witness for t in s.tables}
    a_tables = {t for s in agent for t in s.tables}
    w_joins = {j for s in witness for j in s.joins}
    a_joins = {j for s in agent for j in s.joins}
    return CoverageReport(
        witness_tables=sorted(w_tables),
        agent_tables=sorted(a_tables),
        witness_joins=sorted(w_joins),
        agent_joins=sorted(a_joins),
        table_recall=len(w_tables & a_tables) / len(w_tables) if w_tables else None,
        join_recall=len(w_joins & a_joins) / len(w_joins) if w_joins else None,
        extra_tables=sorted(a_tables - w_tables),
        unparsed=sum(not s.parsed for s in agent),
        unparsed_reasons=[s.error or "unknown" for s in agent if not s.parsed],
    )


def coverage_from_files(witness_path: str | Path, agent_path: str | Path, schema: SchemaLike = None) -> CoverageReport:
    """``coverage`` over two UTF-8 files of ``;``-separated statements.

    Raises:
        CoverageError: when a file cannot be read, or as ``coverage`` does.
    """
    texts = []
    for path in (witness_path, agent_path):
        try:
            texts.append(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as e:
            raise CoverageError(f"{path}: cannot read SQL: {e}") from e
    return coverage(texts[0], texts[1], schema)


# ---------------------------------------------------------------- statements


def _prepare(schema: SchemaLike) -> SqlSchema | None:
    if schema is None or isinstance(schema, SqlSchema):
        return schema
    return _cached_schema(tuple(sorted((t, tuple(sorted(cols))) for t, cols in schema.items())))


@functools.lru_cache(maxsize=16)
def _cached_schema(frozen: tuple[tuple[str, tuple[str, ...]], ...]) -> SqlSchema:
    # Building a MappingSchema normalises every name; do it once per distinct schema, not per query.
    return SqlSchema(dict(frozen))


def _split(sql: str) -> Iterator[tuple[str, list[Token] | None, str | None]]:
    """Yield (original text, tokens, why it is unknown) per statement that is more than comments.

    Tokens are None exactly when the statement is unknown before parsing.
    """
    if len(sql) > MAX_TEXT_CHARS:
        if sql.strip():
            yield sql.strip(), None, f"too large to analyse: {len(sql)} characters (limit {MAX_TEXT_CHARS})"
        return
    if "\x00" in sql:
        yield sql.strip(), None, "the text holds a NUL character, which SQLite rejects"
        return
    # A statement's text is everything up to its semicolon, comments included: the agent's
    # original text, never sqlglot's regeneration of it.
    start = 0
    end = sql.find(";")
    while end != -1:
        if sqlite3.complete_statement(sql[start : end + 1]):
            yield from _statement(sql[start:end])
            start = end + 1
        end = sql.find(";", end + 1)
    yield from _statement(sql[start:])


def _statement(text: str) -> Iterator[tuple[str, list[Token] | None, str | None]]:
    try:
        tokens = _DIALECT.tokenize(text)
    except _SQLGLOT_FAULTS as e:
        yield text.strip(), None, f"cannot tokenize: {_first_line(e)}"
        return
    if len(tokens) > MAX_STATEMENT_TOKENS:
        yield text.strip(), None, f"too large to analyse: {len(tokens)} tokens (limit {MAX_STATEMENT_TOKENS})"
    elif tokens:
        yield text.strip(), tokens, None


def _structure(text: str, tokens: list[Token] | None, unknown: str | None, schema: SqlSchema | None) -> QueryStructure:
    if tokens is None:
        return QueryStructure(sql=text, parsed=False, error=unknown)

    def parse() -> list[exp.Expr]:
        # Parsing the tokens we already have saves a second tokenizer pass. The parser only uses
        # its sql argument to quote context in error messages, which we cut to the first line.
        return [t for t in _DIALECT.parser().parse(tokens, text) if t is not None]

    try:
        trees = parse()
    except _SQLGLOT_FAULTS as e:
        return QueryStructure(sql=text, parsed=False, error=_first_line(e))
    if not trees:
        return QueryStructure(sql=text, parsed=True)
    if len(trees) > 1:
        # SQLite reads one statement here (the split is its own), sqlglot several: a disagreement
        # about quoting that we cannot settle, so no credit rather than a guess.
        return QueryStructure(sql=text, parsed=False, error="sqlglot reads several statements where SQLite reads one")
    tree = trees[0]
    if not isinstance(tree, _STATEMENTS):
        # A Command is sqlglot's opaque fallback, and a bare expression ("selec x") is no statement.
        return QueryStructure(sql=text, parsed=False, error="sqlglot does not understand this statement")
    try:
        tree = qualify(tree, schema=schema.mapping if schema else None, **_QUALIFY)
    except _SQLGLOT_FAULTS:
        # qualify edits in place, so start again from a fresh tree and qualify tables only.
        try:
            tree = qualify(parse()[0], qualify_columns=False, **_QUALIFY)
        except _SQLGLOT_FAULTS as e:
            return QueryStructure(sql=text, parsed=True, error=f"cannot qualify: {_first_line(e)}")
    try:
        tables, joins = _Extractor(tree, schema).extract()
    except _SQLGLOT_FAULTS as e:
        return QueryStructure(sql=text, parsed=True, error=f"cannot scope: {_first_line(e)}")
    return QueryStructure(sql=text, parsed=True, tables=sorted(tables), joins=sorted(joins))


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


# ---------------------------------------------------------------- tables and joins

_SourceKey = tuple[int, str]  # (id of the scope that selects the source, its alias)
_DIRECT = 0  # the route of a column read straight from a table; a CTE's or derived table's is its scope's id
_Resolved = list[tuple[ColumnRef, _SourceKey, int]]  # (physical column, source, route)
_Seen = set[tuple[int, str]]  # (id of a CTE or derived-table scope, column) already followed


def _edge(a: ColumnRef, b: ColumnRef) -> JoinEdge:
    return (a, b) if a <= b else (b, a)


def _predicates(condition: exp.Expr) -> Iterator[exp.Expr]:
    """The leaves of a condition below its AND / OR / NOT / parentheses."""
    stack = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Connector):
            stack.extend((node.left, node.right))
        elif isinstance(node, (exp.Paren, exp.Not)):
            stack.append(node.this)
        else:
            yield node


def _direct_columns(node: exp.Expr) -> Iterator[exp.Column]:
    """Columns in ``node`` that belong to its own scope, not to a nested subquery."""
    for child in node.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Query)) and n is not node):
        if isinstance(child, exp.Column) and not isinstance(child.this, exp.Star):
            yield child


def _joins(select: exp.Select) -> Iterator[exp.Join]:
    """The joins of a SELECT's own FROM clause in written order, those inside parentheses included."""

    def of(source: exp.Expr) -> Iterator[exp.Join]:
        # ``(a JOIN b ON ...)`` parses as a Subquery around a Table that carries the inner joins.
        if isinstance(source, exp.Subquery) and not isinstance(source.this, exp.Query):
            yield from of(source.this)
        for join in source.args.get("joins") or []:
            yield from of(join.this)
            yield join

    from_ = select.args.get("from_")
    if from_ is not None:
        yield from of(from_.this)
    for join in select.args.get("joins") or []:
        yield from of(join.this)
        yield join


def _output_names(scope: Scope) -> list[str] | None:
    """The column names a CTE or derived table offers; None while an unexpanded ``*`` hides them."""
    query = scope.expression
    if not isinstance(query, exp.Query) or query.is_star:
        return None
    return [n.lower() for n in query.named_selects]


def _leaf_scopes(scope: Scope) -> Iterator[Scope]:
    """The SELECT scopes of a set operation, left to right; the scope itself for a SELECT."""
    if scope.set_operation_scopes:
        for branch in scope.set_operation_scopes:
            yield from _leaf_scopes(branch)
    else:
        yield scope


class _Extractor:
    """Tables and join edges of one qualified statement."""

    def __init__(self, root: exp.Expr, schema: SqlSchema | None) -> None:
        self.scopes = traverse_scope(root)
        self.known = {id(s) for s in self.scopes}
        self.by_query = {id(s.expression): s for s in self.scopes}
        self.schema = schema
        self.joins: set[JoinEdge] = set()

    def extract(self) -> tuple[set[str], set[JoinEdge]]:
        tables: set[str] = set()
        for scope in self.scopes:
            for _node, source in scope.selected_sources.values():
                if isinstance(source, exp.Table) and self._is_world_table(source):
                    tables.add(source.name.lower())
            if isinstance(scope.expression, exp.Select):
                self._scope_joins(scope, scope.expression)
        return tables, self.joins

    def _is_world_table(self, source: exp.Table) -> bool:
        # A table-valued function has a function, not an identifier, as its ``this``.
        if not isinstance(source.this, exp.Identifier) or source.name.lower().startswith("sqlite_"):
            return False
        return self.schema is None or source.name.lower() in self.schema.columns

    def _scope_joins(self, scope: Scope, select: exp.Select) -> None:
        conditions = []
        from_ = select.args.get("from_")
        order = [from_.this.alias_or_name] if from_ else []
        for join in _joins(select):
            right = join.this.alias_or_name
            if on := join.args.get("on"):
                conditions.append(on)
            # qualify rewrites USING and NATURAL into ON; these two branches serve the fallback
            # path and NATURAL joins whose columns only become known from the select lists (of a
            # named source: a parenthesised group has no name to resolve through).
            for ident in (join.args.get("using") or []) if right else []:
                name = ident.name.lower()
                left = self._using_left(scope, order, name)
                if left:
                    self._connect(self._resolve(left, name, scope), self._resolve(right, name, scope))
            if right and join.method.upper() == "NATURAL":
                for name in sorted(self._columns_of(scope, right) or ()):
                    left = next((a for a in order if name in (self._columns_of(scope, a) or ())), None)
                    if left:
                        self._connect(self._resolve(left, name, scope), self._resolve(right, name, scope))
            order.append(right)
        if where := select.args.get("where"):
            conditions.append(where.this)

        for condition in conditions:
            for leaf in _predicates(condition):
                if isinstance(leaf, exp.EQ):
                    self._equality(leaf.left, leaf.right, scope)
                elif isinstance(leaf, exp.In) and (query := leaf.args.get("query")) is not None:
                    self._semi_join(leaf.this, query, scope)

    def _equality(self, left: exp.Expr, right: exp.Expr, scope: Scope) -> None:
        pairs = [(left, right)]
        if (
            isinstance(left, exp.Tuple)
            and isinstance(right, exp.Tuple)
            and len(left.expressions) == len(right.expressions)
        ):
            pairs = list(zip(left.expressions, right.expressions, strict=True))  # row values, by position
        for lhs, rhs in pairs:
            self._connect(self._side(lhs, scope), self._side(rhs, scope))
            # ``x = (SELECT y ...)`` relates x and y just as ``x IN (SELECT y ...)`` does.
            for this, other in ((lhs, rhs), (rhs, lhs)):
                if isinstance(this, exp.Subquery):
                    self._semi_join(other, this, scope)

    def _semi_join(self, lhs: exp.Expr, query: exp.Expr, scope: Scope) -> None:
        inner = self.by_query.get(id(query.this if isinstance(query, exp.Subquery) else query))
        if inner is None:
            return
        outer = lhs.expressions if isinstance(lhs, exp.Tuple) else [lhs]
        for index, expression in enumerate(outer):
            selected = [
                (ref, (id(inner), ""), route)
                for leaf in _leaf_scopes(inner)
                if index < len(leaf.expression.expressions)
                for column in _direct_columns(leaf.expression.expressions[index])
                for ref, _key, route in self._resolve(column.table, column.name.lower(), leaf)
            ]
            self._connect(self._side(expression, scope), selected)

    def _connect(self, left: _Resolved, right: _Resolved) -> None:
        for a, key_a, route_a in left:
            for b, key_b, route_b in right:
                # The same column by two routes is a key passed through and joined back: no edge.
                if key_a != key_b and (a != b or route_a == route_b):
                    self.joins.add(_edge(a, b))

    def _side(self, node: exp.Expr, scope: Scope) -> _Resolved:
        return [r for c in _direct_columns(node) for r in self._resolve(c.table, c.name.lower(), scope)]

    def _resolve(self, alias: str, name: str, scope: Scope, seen: _Seen | None = None) -> _Resolved:
        """The physical columns behind ``alias.name`` seen from ``scope``, with the source's key and route."""
        found = self._find_source(alias.lower(), name, scope)
        if found is None:
            return []
        owner, source_alias, source = found
        key = (id(owner), source_alias)
        route = id(source) if isinstance(source, Scope) else _DIRECT
        refs = self._physical(source, name, set() if seen is None else seen)
        return [(ref, key, route) for ref in sorted(refs)]

    def _find_source(self, alias: str, name: str, scope: Scope | None) -> tuple[Scope, str, Any] | None:
        # Walk outwards: a name not selected in a subquery is a correlated reference to an outer one.
        while scope is not None:
            sources = scope.selected_sources
            if alias:
                if alias in sources:
                    return scope, alias, self._real(sources[alias][1])
            else:
                known = {a: self._columns_of(scope, a) for a in sources}
                definite = [a for a, cols in known.items() if cols is not None and name in cols]
                maybe = [a for a, cols in known.items() if cols is None]
                pick = definite if definite else maybe
                if len(pick) == 1:
                    return scope, pick[0], self._real(sources[pick[0]][1])
                if pick:  # ambiguous: better no edge than a guessed one
                    return None
            scope = scope.parent
        return None

    def _real(self, source: Any) -> Any:
        """The traversed scope of a recursive CTE for sqlglot's stand-in of its reference to itself.

        The stand-in is an empty scope over the CTE's first branch; the CTE's scope is the set
        operation above that branch.
        """
        if not isinstance(source, Scope) or id(source) in self.known:
            return source
        node = source.expression
        while isinstance(node, exp.Expr) and isinstance(node.parent, exp.SetOperation):
            node = node.parent
        return self.by_query.get(id(node), source)

    def _using_left(self, scope: Scope, order: Sequence[str], name: str) -> str | None:
        """The leftmost earlier source that has (or may have) column ``name``."""
        for alias in order:
            cols = self._columns_of(scope, alias)
            if cols is None or name in cols:
                return alias
        return None

    def _columns_of(self, scope: Scope, alias: str) -> frozenset[str] | None:
        """The column names a source offers, or None when unknown."""
        entry = scope.selected_sources.get(alias)
        if entry is None:
            return None
        source = self._real(entry[1])
        if isinstance(source, exp.Table):
            return self.schema.columns.get(source.name.lower()) if self.schema else None
        names = _output_names(source)
        return None if names is None else frozenset(names)

    def _physical(self, source: Any, name: str, seen: _Seen) -> set[ColumnRef]:
        if isinstance(source, exp.Table):
            if not self._is_world_table(source):
                return set()
            table = source.name.lower()
            # With a schema, a column the world does not have joins nothing.
            return {(table, name)} if self.schema is None or name in self.schema.columns[table] else set()
        if not isinstance(source, Scope) or (id(source), name) in seen:
            return set()  # an unknown kind of source, or a recursive CTE going round
        seen.add((id(source), name))
        names = _output_names(source)
        if names is not None:
            return self._output(source, names.index(name), seen) if name in names else set()
        select = next(_leaf_scopes(source))
        # An unexpanded ``SELECT *`` (no schema) over one source passes its columns through.
        if select.expression.is_star and len(select.selected_sources) == 1:
            return self._physical(self._real(next(iter(select.selected_sources.values()))[1]), name, seen)
        return set()

    def _output(self, scope: Scope, index: int, seen: _Seen) -> set[ColumnRef]:
        """The physical columns read by select-list entry ``index`` of ``scope``, in every branch."""
        refs: set[ColumnRef] = set()
        for leaf in _leaf_scopes(scope):
            projections = leaf.expression.expressions
            if index < len(projections):
                for column in _direct_columns(projections[index]):
                    resolved = self._resolve(column.table, column.name.lower(), leaf, seen)
                    refs.update(ref for ref, _key, _route in resolved)
        return refs
