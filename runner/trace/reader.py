"""Reading transcripts back: through the journal, checked against the sha256 journaled with each sample.

The contract a reader (``ispm trace``, the report's sample pages, the exports) builds on:

- :func:`list_transcripts` names every sample of a run with a transcript, and where each part is;
- :func:`~runner.transcript.storage.read_part` (re-exported here) reads one part through its journaled reference;
- :func:`load_transcript` returns one sample's :class:`~runner.transcript.model.Transcript`, the candidate's calls then
  the judges', every reference resolved to full requests and responses. It raises :class:`TranscriptError` naming
  the sample and the file when a part is missing, damaged, or not the bytes the journal names.

Of several journal entries for one sample (a sample graded again after a resume), the first ``sample_finished`` and
the last ``sample_graded`` count, as the record does.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from runner.errors import IspmError
from runner.run.journal import JOURNAL_NAME, Entry, RunStarted, SampleFinished, SampleGraded, read_entries
from runner.sample_key import SampleKey
from runner.transcript.model import Transcript, TranscriptEvent, TranscriptRef
from runner.transcript.storage import TranscriptError, read_part

__all__ = ["SampleTranscripts", "TranscriptError", "list_transcripts", "load_transcript", "read_part", "transcripts_in"]


class SampleTranscripts(BaseModel):
    """One sample's transcript parts, as the journal names them."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True, extra="forbid")

    sample: SampleKey
    """Which sample."""
    candidate: TranscriptRef | None
    """The agent's calls, journaled with ``sample_finished``."""
    judges: TranscriptRef | None
    """The judges' calls, journaled with ``sample_graded``."""

    def parts(self) -> list[TranscriptRef]:
        """The parts present, candidate first."""
        return [p for p in (self.candidate, self.judges) if p is not None]


def list_transcripts(run_dir: Path) -> list[SampleTranscripts]:
    """Every sample of the run in ``run_dir`` whose journal names a transcript, in journal order.

    Raises:
        TranscriptError: the journal is missing or damaged.
    """
    return transcripts_in(_entries(run_dir))


def _entries(run_dir: Path) -> list[Entry]:
    try:
        return read_entries(run_dir / JOURNAL_NAME)
    except IspmError as exc:
        raise TranscriptError(str(exc)) from exc


def transcripts_in(entries: list[Entry]) -> list[SampleTranscripts]:
    """:func:`list_transcripts` over journal entries already read (a reader of many samples reads the journal once)."""
    candidate: dict[SampleKey, TranscriptRef | None] = {}
    judges: dict[SampleKey, TranscriptRef | None] = {}
    order: list[SampleKey] = []
    for e in entries:
        if isinstance(e, SampleFinished):
            key = SampleKey(task_id=e.output.task_id, epoch=e.output.epoch)
            if key not in candidate:
                candidate[key] = e.transcript
                order.append(key)
        elif isinstance(e, SampleGraded):
            key = SampleKey(task_id=e.task_id, epoch=e.epoch)
            judges[key] = e.transcript
            if key not in candidate:
                candidate[key] = None
                order.append(key)
    found = [SampleTranscripts(sample=k, candidate=candidate.get(k), judges=judges.get(k)) for k in order]
    return [s for s in found if s.parts()]


def load_transcript(run_dir: Path, sample: SampleKey) -> Transcript:
    """The transcript of ``sample`` in the run at ``run_dir``: the candidate's calls, then the judges'.

    Raises:
        TranscriptError: the journal names no transcript for the sample, or a part is missing, changed or damaged.
    """
    entries = _entries(run_dir)
    run_id = next((e.run_id for e in entries if isinstance(e, RunStarted)), None)
    found = next((s for s in transcripts_in(entries) if s.sample == sample), None)
    if found is None:
        raise TranscriptError(f"sample {sample.label()}: the journal names no transcript for it")
    events: list[TranscriptEvent] = []
    for ref in found.parts():
        events += read_part(run_dir, ref, sample)
    return Transcript(run_id=run_id, sample=sample, events=events)
