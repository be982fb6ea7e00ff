"""Collection: turn what a sample left in ``/output`` (and how its agent ended) into a ``SampleOutput``.

Everything here treats the output as hostile. Files are read from a tar stream (the Docker backend) or a
directory (the local backend) with ``lstat`` semantics: a symlink is reported as a symlink and never
followed; nothing is read past its cap, and a file is never read whole before its size is known. The
backends share this module, so a sample fails for the same reason whichever backend ran it.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from runner.contract import (
    MAX_ANSWER_BYTES,
    Answer,
    QueryLogEntry,
    ResourceLimit,
    SampleOutput,
    SampleStatus,
)

ANSWER = "answer.json"
QUERIES = "queries.jsonl"
TRACE = "trace.jsonl"
OUTPUT_FILES = (ANSWER, QUERIES, TRACE)

FileKind = Literal["missing", "regular", "symlink", "directory", "hardlink", "other"]


class CollectLimits(BaseModel):
    """How much of each output file the host reads, at most."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    answer_bytes: int = MAX_ANSWER_BYTES
    """``answer.json`` larger than this is refused unread."""
    queries_bytes: int = 8 * 1024 * 1024
    """Bytes of ``queries.jsonl`` read; the rest is noted and dropped."""
    queries_lines: int = 10_000
    """Entries of ``queries.jsonl`` kept."""
    trace_bytes: int = 4 * 1024 * 1024
    """Bytes of ``trace.jsonl`` read."""
    trace_lines: int = 10_000
    """Entries of ``trace.jsonl`` kept."""
    archive_entries: int = 20_000
    """Tar entries looked at before giving up on finding the output files."""


@dataclass
class OutputFile:
    """One expected file of ``/output`` as found: its kind, size and (up to a cap) its bytes."""

    name: str
    kind: FileKind = "missing"
    size: int = 0
    link: str = ""
    data: bytes = b""
    truncated: bool = False


@dataclass
class AgentEnd:
    """How the agent process ended, as the backend observed it from outside."""

    exit_code: int | None = None
    timed_out: bool = False
    oom_killed: bool = False
    stdout_tail: str = ""
    stderr_tail: str = ""
    failure: tuple[SampleStatus, str] | None = None
    """Set when the sample failed for a reason outside the agent's output (gateway path, lost output)."""
    notes: list[str] = field(default_factory=list)
    limits_reached: list[ResourceLimit] = field(default_factory=list)
    """The sandbox's limits the sample hit, as far as the backend can tell, whatever the exit code."""


class TailBuffer:
    """Keeps the last ``limit`` bytes of a stream; counts everything that went past."""

    def __init__(self, limit: int) -> None:
        """Keep at most ``limit`` bytes."""
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def feed(self, chunk: bytes) -> None:
        """Add ``chunk``, dropping the oldest bytes beyond the limit."""
        self.total += len(chunk)
        if len(chunk) >= self.limit:
            self._buf = bytearray(chunk[-self.limit :])
            return
        self._buf.extend(chunk)
        excess = len(self._buf) - self.limit
        if excess > 0:
            del self._buf[:excess]

    def text(self) -> str:
        """The tail as text, with a marker when bytes were dropped."""
        body = bytes(self._buf).decode("utf-8", "replace")
        dropped = self.total - len(self._buf)
        return f"[… {dropped} earlier bytes dropped]\n{body}" if dropped > 0 else body


class ChunkReader(io.RawIOBase):
    """A read-only file over an iterator of byte chunks (Docker's archive stream), refusing past ``limit``."""

    def __init__(self, chunks: Iterable[bytes], limit: int) -> None:
        """Read from ``chunks``; raise ``OSError`` once more than ``limit`` bytes were consumed."""
        self._chunks: Iterator[bytes] = iter(chunks)
        self._pending = b""
        self.limit = limit
        self.consumed = 0

    def readable(self) -> bool:
        """Always readable."""
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        """Fill ``buffer`` from the next chunk(s); 0 at the end of the stream."""
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        self.consumed += size
        if self.consumed > self.limit:
            raise OSError(f"the output archive exceeds {self.limit} bytes")
        return size


