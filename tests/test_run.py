"""Runs: the journal, resume, the run limit, Ctrl-C, official refusals, the record, and the calibration pair.

Scheduler logic runs against a fake backend that answers with gold (or nothing) in-process; the calibration
pair runs the real replay and null images in Docker.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from inprocess_backend import InProcessBackend

from runner.contract import Answer, SampleOutput
from runner.grading.consensus import consensus
from runner.grading.reference_judge import gold_answer
from runner.paths import tasks_dir
from runner.pipeline import resume_run, run_calibration, start_run
from runner.record.build import build_record, load_record
from runner.run.calibration import calibration_spec
from runner.run.digests import current_digests
from runner.run.journal import (
    ENTRY,
    JOURNAL_NAME,
    Entry,
    Journal,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RunTimedOut,
    SampleFinished,
    SampleGraded,
    read_entries,
)
from runner.run.progress import Progress
from runner.run.scheduler import StopRequest
from runner.run.spec import Digests, RunError, RunSpec, official
from runner.sample_key import SampleKey
from runner.sandbox.backend import SampleSpec, SweepReport
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth

TASKS = ["ispm-001", "ispm-002", "ispm-003", "ispm-004"]
TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID = {t.id: t for t in load_tasks(tasks_dir())}


class FakeBackend(InProcessBackend):
    """Answers every sample in-process: the gold answer, or nothing; optionally slowly."""

    name = "fake"
    isolates = True

    def __init__(self, *, gold: bool = True, delay_s: float = 0.0) -> None:
        self.gold = gold
        self.delay_s = delay_s
        self.ran: list[SampleKey] = []
        self.swept: list[str | None] = []
        self._lock = threading.Lock()

    def sweep(
        self,
        run_id: str | None = None,
        *,
        attempt: str | None = None,
        board: str | None = None,
        orphans_only: bool = False,
    ) -> SweepReport:
        self.swept.append(run_id)
        return SweepReport()

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        with self._lock:
            self.ran.append(spec.key)
        if self.delay_s > spec.time_limit_s:
            time.sleep(spec.time_limit_s)
            return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="timeout", error="time limit")
        time.sleep(self.delay_s)
        task = BY_ID[spec.task_id]
        answer = gold_answer(task, TRUTH[task.id]) if self.gold else Answer(response="nothing")
        return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=answer)


def _spec(**update: Any) -> RunSpec:
    return calibration_spec("replay", epochs=2, concurrency=2, tasks=TASKS, backend="local").model_copy(update=update)


def _digests(**update: str) -> Digests:
    same = dict.fromkeys(["world_logical", "world_pinned", "task_set", "task_set_pinned"], "a" * 64)
    return Digests(**{**same, "ground_truth": "b", "rubric_set": "c", **update})


# -- the journal -------------------------------------------------------------------------------------------


def _entries() -> list[Entry]:
    output = SampleOutput(task_id="ispm-001", epoch=1, status="ok", answer=Answer(response="x"))
    return [
        RunStarted(run_id="r", spec=_spec(), digests=_digests(), runner_version="0"),
        SampleFinished(output=output),
        SampleGraded(task_id="ispm-001", epoch=1, graded=True, votes=[]),
        RunInterrupted(used_s=1.0),
        RunTimedOut(used_s=2.0, limit_s=1.0),
        RunFinished(used_s=3.0),
    ]


def test_every_entry_kind_round_trips_through_the_tagged_union() -> None:
    for entry in _entries():
        assert ENTRY.validate_json(entry.model_dump_json()) == entry


def test_a_torn_last_line_is_ignored_and_cut_before_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_NAME
    entries = _entries()
    with Journal(path) as journal:
        for entry in entries[:3]:
            journal.append(entry)
    with path.open("ab") as f:
        f.write(b'{"kind": "sample_fini')  # what kill -9 mid-write leaves
    assert read_entries(path) == entries[:3]
    with Journal(path) as journal:
        journal.append(entries[3])
    assert read_entries(path) == entries[:4]


def test_a_damaged_complete_line_is_refused_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / JOURNAL_NAME
    path.write_text(_entries()[0].model_dump_json() + "\n{oops}\n")
    with pytest.raises(RunError, match="line 2"):
        read_entries(path)


# -- official ----------------------------------------------------------------------------------------------


def _v1(**update: Any) -> RunSpec:
    return RunSpec(agent_image="me/agent:1", candidate="openai/gpt-x", judges=("a/j1", "b/j2")).model_copy(
        update=update
    )


def test_official_accepts_v1_and_marks_it() -> None:
    assert official(_v1(), _digests()).official
    assert not _v1().official


@pytest.mark.parametrize(
    ("spec", "digests", "reason"),
    [
        (_v1(backend="local"), _digests(), "local backend"),
        (_v1(tasks=["ispm-001"]), _digests(), "task filter"),
        (_v1(judges=("a/j1", " ")), _digests(), "two judge aliases"),
        (_v1(candidate=None), _digests(), "no candidate"),
        (_v1(calibration="replay"), _digests(), "calibration"),
        (_v1(epochs=3), _digests(), "epochs is 3"),
        (_v1(), _digests(world_logical="f" * 64), "world logical digest"),
        (_v1(), _digests(task_set="f" * 64), "task set digest"),
    ],
)
def test_official_refuses(spec: RunSpec, digests: Digests, reason: str) -> None:
    with pytest.raises(RunError, match=reason):
        official(spec, digests)


def test_two_slots_with_one_alias_are_refused() -> None:
    with pytest.raises(ValueError, match="distinct"):
        RunSpec(agent_image="x", judges=("ref", "ref"))


def test_the_bundled_world_and_tasks_match_their_pins() -> None:
    assert current_digests().problems() == []


# -- the scheduler, on the fake backend --------------------------------------------------------------------


def _graded_pairs(run_dir: Path) -> list[tuple[str, int]]:
    return [(e.task_id, e.epoch) for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, SampleGraded)]


def test_resume_skips_finished_work_and_leaves_no_duplicates(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    # One at a time, so the journal alternates finished and graded entries and the cut below is exact.
    first = start_run(_spec(concurrency=1), run_dir, backend=FakeBackend())
    assert first.outcome == "completed"
    # Simulate kill -9 after three graded samples and one collected but ungraded, mid-write of the next line.
    lines = (run_dir / JOURNAL_NAME).read_bytes().split(b"\n")
    keep = 1 + 3 * 2 + 1  # run_started, 3 × (finished, graded), one more finished
    (run_dir / JOURNAL_NAME).write_bytes(b"\n".join(lines[:keep]) + b"\n" + lines[keep][:20])
    (run_dir / "record.json").unlink()
    kept = read_entries(run_dir / JOURNAL_NAME)
    collected = {(e.output.task_id, e.output.epoch) for e in kept if isinstance(e, SampleFinished)}
    assert len(collected) == 4 and len(_graded_pairs(run_dir)) == 3

    again = FakeBackend()
    result = resume_run(run_dir, backend=again)
    assert result.outcome == "completed"
    graded = _graded_pairs(run_dir)
    assert len(graded) == len(set(graded)) == len(TASKS) * 2
    # The three graded samples and the collected one are not run again; the collected one is only graded.
    assert len(again.ran) == len(TASKS) * 2 - 4
    assert result.record.samples_graded == len(TASKS) * 2
    assert result.record.scores is not None
    assert result.record.scores.dimensions["answer_correctness"].mean == 1.0
    logged = [json.loads(line)["event"] for line in (run_dir / "log.jsonl").read_text().splitlines()]
    # Appended over both attempts: all 8 samples first, then the 4 the resume ran again.
    assert logged.count("run.sample_finished") == len(TASKS) * 2 + len(again.ran)


def test_run_limit_exceeded_records_timed_out_with_no_score(tmp_path: Path) -> None:
    spec = _spec(concurrency=1, run_limit_s=0.6)
    result = start_run(spec, tmp_path / "run", backend=FakeBackend(delay_s=0.25))
    assert result.outcome == "timed_out"
    assert result.record.status == "timed_out"
    assert result.record.scores is None
    assert 0 < result.record.samples_graded < len(TASKS) * 2
    assert any(isinstance(e, RunTimedOut) for e in read_entries(tmp_path / "run" / JOURNAL_NAME))
    # A timed-out run is final: resuming rebuilds the same record and runs nothing.
    again = FakeBackend()
    assert resume_run(tmp_path / "run", backend=again).record.status == "timed_out"
    assert again.ran == []


class _CtrlC(Progress):
    """Presses Ctrl-C in the main thread once the first sample is graded."""

    def finished(self, key: SampleKey, status: str) -> None:
        super().finished(key, status)
        raise KeyboardInterrupt


def test_ctrl_c_sweeps_the_run_and_resume_finishes_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    backend = FakeBackend(delay_s=0.05)
    result = start_run(_spec(), run_dir, backend=backend, progress=_CtrlC())
    assert result.outcome == "interrupted"
    assert result.record.status == "incomplete" and result.record.scores is None
    assert backend.swept == [result.record.run_id]
    resumed = resume_run(run_dir, backend=FakeBackend())
    assert resumed.outcome == "completed"
    starts = [e for e in read_entries(run_dir / JOURNAL_NAME) if isinstance(e, RunStarted)]
    assert [s.resumed for s in starts] == [False, True] and starts[0].ts < starts[1].ts
    assert starts[1].run_id == starts[0].run_id and starts[1].spec == starts[0].spec
    graded = _graded_pairs(run_dir)
    assert len(graded) == len(set(graded)) == len(TASKS) * 2


def test_a_stop_request_passed_on_stops_its_follower_and_never_the_other_way() -> None:
    caller, run = StopRequest(), StopRequest()
    with caller.passed_on(run):
        run.stop("every admitted node of the cluster is gone")
        assert not caller.is_set()  # the caller reads its own request as its own stop (a board's cancel)
        caller.stop("cancelled on board b: cancelled by the submitter", hands_off=True)
    assert (run.reason, run.hands_off) == ("every admitted node of the cluster is gone", True)  # the first reason
    late = StopRequest()
    with caller.passed_on(late):  # a stop made already is passed on at once
        assert (late.reason, late.hands_off) == (caller.reason, True)
    ended, follower = StopRequest(), StopRequest()
    with ended.passed_on(follower):
        pass
    ended.stop("after the run")  # the block is over: nothing is passed on
    assert not follower.is_set()


# -- the record --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def null_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("null") / "run"
    start_run(_spec(), run_dir, backend=FakeBackend(gold=False))
    return run_dir


def test_the_record_rebuilt_from_the_journal_equals_the_written_one(null_run: Path) -> None:
    rebuilt = build_record(read_entries(null_run / JOURNAL_NAME), BY_ID.values())
    assert rebuilt == load_record(null_run)


def test_the_record_consensus_is_the_consensus_of_the_journal_votes(null_run: Path) -> None:
    votes = [v.to_vote() for e in read_entries(null_run / JOURNAL_NAME) if isinstance(e, SampleGraded) for v in e.votes]
    expected = {(c.task_id, c.dimension): c.grade for c in consensus(votes)}
    scores = load_record(null_run).scores
    assert scores is not None
    assert {(t.task_id, d): g for t in scores.tasks for d, g in t.grades.items()} == expected
    assert scores.dimensions["answer_correctness"].mean == 0.0
    assert scores.pass_hat_k[1] == 0.0 and scores.pass_hat_k[2] == 0.0 and scores.pass_hat_k[3] is None
    assert set(scores.breakdowns) == {"vendor", "category", "kind", "hops"}


# -- the calibration pair, in Docker -----------------------------------------------------------------------

SUBSET = ["ispm-001", "ispm-010", "ispm-030", "ispm-060", "ispm-090", "ispm-127"]


def _containers_of(run_id: str) -> list[Any]:
    import docker

    client = docker.from_env()
    try:
        return list(client.containers.list(all=True, filters={"label": f"ispm.run={run_id}"}))
    finally:
        client.close()


@pytest.mark.docker
@pytest.mark.parametrize(("agent", "expected"), [("replay", 1.0), ("null", 0.0)])
def test_calibration_pair_on_a_subset(tmp_path: Path, agent: str, expected: float) -> None:
    result = run_calibration(agent, tasks=SUBSET, run_dir=tmp_path / "run")  # type: ignore[arg-type]
    record = result.record
    assert record.status == "completed" and not record.official and record.calibration == agent
    assert record.scores is not None
    assert record.scores.dimensions["answer_correctness"].mean == expected
    assert sum(record.failures.values()) == 0
    assert _containers_of(record.run_id) == []


@pytest.mark.docker
def test_kill_9_mid_run_then_resume_finishes_without_duplicates_or_leftovers(tmp_path: Path) -> None:
    import subprocess
    import sys

    run_dir = tmp_path / "run"
    tasks = sorted(BY_ID)[:12]
    script = (
        "import sys; from pathlib import Path; from runner.pipeline import run_calibration; "
        "run_calibration('replay', tasks=sys.argv[2:], run_dir=Path(sys.argv[1]))"
    )
    child = subprocess.Popen([sys.executable, "-c", script, str(run_dir), *tasks], stderr=subprocess.DEVNULL)
    journal = run_dir / JOURNAL_NAME
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and child.poll() is None:
        if journal.exists() and journal.read_bytes().count(b'"sample_graded"') >= 2:
            break
        time.sleep(0.05)
    child.kill()  # SIGKILL: no cleanup of any kind
    child.wait()
    result = resume_run(run_dir)
    assert result.outcome == "completed"
    graded = _graded_pairs(run_dir)
    assert sorted(graded) == sorted(set(graded)) == [(t, 1) for t in tasks]
    assert result.record.scores is not None
    assert result.record.scores.dimensions["answer_correctness"].mean == 1.0
    assert _containers_of(result.record.run_id) == []
