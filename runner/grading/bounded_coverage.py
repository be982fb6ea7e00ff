"""Structural analysis of the agent's SQL at a bounded cost, in a worker process with hard time limits.

sqlglot's name resolution grows quadratically with the size of a condition (a 2,000-term ``OR``
chain takes most of a second, 20,000 terms take minutes), and an analysis that has started cannot
be stopped from inside the process that runs it. So the grader analyses the agent's SQL in a
worker process (``python -m runner.grading.bounded_coverage``) and kills the worker when it
overruns:

- **per query**: one SQL text (one declared or logged query) gets at most ``per_query_s`` of
  analysis. Over it, the text counts as one unparsed statement with the reason, and a new worker
  takes over for the next text.
- **per sample**: the texts of one sample together get at most ``per_sample_s``, waiting for a
  worker to start included. Each text left when the budget is spent counts as one unparsed
  statement with the reason.

The size limits of ``coverage`` (``MAX_TEXT_CHARS``, ``MAX_STATEMENT_TOKENS``) apply first, inside
the analysis, and are deterministic. The time limits are the safety net for shapes the size limits
do not catch; unlike them, they depend on the machine.

The witness is the task author's SQL, not the agent's: it is analysed in the grader's own process.
Results are cached per text, because the same texts recur (a task's witness in every sample, an
agent's habitual queries in every epoch); a verdict of the sample budget is not cached, since it
says nothing about the text.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, TypeAdapter

from runner.errors import GradingError
from runner.grading.coverage import MAX_TEXT_CHARS, CoverageError, QueryStructure, SqlSchema, extract_structures

_STRUCTURES = TypeAdapter(list[QueryStructure])
_CACHE_ENTRIES = 4096
_READY = b"ready\n"


class CoverageLimits(BaseModel):
    """How much structural analysis of the agent's SQL may cost."""

    model_config = ConfigDict(frozen=True)

    # Under the targets (1 s per query, 10 s per sample) by the time it takes to stop a worker and
    # to finish the rest of the sample's grading.
    per_query_s: float = 0.9
    """Wall time one SQL text may take to analyse."""
    per_sample_s: float = 9.0
    """Wall time all of one sample's texts may take together, waits for a worker to start included."""
    startup_s: float = 60.0
    """How long a worker may take to start before coverage counts as unmeasurable (the harness's fault)."""


class AnalysisStopped(GradingError):
    """The worker did not answer by a deadline (it is then killed), or exited while analysing."""

    def __init__(self, kind: Literal["time", "budget", "exit"], detail: str = "") -> None:
        super().__init__(detail or kind)
        self.kind = kind
        """What stopped it: the per-query ``time`` limit, the sample's ``budget``, or the worker's ``exit``."""


