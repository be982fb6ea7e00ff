"""What a run wrote before stays readable: journals, records and transcripts of an earlier ispm, kept as files.

``tests/fixtures/v1_runs/`` holds two runs written by ispm at commit 9cc4bd2 through the real gateway, with an agent
calling it over its socket in every wire API, streamed and not (a tool call, cache reads and writes, reasoning
tokens, a translated call each way, ``count_tokens``, a body that is not JSON, an in-stream error, a cut stream, a
provider error), and two model judges: ``anthropic`` (an Anthropic candidate) and ``openai`` (an OpenAI one). Each
keeps its ``journal.jsonl``, its ``record.json`` and its transcripts, and ``<task>.e1.trace.txt`` is what
``ispm trace --text`` printed of each sample then.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.paths import tasks_dir
from runner.record.audit import audit
from runner.record.build import build_record, write_record
from runner.run.journal import JOURNAL_NAME, read_entries
from runner.tasks.load import load_tasks
from runner.trace.text import render_text
from runner.trace.timeline import read_timeline

RUNS = Path(__file__).resolve().parent / "fixtures" / "v1_runs"
SAMPLES = [(run, task) for run in ("anthropic", "openai") for task in ("ispm-001", "ispm-004")]


@pytest.mark.parametrize("run", ["anthropic", "openai"])
def test_the_record_rebuilt_from_an_earlier_journal_is_the_same_bytes(run: str, tmp_path: Path) -> None:
    record = build_record(read_entries(RUNS / run / JOURNAL_NAME), load_tasks(tasks_dir()))
    rebuilt = write_record(tmp_path, record).read_bytes()
    assert rebuilt == (RUNS / run / "record.json").read_bytes()


@pytest.mark.parametrize(("run", "task"), SAMPLES)
def test_an_earlier_transcript_reads_as_it_did(run: str, task: str) -> None:
    text = render_text(read_timeline(RUNS / run, task, 1)) + "\n"
    assert text == (RUNS / run / f"{task}.e1.trace.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("run", ["anthropic", "openai"])
def test_an_earlier_run_passes_the_audit(run: str) -> None:
    report = audit(RUNS / run)
    assert report.problems == [] and report.checks