def _cap_for(name: str, limits: CollectLimits) -> int:
    # answer.json gets one byte past its limit: enough to know it is over, never the whole file.
    return {
        ANSWER: limits.answer_bytes + 1,
        QUERIES: limits.queries_bytes,
        TRACE: limits.trace_bytes,
    }[name]


def _read_capped(stream: IO[bytes], size: int, cap: int) -> tuple[bytes, bool]:
    data = stream.read(min(size, cap))
    return data, size > cap


def files_from_tar(fileobj: IO[bytes], limits: CollectLimits, root: str = "output") -> dict[str, OutputFile]:
    """The expected files from a tar stream of the output folder (entries named ``<root>/<file>``).

    Reads the stream once, front to back (``r|``): skipped members are read through, never kept.

    Raises:
        OSError, tarfile.TarError: the stream is broken or over the reader's limit.
    """
    found = {name: OutputFile(name) for name in OUTPUT_FILES}
    with tarfile.open(fileobj=fileobj, mode="r|") as archive:
        for count, member in enumerate(archive, start=1):
            if count > limits.archive_entries:
                break
            parts = member.name.strip("/").split("/")
            if len(parts) != 2 or parts[0] != root or parts[1] not in found:
                continue
            entry = found[parts[1]]
            entry.size = member.size
            if member.issym():
                entry.kind, entry.link = "symlink", member.linkname
            elif member.islnk():
                entry.kind, entry.link = "hardlink", member.linkname
            elif member.isdir():
                entry.kind = "directory"
            elif member.isreg():
                entry.kind = "regular"
                if entry.size <= _cap_for(entry.name, limits) or entry.name != ANSWER:
                    extracted = archive.extractfile(member)
                    if extracted is not None:
                        entry.data, entry.truncated = _read_capped(extracted, member.size, _cap_for(entry.name, limits))
            else:
                entry.kind = "other"
    return found


def files_from_dir(folder: Path, limits: CollectLimits) -> dict[str, OutputFile]:
    """The expected files from a host directory, by ``lstat``; regular files are opened with ``O_NOFOLLOW``."""
    found: dict[str, OutputFile] = {}
    for name in OUTPUT_FILES:
        entry = OutputFile(name)
        found[name] = entry
        path = folder / name
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        entry.size = info.st_size
        if stat.S_ISLNK(info.st_mode):
            entry.kind, entry.link = "symlink", os.readlink(path)
        elif stat.S_ISDIR(info.st_mode):
            entry.kind = "directory"
        elif not stat.S_ISREG(info.st_mode):
            entry.kind = "other"
        else:
            entry.kind = "regular"
            cap = _cap_for(name, limits)
            if name == ANSWER and entry.size > cap:
                continue
            # O_NOFOLLOW closes the window between lstat and open in which the file could become a link.
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as handle:
                entry.data, entry.truncated = _read_capped(handle, entry.size, cap)
    return found


def validate_answer(entry: OutputFile, limits: CollectLimits) -> tuple[Answer | None, str | None]:
    """The validated answer, or the specific reason it was refused."""
    if entry.kind == "missing":
        return None, "answer.json missing"
    if entry.kind == "symlink":
        return None, f"answer.json is a symlink (to {entry.link!r}), not a regular file"
    if entry.kind == "hardlink":
        return None, f"answer.json is a hard link (to {entry.link!r}), not a regular file"
    if entry.kind != "regular":
        return None, f"answer.json is not a regular file ({entry.kind})"
    if entry.size > limits.answer_bytes:
        return None, f"answer.json is {entry.size} bytes, over the {limits.answer_bytes}-byte limit"
    try:
        return Answer.model_validate_json(entry.data), None
    except ValidationError as exc:
        return None, f"answer.json does not match the answer schema: {exc}"