class AnalysisWorker:
    """One worker process that analyses SQL texts against one schema, one text at a time.

    The process starts on the first request and again after it was killed; it exits when its
    standard input closes, so it never outlives the grader.
    """

    def __init__(self, schema: SqlSchema | None, startup_s: float) -> None:
        self._schema_line = json.dumps(
            None if schema is None else {t: sorted(cols) for t, cols in schema.columns.items()}
        ).encode()
        self._startup_s = startup_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready_by = 0.0
        self._ready = False
        self._buffer = b""
        self._finalizer: weakref.finalize[..., AnalysisWorker] | None = None

    def analyse(self, sql: str, query_s: float, budget_deadline: float) -> list[QueryStructure]:
        """The structures of ``sql``, analysed within ``query_s`` seconds and before ``budget_deadline``.

        Raises:
            AnalysisStopped: the analysis hit a deadline (the worker is then killed) or the worker exited.
            CoverageError: the worker cannot be started; coverage is then unmeasurable.
        """
        if self._proc is not None and self._proc.poll() is not None:
            self.close()  # it died between texts (killed from outside): not this text's doing
        proc = self._started()
        if not self._ready:
            try:
                line = self._read_line(proc, self._ready_by, budget_deadline)
            except AnalysisStopped as e:
                if e.kind == "budget":
                    raise  # the worker goes on starting, for the next sample
                self.close()
                raise CoverageError(f"the coverage worker did not start: {e}") from e
            if line != _READY:
                self.close()
                raise CoverageError(f"the coverage worker did not start: it said {line[:80]!r}")
            self._ready = True
        try:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(sql).encode() + b"\n")
            proc.stdin.flush()
            return _STRUCTURES.validate_json(self._read_line(proc, time.monotonic() + query_s, budget_deadline))
        except OSError as e:
            self.close()
            raise AnalysisStopped("exit", f"the worker is gone: {e}") from e
        except AnalysisStopped:
            self.close()
            raise

    @property
    def pid(self) -> int | None:
        """The running worker's process id, if one runs."""
        return None if self._proc is None else self._proc.pid

    def close(self) -> None:
        """Stop the process, if one runs; the next request starts a new one."""
        if self._finalizer is not None:
            self._finalizer()
        self._proc, self._finalizer, self._ready, self._buffer = None, None, False, b""

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is not None:
            return self._proc
        # The package may be imported from a source tree that is not installed: tell the child where.
        root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH"))))}
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner.grading.bounded_coverage"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            bufsize=0,
        )
        assert proc.stdin is not None
        try:
            proc.stdin.write(self._schema_line + b"\n")
            proc.stdin.flush()
        except OSError:
            pass  # it exited at once; waiting for its first line says how
        self._proc, self._ready_by, self._ready = proc, time.monotonic() + self._startup_s, False
        # A grading context may be dropped without close() (a finished thread's): kill with it.
        self._finalizer = weakref.finalize(self, _kill, proc)
        return proc

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float, budget_deadline: float) -> bytes:
        """The next line from the worker, by ``deadline`` and ``budget_deadline``, whichever comes first."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            wait = min(deadline, budget_deadline) - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise AnalysisStopped("budget" if budget_deadline < deadline else "time")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AnalysisStopped("exit", f"the worker exited with code {proc.wait()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line + b"\n"


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


class StructureAnalyser:
    """Analyses SQL texts for one grading context: the witness in-process, agent texts within limits.

    Not thread-safe: one per grading context, as the replay connection is.
    """

    def __init__(self, schema: SqlSchema | None, limits: CoverageLimits) -> None:
        self.schema = schema
        self.limits = limits
        self.worker = AnalysisWorker(schema, limits.startup_s)
        # text -> (structures, whether the analysis finished): only finished ones may serve the witness.
        self._cache: OrderedDict[str, tuple[list[QueryStructure], bool]] = OrderedDict()

    def witness(self, sql: str) -> list[QueryStructure]:
        """The structures of trusted SQL (a task's witness), analysed here without a time limit."""
        cached = self._cached(sql)
        if cached is not None and cached[1]:
            return cached[0]
        found = extract_structures(sql, self.schema)
        self._remember(sql, found, finished=True)
        return found

    def agent(self, texts: Sequence[str], *, deadline: float | None = None) -> list[QueryStructure]:
        """The structures of one sample's SQL texts, in order, within the per-query and per-sample limits, and
        by ``deadline`` (``time.monotonic``: the end of the sample's whole analysis budget) when given.

        Raises:
            CoverageError: no worker could be started.
        """
        limits = self.limits
        budget_deadline = time.monotonic() + limits.per_sample_s
        if deadline is not None:
            budget_deadline = min(budget_deadline, deadline)
        found: list[QueryStructure] = []
        for sql in texts:
            cached = self._cached(sql)
            if cached is not None:
                found += cached[0]
                continue
            if time.monotonic() >= budget_deadline:
                found.append(_unknown(sql, f"not analysed: the sample's {limits.per_sample_s:g} s budget is spent"))
                continue
            if len(sql) > MAX_TEXT_CHARS:  # refused by size without analysis: no worker needed
                structures, finished = extract_structures(sql, self.schema), True
            else:
                try:
                    structures, finished = self.worker.analyse(sql, limits.per_query_s, budget_deadline), True
                except AnalysisStopped as e:
                    if e.kind == "budget":  # says nothing about the text: not remembered
                        found.append(
                            _unknown(sql, f"analysis stopped: the sample's {limits.per_sample_s:g} s budget is spent")
                        )
                        continue
                    why = f"over the {limits.per_query_s:g} s time limit" if e.kind == "time" else str(e)
                    structures, finished = [_unknown(sql, f"analysis stopped: {why}")], False
            self._remember(sql, structures, finished)
            found += structures
        return found

    def close(self) -> None:
        """Stop the worker."""
        self.worker.close()

    def _cached(self, sql: str) -> tuple[list[QueryStructure], bool] | None:
        entry = self._cache.get(sql)
        if entry is not None:
            self._cache.move_to_end(sql)
        return entry

    def _remember(self, sql: str, structures: list[QueryStructure], finished: bool) -> None:
        self._cache[sql] = (structures, finished)
        if len(self._cache) > _CACHE_ENTRIES:
            self._cache.popitem(last=False)


def _unknown(sql: str, why: str) -> QueryStructure:
    return QueryStructure(sql=sql.strip(), parsed=False, error=why)


def serve(requests: BinaryIO, answers: BinaryIO) -> None:
    """The worker's loop: a schema line, then one JSON string per line in, one JSON list per line out."""
    columns = json.loads(requests.readline() or "null")
    schema = None if columns is None else SqlSchema(columns)
    answers.write(_READY)
    answers.flush()
    for line in requests:
        answers.write(_STRUCTURES.dump_json(extract_structures(json.loads(line), schema)) + b"\n")
        answers.flush()


if __name__ == "__main__":
    # Ctrl-C at the terminal reaches the whole process group; the grader decides, and closing our
    # standard input is how it says stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Only protocol lines may reach the grader: anything a library prints goes to standard error.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sys.stdin.buffer, protocol)
