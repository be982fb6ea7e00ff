"""A run's transcripts end to end: an agent on the official Anthropic SDK through the real gateway, two model
judges, the journal, the audit, the bundle, and ``kill -9`` then resume.

The run is in-process (``start_run`` with :class:`transcript_runs.SdkAgentBackend`); the candidate and the judges
are one :class:`FakeProvider` on loopback. No Docker: the sandbox plays no part in what the host keeps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from breaker_runs import JudgeState
from fake_provider import FakeProvider
from transcript_runs import CANDIDATE_KEY, JUDGE_KEY, SQL, SYSTEM, agent_responder, prompt_of, sdk_spec

from runner.call import TextBlock, ToolCallBlock
from runner.pipeline import resume_run, start_run
from runner.record.audit import audit
from runner.record.bundle import bundle
from runner.run.journal import JOURNAL_NAME, SampleFinished, SampleGraded, read_entries
from runner.sample_key import SampleKey
from runner.trace.reader import list_transcripts, load_transcript, read_part
from runner.transcript.storage import TRANSCRIPTS_DIR

TASKS = ["ispm-001", "ispm-004"]
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(responder=agent_responder(JudgeState())) as fake:
        yield fake


@pytest.fixture(scope="module")
def keys(provider: FakeProvider) -> Iterator[dict[str, str]]:
    env = {
        "OPENAI_API_KEY": JUDGE_KEY,
        "OPENAI_BASE_URL": provider.openai_base,
        "ANTHROPIC_API_KEY": CANDIDATE_KEY,
        "ANTHROPIC_BASE_URL": provider.anthropic_base,
    }
    saved = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    yield env
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def run_dir(keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transcript_runs import SdkAgentBackend

    folder = tmp_path_factory.mktemp("transcripts") / "run"
    result = start_run(sdk_spec(TASKS), folder, backend=SdkAgentBackend(), images={})
    assert result.outcome == "completed"
    return folder


def test_each_sample_journals_both_parts_of_its_transcript_beside_the_journal(run_dir: Path) -> None:
    found = list_transcripts(run_dir)
    assert [s.sample.label() for s in found] == ["ispm-001.e1", "ispm-004.e1"]
    for s in found:
        assert s.candidate is not None and s.judges is not None
        assert s.candidate.path == f"{TRANSCRIPTS_DIR}/{s.sample.label()}.candidate.json.gz"
        assert (s.candidate.calls, s.judges.calls) == (2, 2)
        assert (run_dir / s.candidate.path).stat().st_size == s.candidate.bytes


def test_the_transcript_shows_the_prompt_the_sdk_sent_and_its_streamed_replies_assembled(run_dir: Path) -> None:
    transcript = load_transcript(run_dir, SampleKey(task_id="ispm-001", epoch=1))
    first, second = transcript.calls("candidate")
    assert first.request.content["system"] == SYSTEM
    assert first.request.content["messages"] == [{"role": "user", "content": prompt_of("ispm-001")}]
    assert first.stream and first.request_headers["user-agent"].startswith("Anthropic/Python")
    assert first.response is not None and first.response.complete
    assert first.response.blocks == [
        TextBlock(text="Counting Okta users by status."),
        ToolCallBlock(id="toolu_sql", name="run_sql", arguments=f'{{"sql": "{SQL}"}}', input={"sql": SQL}),
    ]
    assert first.response.stop_reason == "tool_use"
    tool_result = second.request.content["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and tool_result["tool_use_id"] == "toolu_sql"
    assert second.response is not None
    assert second.response.blocks == [TextBlock(text="Two statuses: 412 active, 9 suspended.")]
    assert second.started_at >= first.started_at


def test_each_judges_call_is_kept_under_its_slot_and_alias(run_dir: Path) -> None:
    transcript = load_transcript(run_dir, SampleKey(task_id="ispm-004", epoch=1))
    a, b = transcript.calls("judge_a"), transcript.calls("judge_b")
    assert [(c.judge, c.api, c.outcome) for c in a + b] == [
        ("openai/judge-a", "chat", "ok"),
        ("openai/judge-b", "chat", "ok"),
    ]
    assert "# Rubrics" in a[0].request.content["messages"][0]["content"]
    assert a[0].response is not None and '"grades"' in a[0].response.blocks[0].text  # type: ignore[union-attr]


def test_no_key_and_no_token_is_in_any_transcript(run_dir: Path) -> None:
    import gzip

    for path in (run_dir / TRANSCRIPTS_DIR).iterdir():
        text = gzip.decompress(path.read_bytes()).decode()
        assert CANDIDATE_KEY not in text and JUDGE_KEY not in text


def test_the_record_does_not_change(run_dir: Path) -> None:
    assert "transcript" not in (run_dir / "record.json").read_text()


def test_the_untouched_run_audits_clean_with_every_transcript_checked(run_dir: Path) -> None:
    report = audit(run_dir)
    assert report.problems == []
    assert report.checks["transcripts"] == 4


def test_one_changed_byte_of_a_transcript_fails_the_audit_naming_the_sample(run_dir: Path, tmp_path: Path) -> None:
    copy = shutil.copytree(run_dir, tmp_path / "run")
    target = copy / TRANSCRIPTS_DIR / "ispm-004.e1.judges.json.gz"
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    problems = audit(copy).problems
    assert len(problems) == 1
    assert problems[0].startswith(
        f"transcript: sample ispm-004.e1: {TRANSCRIPTS_DIR}/ispm-004.e1.judges.json.gz: changed: its sha256 "
    )


def test_a_bundle_carries_the_transcripts_and_audits_clean(run_dir: Path, tmp_path: Path) -> None:
    out = bundle(run_dir, tmp_path / "run.tar.gz")
    with tarfile.open(out) as tar:
        names = {n for n in tar.getnames() if f"/{TRANSCRIPTS_DIR}/" in n}
    assert len(names) == 4
    assert audit(out).ok


def test_kill_9_then_resume_leaves_every_graded_sample_one_whole_transcript(
    keys: dict[str, str], tmp_path: Path
) -> None:
    from transcript_runs import SdkAgentBackend

    run_dir = tmp_path / "run"
    tasks = ["ispm-001", "ispm-004", "ispm-006"]
    script = (
        "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
        "from transcript_runs import SdkAgentBackend, sdk_spec; from runner.pipeline import start_run; "
        "start_run(sdk_spec(sys.argv[3:], ('ref#1', 'ref#2')), Path(sys.argv[2]), "
        "backend=SdkAgentBackend(delay_s=0.2), images={})"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script, str(TESTS), str(run_dir), *tasks],
        env={**os.environ, **keys},
        stderr=subprocess.DEVNULL,
    )
    journal = run_dir / JOURNAL_NAME
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if journal.exists() and journal.read_bytes().count(b'"sample_finished"') >= 2:
            break
        time.sleep(0.02)
    child.kill()  # SIGKILL: no cleanup of any kind
    child.wait()
    assert child.returncode == -9

    assert resume_run(run_dir, backend=SdkAgentBackend()).outcome == "completed"
    entries = read_entries(journal)
    finished = [e for e in entries if isinstance(e, SampleFinished)]
    graded = [e for e in entries if isinstance(e, SampleGraded)]
    assert sorted(e.output.task_id for e in finished) == tasks  # each sample collected once
    assert sorted(e.task_id for e in graded) == tasks
    for e in finished:
        key = SampleKey(task_id=e.output.task_id, epoch=e.output.epoch)
        assert e.transcript is not None
        assert len(read_part(run_dir, e.transcript, key)) == 2  # its own two calls, not doubled
    parts = [e.transcript for e in finished] + [e.transcript for e in graded]
    named = {part.path for part in parts if part is not None}
    kept = {f"{TRANSCRIPTS_DIR}/{p.name}" for p in (run_dir / TRANSCRIPTS_DIR).iterdir() if p.suffix != ".tmp"}
    assert kept == named and len(named) == len(tasks)  # the offline judges call no model: no judges' part
