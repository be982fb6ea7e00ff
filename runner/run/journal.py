"""The run journal: an append-only JSONL file that survives ``kill -9``.

Every entry is one line, written, flushed and ``fsync``-ed before the call returns, so a finished sample or a
vote is on disk before the next one starts. A process killed mid-write can leave one unterminated last line:
reading ignores it, and opening for append cuts it off first, so the next entry starts on a line of its own.
A terminated line that does not parse is damage, not a torn write, and is refused.

Entries are a tagged union on ``kind``. The run record is built from these entries alone.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from runner.contract import SampleOutput
from runner.gateway.model import SampleUsage
from runner.grading.coverage import CoverageReport
from runner.grading.model import JudgeVote
from runner.grading.replay import LoggedCheck
from runner.run.model import JudgeDryRun
from runner.run.spec import Digests, RunError, RunSpec
from runner.sample_key import SampleKey
from runner.transcript.model import TranscriptRef

JOURNAL_NAME = "journal.jsonl"


def now() -> str:
    """The current UTC time, ISO 8601."""
    return datetime.now(UTC).isoformat()


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    ts: str = Field(default_factory=now)


class RunStarted(_Entry):
    """A run (or a resume of it) started: the spec and everything pinned at preflight."""

    kind: Literal["run_started"] = "run_started"
    run_id: str
    resumed: bool = False
    spec: RunSpec
    digests: Digests
    images: dict[str, str] = Field(default_factory=dict)
    """Image id by tag or short name, as the engine resolved it."""
    runner_version: str
    resolved_models: dict[str, str] = Field(default_factory=dict)
    """Model id the wire returned, by alias; empty for the reference judge and calibration agents."""
    used_s: float = 0.0
    """Run wall time already spent by earlier attempts, counted against the run limit."""
    judge_dry_runs: list[JudgeDryRun] = Field(default_factory=list)
    """Each model judge's dry run on the calibration set at this start's preflight: tokens, latency and the
    projection for the run; empty for the reference judge."""


class SampleAttempt(BaseModel):
    """An attempt at a sample that is not the one kept: lost with its node, or a late duplicate."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    node: str
    """The cluster node it ran on (for a try lost before it said so, the node Ray placed it on); ``unknown`` when
    neither said, and ``detail`` says so."""
    outcome: Literal["lost", "duplicate"]
    """``lost``: the node, its worker or its Docker engine failed before a result came back, and the sample ran again
    elsewhere;
    ``duplicate``: a second result for a sample already kept, recorded and never graded."""
    detail: str
    """Why, in the words of the cluster."""


class NodeLeftOut(_Entry):
    """A cluster node the run left out (the ``ray`` backend): it failed its checks when this start admitted the
    cluster's nodes, or when it joined later, so no sample of the run ran on it."""

    kind: Literal["node_left_out"] = "node_left_out"
    node: str
    """The Ray node id."""
    host: str | None
    """The node's host name; ``None`` when its check never answered."""
    joined: bool
    """Whether it joined the cluster after this start admitted the others."""
    reasons: list[str]
    """Every check it failed, one line each, naming the node."""


class SampleFinished(_Entry):
    """One sample ran: everything the host collected."""

    kind: Literal["sample_finished"] = "sample_finished"
    output: SampleOutput
    usage: SampleUsage | None = None
    """The agent's requests and tokens as the gateway counted them; ``None`` when the run had no gateway."""
    node: str | None = None
    """The cluster node the sample ran on (the ``ray`` backend); ``None`` on one machine."""
    engine: str | None = Field(default=None, exclude_if=lambda v: v is None)
    """The Docker engine that ran it on its node, as ``docker info`` names it: ``<host>:<data root> (<engine ID>)``;
    ``None`` on one machine,
    and left out of the entry then, so one machine's journals read as before."""
    attempts: list[SampleAttempt] = Field(default_factory=list)
    """Earlier attempts lost with their node; empty when the first attempt is the one kept."""
    transcript: TranscriptRef | None = None
    """The agent's model calls as the gateway saw them (docs/trace.md), written before this entry; ``None``
    without a gateway, or for a sample run where the host kept no transcript (a cluster node)."""


class SampleGraded(_Entry):
    """One sample was graded: every judge slot's votes."""

    kind: Literal["sample_graded"] = "sample_graded"
    task_id: str
    epoch: int
    graded: bool
    """False when the sample was broken and every slot recorded ``incorrect`` without asking a judge."""
    votes: list[JudgeVote]
    grade_s: float = 0.0
    coverage: CoverageReport | None = None
    """Structural coverage of the witness SQL by the agent's SQL; ``None`` when not graded or not measurable."""
    coverage_error: str | None = None
    """Why coverage could not be measured (an unparseable witness)."""
    analysis_note: str | None = None
    """What the sample's analysis budget left out (queries not replayed, SQL not analysed); ``None`` when nothing."""
    replay_checks: dict[str, LoggedCheck] = Field(default_factory=dict)
    """What the host's replay found of each distinct text the SQL tool logged, by ``replay.sql_key``: how a trace
    marks each logged statement. Empty in runs journaled before it."""
    transcript: TranscriptRef | None = None
    """The judges' model calls for this sample (docs/trace.md), written before this entry; ``None`` when no model
    judge was called."""

    @property
    def key(self) -> SampleKey:
        """Which sample was graded."""
        return SampleKey(task_id=self.task_id, epoch=self.epoch)


