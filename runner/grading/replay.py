"""Query replay: re-execute the agent's SQL against the host's pristine snapshot, read-only.

Two sources feed the replay: the queries the answer *declares* (``answer.queries``) and the
queries the SQL tool *logged* (``queries.jsonl``). Identical texts are replayed once and keep
both sources. Each text is executed exactly as the agent wrote it, never a regenerated form.

**Safety.** The connection is opened ``mode=ro&immutable=1`` with ``PRAGMA query_only``, like
the in-container tool. On top of that an authorizer refuses, at prepare time (so nothing runs),
every action but reading: ``SELECT``, column reads, functions, recursive CTEs and a short list
of schema-introspection pragmas. A text holding several statements is refused too (SQLite's
own check, also at prepare time). A refusal is recorded with its reason as ``refused``.

**Budget.** SQLite's progress handler interrupts a query once its time budget has passed; the
query is recorded as ``timeout``. Replay keeps at most ``max_rows`` rows of one result. A sample's
replay as a whole may be given a ``deadline`` (the sample's analysis budget, ``runner.grading.grade``):
a query running into it is interrupted, and every distinct text left after it is recorded as
``skipped`` with the reason, never executed.

**Digests.** ``result_digest`` is computed exactly as ``images/base/ispm-sql`` computes it: the
``sha256:`` of the compact, key-sorted JSON of the row lists, BLOBs as ``{"$blob": hex}``, text
decoded as UTF-8 with replacement. The tool digests only the rows it kept under its row budget,
so a log line marked ``truncated`` is compared on that prefix.

**Log comparison (per logged line with this text).** A line that records an error agrees when
replay fails too; a line that records a result agrees when replay succeeds with the same row
count and digest. Lines with neither (an old or hand-written log) are not comparable.
``log_match`` is ``None`` when no line was comparable. A mismatch can mean a doctored log, and
also an ordering difference between SQLite versions for a query without ``ORDER BY``.

Results are cached by SQL text: the snapshot is immutable, so re-running the same text (the
same witness in five epochs) can only give the same answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from runner.contract import QueryLogEntry, SampleOutput
from runner.world.digest import open_readonly

QuerySource = Literal["declared", "logged"]
ReplayStatus = Literal["ok", "error", "timeout", "refused", "skipped"]

DEFAULT_BUDGET_S = 10.0
DEFAULT_MAX_ROWS = 100_000
# Same granularity as ispm-sql: an endless recursive CTE stops within milliseconds of its budget.
PROGRESS_EVERY_N_OPS = 1000
_CACHE_ENTRIES = 512
_CACHE_MAX_ROWS = 10_000  # larger results are not kept: their row texts would dominate memory

_READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
)
_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_temp_schema"})
_ACTION_NAMES = {
    getattr(sqlite3, n): n.removeprefix("SQLITE_").replace("_", " ")
    for n in (
        "SQLITE_INSERT", "SQLITE_UPDATE", "SQLITE_DELETE", "SQLITE_CREATE_TABLE", "SQLITE_CREATE_TEMP_TABLE",
        "SQLITE_CREATE_INDEX", "SQLITE_CREATE_TEMP_INDEX", "SQLITE_CREATE_VIEW", "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_TRIGGER", "SQLITE_CREATE_TEMP_TRIGGER", "SQLITE_DROP_TABLE", "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_INDEX", "SQLITE_DROP_VIEW", "SQLITE_DROP_TRIGGER", "SQLITE_ALTER_TABLE", "SQLITE_ATTACH",
        "SQLITE_DETACH", "SQLITE_TRANSACTION", "SQLITE_SAVEPOINT", "SQLITE_REINDEX", "SQLITE_ANALYZE",
        "SQLITE_CREATE_VTABLE", "SQLITE_DROP_VTABLE", "SQLITE_PRAGMA",
    )
}  # fmt: skip
_COMMENT_OR_SPACE = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.S)
_READ_STARTS = ("select", "with", "values", "explain", "pragma")


class ReplayedQuery(BaseModel):
    """One distinct SQL text of the sample, replayed once."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    sql: str
    """The agent's original text, byte for byte."""
    sources: list[QuerySource]
    """Where the text came from: declared in the answer, logged by the SQL tool, or both."""
    status: ReplayStatus
    """``ok``; ``error`` (SQLite rejected or failed it); ``timeout``; ``refused`` (not a single read); ``skipped``
    (not replayed: the sample's analysis budget was spent)."""
    error: str | None = None
    """SQLite's message, or the reason for a refusal or timeout."""
    row_count: int | None = None
    """Rows returned (at most ``max_rows``); ``None`` unless ``ok``."""
    truncated: bool = False
    """Replay stopped fetching at ``max_rows``."""
    result_digest: str | None = None
    """The ispm-sql digest of the rows; ``None`` unless ``ok``."""
    duration_ms: float = 0.0
    """Wall time of the execution (0 when it came from the cache)."""
    logged: int = 0
    """How many lines of the sample's query log hold this exact text."""
    log_match: bool | None = None
    """Whether every comparable log line agrees with the replay; ``None`` when none was comparable."""
    log_mismatch: str | None = None
    """The first disagreement, in words."""


