"""Structural analysis at a bounded cost: the worker's time limit, the sample budget, and hostile samples in a run."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from inprocess_backend import InProcessBackend

from runner.contract import QueryLogEntry, SampleOutput
from runner.grading.bounded_coverage import CoverageLimits, StructureAnalyser
from runner.grading.coverage import MAX_TEXT_CHARS, SqlSchema, extract_structures
from runner.grading.grade import GradingContext, grade_sample
from runner.grading.reference_judge import ReferenceJudge, gold_answer
from runner.paths import tasks_dir, world_dir
from runner.pipeline import start_run
from runner.run.calibration import calibration_spec
from runner.run.journal import JOURNAL_NAME, SampleGraded, read_entries
from runner.sandbox.backend import SampleSpec
from runner.tasks.load import load_tasks
from runner.tasks.truth import GROUND_TRUTH_NAME, load_ground_truth
from runner.world import SNAPSHOT_NAME

SCHEMA = SqlSchema(json.loads((Path(__file__).parent / "fixtures" / "coverage" / "schema.json").read_text()))
TRUTH = load_ground_truth(tasks_dir() / GROUND_TRUTH_NAME).tasks
BY_ID = {t.id: t for t in load_tasks(tasks_dir())}
WORLD = world_dir() / SNAPSHOT_NAME
HOSTILE_TERMS = 20_000
SLOW_TERMS = 1_200  # 4,804 tokens a statement: under the size limits, and a few tenths of a second to analyse


def or_chain(terms: int, column: str = "id") -> str:
    return "SELECT login FROM okta_users WHERE " + " OR ".join(f"{column} = '{column}{i}'" for i in range(terms))


@pytest.fixture(scope="module")
def slow() -> str:
    """A text under the size limits that takes at least 0.25 s to analyse here (checked, not assumed)."""
    text = ";\n".join(or_chain(SLOW_TERMS, column) for column in ("id", "login", "status", "id"))
    started = time.monotonic()
    structures = extract_structures(text, SCHEMA)
    assert [s.parsed for s in structures] == [True] * 4 and time.monotonic() - started >= 0.25
    return text


def test_a_text_over_the_time_limit_is_unparsed_and_the_next_text_is_analysed(slow: str) -> None:
    analyser = StructureAnalyser(SCHEMA, CoverageLimits(per_query_s=0.02))
    try:
        first = analyser.agent([slow, "SELECT name FROM okta_groups"])
        assert [(s.parsed, s.error, s.tables) for s in first] == [
            (False, "analysis stopped: over the 0.02 s time limit", []),
            (True, None, ["okta_groups"]),
        ]
        # The verdict is remembered: the same text in the next epoch is not sent to the worker again.
        worker = analyser.worker.pid
        assert analyser.agent([slow]) == first[:1]
        assert analyser.worker.pid == worker is not None
        # The witness is analysed in-process, without a time limit, even when an agent's copy overran.
        assert analyser.witness(slow)[0].parsed
    finally:
        analyser.close()


def test_the_sample_budget_bounds_many_slow_texts_and_the_next_sample_starts_afresh(slow: str) -> None:
    # 0.1 s per text: a quarter of the slow text's time at most, and room for the plain query that follows on a busy
    # machine (at 0.05 s it overran once with four test processes on two cores).
    analyser = StructureAnalyser(SCHEMA, CoverageLimits(per_query_s=0.1, per_sample_s=1.0))
    texts = [f"{slow} -- variant {i}" for i in range(20)]
    try:
        started = time.monotonic()
        found = analyser.agent(texts)
        elapsed = time.monotonic() - started
        assert elapsed < 1.5  # the budget, plus killing the last worker
        assert len(found) == len(texts) and not any(s.parsed for s in found)
        reasons = {s.error for s in found}
        assert "not analysed: the sample's 1 s budget is spent" in reasons
        assert reasons <= {
            "analysis stopped: over the 0.1 s time limit",
            "analysis stopped: the sample's 1 s budget is spent",
            "not analysed: the sample's 1 s budget is spent",
        }
        # Budget verdicts are not remembered: the next sample has a fresh budget.
        [again] = analyser.agent(["SELECT name FROM okta_groups"])
        assert again.tables == ["okta_groups"]
    finally:
        analyser.close()


def test_a_worker_killed_between_texts_is_replaced_without_blame() -> None:
    analyser = StructureAnalyser(SCHEMA, CoverageLimits())
    try:
        [first] = analyser.agent(["SELECT login FROM okta_users"])
        pid = analyser.worker.pid
        assert first.tables == ["okta_users"] and pid is not None
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        [second] = analyser.agent(["SELECT name FROM okta_groups"])
        assert second.tables == ["okta_groups"]
        assert analyser.worker.pid not in (None, pid)
    finally:
        analyser.close()
    assert analyser.worker.pid is None


def test_a_worker_that_cannot_start_makes_coverage_unmeasurable(monkeypatch: pytest.MonkeyPatch) -> None:
    task = BY_ID["ispm-001"]
    answer = gold_answer(task, TRUTH[task.id]).model_copy(update={"queries": [task.witness_sql + "\n-- mine"]})
    sample = SampleOutput(task_id=task.id, epoch=1, status="ok", answer=answer)
    with GradingContext(WORLD) as context:
        monkeypatch.setattr(sys, "executable", "/bin/false")
        graded = grade_sample(task, TRUTH[task.id], sample, [ReferenceJudge()], 1, context=context)
    assert graded.coverage is None
    assert graded.coverage_error == "the coverage worker did not start: the worker exited with code 1"


def _hostile_log(*texts: str) -> list[QueryLogEntry]:
    return [QueryLogEntry(ts="2026-01-01T00:00:00Z", sql=t, error="Expression tree is too large") for t in texts]


def test_grading_a_sample_with_hostile_sql_stays_within_its_limits(slow: str) -> None:
    task = BY_ID["ispm-001"]
    hostile = or_chain(HOSTILE_TERMS)
    answer = gold_answer(task, TRUTH[task.id])
    sample = SampleOutput(task_id=task.id, epoch=1, status="ok", answer=answer, queries=_hostile_log(hostile, slow))
    limits = CoverageLimits(per_query_s=0.02)
    with GradingContext(WORLD, coverage_limits=limits) as context:
        started = time.monotonic()
        graded = grade_sample(task, TRUTH[task.id], sample, [ReferenceJudge()], 1, context=context)
        assert time.monotonic() - started < limits.per_sample_s
        assert graded.coverage is not None and graded.coverage.table_recall == 1.0
        assert graded.coverage.unparsed_reasons == [
            f"too large to analyse: {len(hostile)} characters (limit {MAX_TEXT_CHARS})",
            "analysis stopped: over the 0.02 s time limit",
        ]
        # Grading goes on: the next sample, with the same context, is graded as if nothing happened.
        calm = SampleOutput(task_id=task.id, epoch=2, status="ok", answer=answer)
        after = grade_sample(task, TRUTH[task.id], calm, [ReferenceJudge()], 2, context=context)
        assert after.coverage is not None and (after.coverage.table_recall, after.coverage.unparsed) == (1.0, 0)


class HostileBackend(InProcessBackend):
    """Gold answers; the first sample's query log also holds a 20,000-term OR chain."""

    name = "hostile"
    isolates = True

    def run_sample(self, spec: SampleSpec) -> SampleOutput:
        task = BY_ID[spec.task_id]
        log = _hostile_log(or_chain(HOSTILE_TERMS)) if (spec.task_id, spec.epoch) == ("ispm-001", 1) else []
        answer = gold_answer(task, TRUTH[task.id])
        return SampleOutput(task_id=spec.task_id, epoch=spec.epoch, status="ok", answer=answer, queries=log)


def test_a_run_with_a_hostile_sample_grades_it_within_budget_and_goes_on(tmp_path: Path) -> None:
    spec = calibration_spec("replay", epochs=1, concurrency=1, tasks=["ispm-001", "ispm-002"], backend="local")
    result = start_run(spec, tmp_path / "run", backend=HostileBackend())
    assert result.outcome == "completed"
    graded = {e.task_id: e for e in read_entries(tmp_path / "run" / JOURNAL_NAME) if isinstance(e, SampleGraded)}
    assert sorted(graded) == ["ispm-001", "ispm-002"]
    hostile = graded["ispm-001"]
    assert hostile.grade_s is not None and hostile.grade_s < CoverageLimits().per_sample_s
    assert hostile.coverage is not None and hostile.coverage.unparsed == 1
    assert hostile.coverage.unparsed_reasons[0].startswith("too large to analyse: ")
    assert result.record.scores is not None
    assert result.record.scores.dimensions["answer_correctness"].mean == 1.0