class RunFinished(_Entry):
    """Every planned sample was run and graded within the run limit."""

    kind: Literal["run_finished"] = "run_finished"
    used_s: float


class RunTimedOut(_Entry):
    """The run limit passed before every sample was graded: the run has no score."""

    kind: Literal["run_timed_out"] = "run_timed_out"
    used_s: float
    limit_s: float


class RunInterrupted(_Entry):
    """The runner was stopped (Ctrl-C, a request from outside such as a board's cancel, or a cluster run's driver
    whose every node is gone); ``ispm run --resume`` continues it."""

    kind: Literal["run_interrupted"] = "run_interrupted"
    used_s: float
    reason: str | None = None
    """Why, when the stop came with one (``cancelled on board ...: cancelled by the submitter``); ``None`` for
    Ctrl-C."""


class RunStopped(_Entry):
    """A circuit breaker stopped the run; ``ispm run --resume`` continues it once the cause is fixed."""

    kind: Literal["run_stopped"] = "run_stopped"
    used_s: float
    breaker: Literal["judge", "candidate", "cost"]
    """Which breaker tripped (``cost``: the run's ``--run-cost-limit``)."""
    party: str
    """The judge alias or the candidate model that kept failing."""
    reason: str
    """What the run says, e.g. ``judge openai/x: 10 malformed replies in a row; last: ...``."""


Entry = Annotated[
    RunStarted | NodeLeftOut | SampleFinished | SampleGraded | RunFinished | RunTimedOut | RunInterrupted | RunStopped,
    Field(discriminator="kind"),
]
ENTRY: TypeAdapter[Entry] = TypeAdapter(Entry)


class JournalScan(NamedTuple):
    """What one pass over a journal's bytes found."""

    entries: list[Entry]
    """Every complete line that is a valid entry, in order."""
    damaged: list[tuple[int, str]]
    """Complete lines that are not entries: (line number, why)."""
    torn: int | None
    """The number of an unterminated last line (a write ``kill -9`` cut short), or None."""
    lines: int
    """Complete lines."""


def scan_entries(data: bytes) -> JournalScan:
    """Parse a journal's bytes line by line, keeping every valid entry and naming every damaged line."""
    lines = data.split(b"\n")
    # The piece after the last newline is either empty or a write that kill -9 cut short.
    entries: list[Entry] = []
    damaged: list[tuple[int, str]] = []
    for number, line in enumerate(lines[:-1], start=1):
        if not line.strip():
            continue
        try:
            entries.append(ENTRY.validate_json(line))
        except ValidationError as exc:
            damaged.append((number, f"not a journal entry: {exc.errors()[0]['msg']}"))
    torn = len(lines) if lines[-1].strip() else None
    return JournalScan(entries, damaged, torn, len(lines) - 1)


def read_entries(path: Path) -> list[Entry]:
    """Every complete entry of the journal at ``path``, in order; an unterminated last line is ignored.

    Raises:
        RunError: the file is missing, or a complete line is not a valid entry (named by line number).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RunError(f"cannot read journal {path}: {exc}") from exc
    scan = scan_entries(data)
    if scan.damaged:
        number, why = scan.damaged[0]
        raise RunError(f"{path}, line {number}: {why}")
    return scan.entries


class Journal:
    """An open journal, safe to append to from worker threads."""

    def __init__(self, path: Path) -> None:
        """Open ``path`` for appending, creating it, after cutting off a torn last line."""
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            data = path.read_bytes()
            keep = data.rfind(b"\n") + 1
            if keep != len(data):
                with path.open("r+b") as f:
                    f.truncate(keep)
                    os.fsync(f.fileno())
        self._file = path.open("ab")
        self._lock = threading.Lock()

    def append(self, entry: Entry) -> None:
        """Write ``entry`` as one line and make it durable before returning."""
        line = entry.model_dump_json().encode() + b"\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def done_samples(entries: list[Entry]) -> tuple[dict[SampleKey, SampleOutput], set[SampleKey]]:
    """What a resume skips: the collected output of every finished sample, and the graded samples."""
    finished: dict[SampleKey, SampleOutput] = {}
    graded: set[SampleKey] = set()
    for e in entries:
        if isinstance(e, SampleFinished):
            finished.setdefault(e.output.key, e.output)
        elif isinstance(e, SampleGraded):
            graded.add(e.key)
    return finished, graded