ReplayFinding = Literal["same", "different", "not_replayed", "not_comparable"]


class LoggedCheck(BaseModel):
    """What the host's replay found of one text the SQL tool logged inside the sandbox (a line the agent could have
    written itself): the same result, a different one, or why it could not tell."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    finding: ReplayFinding
    """``same`` rows as logged; ``different`` rows (or an error where the log has rows, or the reverse);
    ``not_replayed`` (the sample's analysis budget was spent); ``not_comparable`` (the log line holds no result)."""
    detail: str | None = None
    """The difference or the reason, in words."""

    def words(self) -> str:
        """The finding as a reader sees it: ``host replay: same rows`` ..."""
        said = {
            "same": "same rows",
            "different": "different rows",
            "not_replayed": "not replayed",
            "not_comparable": "not compared",
        }[self.finding]
        return f"host replay: {said}" + (f" ({self.detail})" if self.detail and self.finding != "same" else "")


def sql_key(sql: str) -> str:
    """The key of a SQL text among a sample's logged checks: the hex sha256 of its UTF-8 bytes."""
    return hashlib.sha256(sql.encode("utf-8", errors="surrogatepass")).hexdigest()


def logged_checks(report: ReplayReport) -> dict[str, LoggedCheck]:
    """What the replay found of each distinct logged text, by :func:`sql_key`."""
    found: dict[str, LoggedCheck] = {}
    for q in report.queries:
        if "logged" not in q.sources:
            continue
        if q.status == "skipped" or (q.error or "").startswith(SKIPPED_REASON):
            check = LoggedCheck(finding="not_replayed", detail="the sample's analysis budget was spent")
        elif q.log_match is True:
            check = LoggedCheck(finding="same")
        elif q.log_match is False:
            check = LoggedCheck(finding="different", detail=q.log_mismatch)
        else:
            check = LoggedCheck(finding="not_comparable", detail="the log line records no result to compare")
        found[sql_key(q.sql)] = check
    return found


class ReplayReport(BaseModel):
    """Every distinct query of one sample, replayed, with counts for quick reading."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    queries: list[ReplayedQuery]
    """Declared texts first, in the answer's order, then logged-only texts in log order."""
    declared: int
    """Distinct declared texts."""
    logged_lines: int
    """Lines in the query log."""
    ok: int
    """Distinct texts that executed."""
    errors: int
    """Distinct texts that failed (``error`` or ``timeout``)."""
    refused: int
    """Distinct texts refused before execution."""
    log_mismatches: int
    """Distinct texts whose log lines disagree with the replay."""
    budget_s: float
    """The per-query time budget used."""
    skipped: int = 0
    """Distinct texts not replayed because the sample's analysis budget was spent (status ``skipped``)."""

    def declared_ok(self) -> bool:
        """True when the answer declares at least one query and every declared query executes."""
        declared = [q for q in self.queries if "declared" in q.sources]
        return bool(declared) and all(q.status == "ok" for q in declared)


def canonical_rows(rows: Sequence[Sequence[Any]]) -> str:
    """ispm-sql's canonical JSON of ``rows``: compact, key-sorted, UTF-8, BLOBs as ``{"$blob": hex}``."""
    return "[" + ",".join(_row_json(r) for r in rows) + "]"


def result_digest(rows: Sequence[Sequence[Any]]) -> str:
    """``sha256:<hex>`` over ``canonical_rows(rows)``: the digest ispm-sql writes to the query log."""
    return _digest_of([_row_json(r) for r in rows])


def open_world(path: Path) -> sqlite3.Connection:
    """Open the snapshot read-only and immutable, as ispm-sql does (query_only, lenient UTF-8)."""
    conn = open_readonly(path)
    conn.isolation_level = None
    # Same decoding as the SQL tool, or the digests of a stray invalid byte would differ.
    conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    conn.execute("PRAGMA query_only = ON")
    # Load the schema before the authorizer exists: SQLite's own schema bookkeeping is no agent action.
    conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    return conn


@dataclass(frozen=True)
class _Execution:
    status: ReplayStatus
    error: str | None
    rows: list[str]  # each row's canonical JSON, so any prefix can be digested
    truncated: bool
    digest: str | None
    duration_ms: float


class Replayer:
    """Replays SQL on one read-only connection to the snapshot. Not thread-safe: one per worker."""

    def __init__(
        self, world_path: Path, *, budget_s: float = DEFAULT_BUDGET_S, max_rows: int = DEFAULT_MAX_ROWS
    ) -> None:
        """Open ``world_path`` (the ``.sqlite`` file) read-only."""
        self.budget_s = budget_s
        self.max_rows = max_rows
        self._conn = open_world(world_path)
        self._denied: str | None = None
        self._conn.set_authorizer(self._authorize)
        self._cache: OrderedDict[str, _Execution] = OrderedDict()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def replay_sample(self, sample: SampleOutput, *, deadline: float | None = None) -> ReplayReport:
        """Replay the declared and logged queries of ``sample``, all of it by ``deadline`` (``time.monotonic``)."""
        declared = sample.answer.queries if sample.answer is not None else []
        return self.replay(declared, sample.queries, deadline=deadline)

    def replay(
        self, declared: Sequence[str], log: Sequence[QueryLogEntry], *, deadline: float | None = None
    ) -> ReplayReport:
        """Replay each distinct text of ``declared`` and ``log`` once and compare it with its log lines.

        With ``deadline`` (``time.monotonic``), no query runs past it, and the texts left are ``skipped``.
        """
        sources: dict[str, list[QuerySource]] = {}
        lines: dict[str, list[QueryLogEntry]] = {}
        for sql in declared:
            sources.setdefault(sql, ["declared"])
        for entry in log:
            kinds = sources.setdefault(entry.sql, [])
            if "logged" not in kinds:
                kinds.append("logged")
            lines.setdefault(entry.sql, []).append(entry)
        replayed = [self._replay_one(sql, kinds, lines.get(sql, []), _left(deadline)) for sql, kinds in sources.items()]
        return ReplayReport(
            queries=replayed,
            declared=sum("declared" in q.sources for q in replayed),
            logged_lines=len(log),
            ok=sum(q.status == "ok" for q in replayed),
            errors=sum(q.status in ("error", "timeout") for q in replayed),
            refused=sum(q.status == "refused" for q in replayed),
            log_mismatches=sum(q.log_match is False for q in replayed),
            budget_s=self.budget_s,
            skipped=sum(q.status == "skipped" for q in replayed),
        )

    def execute(self, sql: str) -> ReplayedQuery:
        """Execute one text (cached) and report it without sources or log comparison."""
        return self._replay_one(sql, [], [])

    def _replay_one(
        self, sql: str, kinds: list[QuerySource], entries: list[QueryLogEntry], left_s: float | None = None
    ) -> ReplayedQuery:
        run = self._run(sql, left_s)
        # A text the budget stopped or skipped was never fully replayed: no log line can be compared with it.
        unfinished = run.error is not None and run.error.startswith(SKIPPED_REASON)
        problems = [] if unfinished else [p for p in (_compare(e, run) for e in entries) if p is not _UNCOMPARABLE]
        mismatch = next((p for p in problems if p is not None), None)
        return ReplayedQuery(
            sql=sql,
            sources=kinds,
            status=run.status,
            error=run.error,
            row_count=len(run.rows) if run.status == "ok" else None,
            truncated=run.truncated,
            result_digest=run.digest,
            duration_ms=run.duration_ms,
            logged=len(entries),
            log_match=None if not problems else mismatch is None,
            log_mismatch=mismatch,
        )

    def _run(self, sql: str, left_s: float | None = None) -> _Execution:
        cached = self._cache.get(sql)
        if cached is not None:
            self._cache.move_to_end(sql)
            return _Execution(cached.status, cached.error, cached.rows, cached.truncated, cached.digest, 0.0)
        if left_s is not None and left_s <= 0:
            return _Execution("skipped", SKIPPED_REASON, [], False, None, 0.0)
        cut_short = left_s is not None and left_s < self.budget_s
        run = self._execute(sql, min(self.budget_s, left_s) if left_s is not None else self.budget_s)
        if cut_short and run.status == "timeout":
            # Stopped by the sample's budget, not its own: says nothing about the text, so it is not cached.
            why = f"{SKIPPED_REASON} while it ran; query interrupted"
            return _Execution("timeout", why, [], False, None, run.duration_ms)
        if len(run.rows) <= _CACHE_MAX_ROWS:
            self._cache[sql] = run
            if len(self._cache) > _CACHE_ENTRIES:
                self._cache.popitem(last=False)
        return run

    def _execute(self, sql: str, budget_s: float) -> _Execution:
        started = time.monotonic()

        def done(
            status: ReplayStatus, error: str | None, rows: list[str] | None = None, cut: bool = False
        ) -> _Execution:
            ms = round((time.monotonic() - started) * 1000.0, 3)
            digest = _digest_of(rows) if status == "ok" and rows is not None else None
            return _Execution(status, error, rows or [], cut, digest, ms)

        problem = _text_problem(sql)
        if problem is not None:
            return done("refused", problem)
        deadline = started + budget_s
        self._denied = None
        # Returning True makes SQLite abort the running statement with "interrupted".
        self._conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_EVERY_N_OPS)
        try:
            cursor = self._conn.execute(sql)
            fetched = cursor.fetchmany(self.max_rows + 1)
            cursor.close()
        except sqlite3.ProgrammingError as exc:
            if "one statement" in str(exc):
                return done("refused", "more than one statement: replay runs exactly one, as the SQL tool does")
            return done("error", str(exc))
        except sqlite3.Error as exc:
            if self._denied is not None:
                return done("refused", self._denied)
            if "interrupted" in str(exc) and time.monotonic() > deadline:
                return done("timeout", f"time budget of {budget_s:g} s exceeded; query interrupted")
            return done("error", str(exc))
        finally:
            self._conn.set_progress_handler(None, 0)
        cut = len(fetched) > self.max_rows
        return done("ok", None, [_row_json(r) for r in fetched[: self.max_rows]], cut)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, *_rest: object) -> int:
        if action in _ALLOWED:
            return sqlite3.SQLITE_OK
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in _READ_PRAGMAS:
            return sqlite3.SQLITE_OK
        # Eponymous virtual tables (SELECT ... FROM pragma_table_info(...)) touch the schema table
        # while preparing; the connection cannot write it anyway (mode=ro, immutable, query_only).
        if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in _SCHEMA_TABLES:
            return sqlite3.SQLITE_OK
        name = _ACTION_NAMES.get(action, f"action {action}")
        detail = f" {arg1}" if action == sqlite3.SQLITE_PRAGMA and arg1 else ""
        self._denied = self._denied or f"not a read-only query: {name}{detail} is refused in replay"
        return sqlite3.SQLITE_DENY