def _lines(entry: OutputFile, max_lines: int, notes: list[str]) -> Iterator[tuple[int, bytes]]:
    if entry.kind == "missing":
        return
    if entry.kind != "regular":
        notes.append(f"{entry.name} ignored: it is a {entry.kind}, not a regular file")
        return
    if entry.truncated:
        notes.append(f"{entry.name}: only the first {len(entry.data)} of {entry.size} bytes were read")
    lines = entry.data.split(b"\n")
    if entry.truncated and lines:
        lines.pop()  # the cut went through the last line
    kept = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if kept >= max_lines:
            notes.append(f"{entry.name}: only the first {max_lines} entries were kept")
            return
        kept += 1
        yield number, line


def parse_queries(entry: OutputFile, limits: CollectLimits) -> tuple[list[QueryLogEntry], list[str]]:
    """The query log's entries; malformed lines are skipped and counted in the notes."""
    notes: list[str] = []
    entries: list[QueryLogEntry] = []
    bad: list[int] = []
    for number, line in _lines(entry, limits.queries_lines, notes):
        try:
            entries.append(QueryLogEntry.model_validate_json(line))
        except ValidationError:
            bad.append(number)
    if bad:
        notes.append(f"{QUERIES}: {len(bad)} malformed lines skipped (first: line {bad[0]})")
    return entries, notes


def parse_trace(entry: OutputFile, limits: CollectLimits) -> tuple[list[dict[str, object]], list[str]]:
    """The trace's entries (JSON objects); other lines are skipped and counted in the notes."""
    notes: list[str] = []
    entries: list[dict[str, object]] = []
    bad = 0
    for _, line in _lines(entry, limits.trace_lines, notes):
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict):
            entries.append(value)
        else:
            bad += 1
    if bad:
        notes.append(f"{TRACE}: {bad} lines that are not JSON objects skipped")
    return entries, notes


def build_output(
    task_id: str,
    epoch: int,
    end: AgentEnd,
    files: dict[str, OutputFile] | None,
    limits: CollectLimits,
    *,
    time_limit_s: float,
) -> SampleOutput:
    """Decide the sample's status and assemble its output.

    Precedence, first match wins: a failure outside the agent (lost output, gateway path), the time limit,
    the OOM killer, a non-zero exit, an invalid answer. The answer, queries and trace are kept whenever
    they could be read, whatever the status: a timed-out sample still shows what it did.
    """
    notes = list(end.notes)
    answer: Answer | None = None
    answer_error: str | None = "output was not collected"
    queries: list[QueryLogEntry] = []
    trace: list[dict[str, object]] = []
    if files is not None:
        answer, answer_error = validate_answer(files[ANSWER], limits)
        queries, query_notes = parse_queries(files[QUERIES], limits)
        trace, trace_notes = parse_trace(files[TRACE], limits)
        notes += query_notes + trace_notes

    status: SampleStatus
    error: str | None
    if end.failure is not None:
        status, error = end.failure
    elif end.timed_out:
        status, error = "timeout", f"the agent ran past the time limit of {time_limit_s:g} s and was killed"
    elif end.oom_killed:
        status, error = "oom", f"the agent was killed by the OOM killer (exit code {end.exit_code})"
    elif end.exit_code != 0:
        status, error = "agent_error", f"the agent exited with code {end.exit_code}"
    elif answer_error is not None:
        status, error = "invalid_answer", answer_error
    else:
        status, error = "ok", None
    if status in ("timeout", "oom", "agent_error") and answer_error is not None:
        error = f"{error}; {answer_error}"
    return SampleOutput(
        task_id=task_id,
        epoch=epoch,
        status=status,
        error=error,
        notes=notes,
        answer=answer,
        queries=queries,
        trace=trace,
        exit_code=end.exit_code,
        oom_killed=end.oom_killed,
        limits_reached=list(dict.fromkeys(end.limits_reached)),
        stdout_tail=end.stdout_tail,
        stderr_tail=end.stderr_tail,
    )