_UNCOMPARABLE = "uncomparable"
SKIPPED_REASON = "not replayed: the sample's analysis budget was spent"


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.monotonic()


def _compare(entry: QueryLogEntry, run: _Execution) -> str | None:
    """None when ``entry`` agrees with ``run``; a reason when not; ``_UNCOMPARABLE`` when it cannot tell."""
    if entry.error is not None:
        return None if run.status != "ok" else f"the log records an error ({entry.error}) but the query executes"
    if entry.result_digest is None or entry.row_count is None:
        return _UNCOMPARABLE
    if run.status != "ok":
        return f"the log records {entry.row_count} row(s) but replay gives {run.status}: {run.error}"
    kept = len(run.rows)
    if entry.truncated:
        # ispm-sql kept only its first row_count rows and digested those.
        if kept <= entry.row_count and not run.truncated:
            return f"the log records more than {entry.row_count} row(s) (truncated) but replay gives {kept}"
        if entry.row_count > kept:
            return f"the log records {entry.row_count} row(s) but replay kept only {kept}"
        digest: str | None = _digest_of(run.rows[: entry.row_count])
    else:
        if kept != entry.row_count:
            return f"the log records {entry.row_count} row(s) but replay gives {kept}"
        digest = run.digest
    if digest != entry.result_digest:
        return f"the logged result digest {entry.result_digest} differs from the replayed {digest}"
    return None


def _jsonable(value: object) -> object:
    # JSON has no bytes: a BLOB becomes an object no text value can be confused with (as in ispm-sql).
    if isinstance(value, bytes):
        return {"$blob": value.hex()}
    return value


def _row_json(row: Sequence[Any]) -> str:
    return json.dumps([_jsonable(v) for v in row], sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _digest_of(row_texts: Sequence[str]) -> str:
    # The compact JSON of a list is "[" + its items' texts joined by "," + "]": digest it in pieces.
    h = hashlib.sha256(b"[")
    for i, text in enumerate(row_texts):
        if i:
            h.update(b",")
        h.update(text.encode("utf-8"))
    h.update(b"]")
    return "sha256:" + h.hexdigest()


def _text_problem(sql: str) -> str | None:
    """Why ``sql`` is refused before SQLite sees it, or None."""
    lead = _COMMENT_OR_SPACE.match(sql)
    rest = sql[lead.end() if lead else 0 :]
    if not rest:
        return "empty statement: nothing to replay"
    if not rest.lower().startswith(_READ_STARTS):
        word = rest.split(None, 1)[0][:32]
        return f"not a read-only query: statements starting with {word!r} are refused in replay"
    return None
