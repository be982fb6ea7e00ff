"""The reference judge ``ref`` and ``grade_sample`` over the real task set: gold answers, empty answers, failures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.contract import Answer, EvidenceItem, SampleOutput
from runner.errors import GradingError
from runner.grading.consensus import consensus
from runner.grading.coverage import CoverageError, coverage
from runner.grading.grade import GradingContext, SampleGrade, grade_sample
from runner.grading.judge import JudgeInput, JudgeVote
from runner.grading.reference_judge import ReferenceJudge, gold_answer
from runner.tasks.catalog import derive_all
from runner.tasks.load import load_tasks
from runner.tasks.model import Task
from runner.tasks.truth import GROUND_TRUTH_NAME, GroundTruth, TaskTruth, load_ground_truth
from runner.world import SNAPSHOT_NAME

REF = ReferenceJudge()


class MustNotBeCalled:
    """A judge slot that fails the test if grading asks it anything."""

    alias = "openai/never"
    requested_model: str | None = "never"

    def judge(self, item: JudgeInput) -> list[JudgeVote]:
        raise AssertionError("a broken sample must not reach the judges")


@pytest.fixture(scope="module")
def tasks(tasks_path: Path) -> list[Task]:
    return load_tasks(tasks_path)


@pytest.fixture(scope="module")
def truth(tasks_path: Path, world_path: Path) -> GroundTruth:
    published = tasks_path / GROUND_TRUTH_NAME
    # The published file is regenerated with the world; derive it when it is absent mid-rebuild.
    return load_ground_truth(published) if published.is_file() else derive_all(tasks_path, world_path)


@pytest.fixture(scope="module")
def context(world_path: Path) -> Iterator[GradingContext]:
    with GradingContext(world_path / SNAPSHOT_NAME) as ctx:
        yield ctx


def grade(task: Task, truth: TaskTruth, answer: Answer | None, context: GradingContext, **kw: object) -> SampleGrade:
    sample = SampleOutput.model_validate({"task_id": task.id, "epoch": 1, "status": "ok", "answer": answer, **kw})
    return grade_sample(task, truth, sample, [REF], 1, context=context)


def by_dimension(result: SampleGrade) -> dict[str, str]:
    return {v.dimension: v.grade for v in result.votes}


def test_every_gold_answer_is_correct_wherever_ref_grades(
    tasks: list[Task], truth: GroundTruth, context: GradingContext
) -> None:
    assert len(tasks) == 127
    for task in tasks:
        result = grade(task, truth.tasks[task.id], gold_answer(task, truth.tasks[task.id]), context)
        grades = by_dimension(result)
        assert grades.pop("reasoning_utility") == "abstain", task.id
        assert ("answer_verdict" in grades) == (task.kind == "verdict"), task.id
        assert set(grades.values()) == {"correct"}, (task.id, [v for v in result.votes if v.grade != "correct"])
        assert result.entities.recall in (1.0, None) and result.entities.precision in (1.0, None)
        assert result.replay is not None and result.replay.declared_ok()
        assert result.coverage is not None and result.coverage.table_recall == 1.0


def test_every_empty_answer_is_incorrect(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    for task in tasks:
        grades = by_dimension(grade(task, truth.tasks[task.id], Answer(response=""), context))
        assert grades["answer_correctness"] == "incorrect", task.id
        assert grades["sql_semantic_appropriateness"] == "incorrect", task.id
        if truth.tasks[task.id].entities:
            assert grades["evidence_completeness"] == grades["contextual_evidence_relevancy"] == "incorrect"


def _enumeration_with_entities(tasks: list[Task], truth: GroundTruth, at_least: int) -> Task:
    return next(t for t in tasks if t.kind == "enumeration" and len(truth.tasks[t.id].entities) >= at_least)


def test_half_the_findings_is_partial(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = _enumeration_with_entities(tasks, truth, 4)
    gold = gold_answer(task, truth.tasks[task.id])
    half = gold.model_copy(update={"evidence": gold.evidence[: (len(gold.evidence) + 1) // 2]})
    grades = by_dimension(grade(task, truth.tasks[task.id], half, context))
    assert grades["answer_correctness"] == grades["evidence_completeness"] == "partial"
    assert grades["contextual_evidence_relevancy"] == "correct"


def test_dumping_everything_is_not_correct(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = _enumeration_with_entities(tasks, truth, 2)
    gold = gold_answer(task, truth.tasks[task.id])
    noise = [
        EvidenceItem(vendor="github", kind="account", identifier=f"noise-{i}") for i in range(5 * len(gold.evidence))
    ]
    grades = by_dimension(
        grade(task, truth.tasks[task.id], gold.model_copy(update={"evidence": gold.evidence + noise}), context)
    )
    assert grades["answer_correctness"] == grades["contextual_evidence_relevancy"] == "incorrect"
    assert grades["evidence_completeness"] == "correct"


def test_a_wrong_verdict_is_incorrect(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = next(t for t in tasks if t.kind == "verdict")
    gold = gold_answer(task, truth.tasks[task.id])
    wrong = gold.model_copy(update={"verdict": "no" if gold.verdict == "yes" else "yes"})
    grades = by_dimension(grade(task, truth.tasks[task.id], wrong, context))
    assert grades["answer_verdict"] == grades["answer_correctness"] == "incorrect"


def test_sql_that_fails_is_incorrect(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = tasks[0]
    gold = gold_answer(task, truth.tasks[task.id])
    broken = gold.model_copy(update={"queries": ["SELECT nope FROM okta_users", "DELETE FROM okta_users"]})
    result = grade(task, truth.tasks[task.id], broken, context)
    assert by_dimension(result)["sql_semantic_appropriateness"] == "incorrect"
    assert result.replay is not None and (result.replay.errors, result.replay.refused) == (1, 1)


@pytest.mark.parametrize("status", ["timeout", "oom", "invalid_answer", "agent_error", "ok"])
def test_a_broken_sample_fails_every_dimension_without_asking_the_judges(
    status: str, tasks: list[Task], truth: GroundTruth, context: GradingContext
) -> None:
    task = next(t for t in tasks if t.kind == "verdict")
    sample = SampleOutput.model_validate({"task_id": task.id, "epoch": 3, "status": status, "error": "killed"})
    result = grade_sample(task, truth.tasks[task.id], sample, [REF, MustNotBeCalled()], 3, context=context)
    assert not result.graded and result.replay is None and result.coverage is None
    assert {v.grade for v in result.votes} == {"incorrect"}
    assert len(result.votes) == 2 * 6
    assert status in str(result.failure)
    assert [c.grade for c in consensus(result.consensus_votes())] == ["incorrect"] * 6


def test_grading_refuses_inconsistent_input(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = tasks[0]
    sample = SampleOutput(task_id=task.id, epoch=1, status="ok", answer=Answer(response="x"))
    with pytest.raises(GradingError, match="distinct"):
        grade_sample(task, truth.tasks[task.id], sample, [REF, ReferenceJudge()], 1, context=context)
    with pytest.raises(GradingError, match="epoch"):
        grade_sample(task, truth.tasks[task.id], sample, [REF], 2, context=context)
    with pytest.raises(GradingError, match="do not agree"):
        grade_sample(tasks[1], truth.tasks[task.id], sample, [REF], 1, context=context)


def test_two_reference_slots_feed_consensus(tasks: list[Task], truth: GroundTruth, context: GradingContext) -> None:
    task = tasks[0]
    judges = [ReferenceJudge("ref"), ReferenceJudge("ref-b", rubrics=context.rubrics)]
    sample = SampleOutput(task_id=task.id, epoch=1, status="ok", answer=gold_answer(task, truth.tasks[task.id]))
    result = grade_sample(task, truth.tasks[task.id], sample, judges, 1, context=context)
    assert result.rubric_set_digest == context.rubrics.digest
    assert {v.rubric_sha256 for v in result.votes if v.judge == "ref-b"} == {
        r.sha256 for d, r in context.rubrics.rubrics.items() if d != "answer_verdict" or task.kind == "verdict"
    }
    grades = {c.dimension: c.grade for c in consensus(result.consensus_votes())}
    assert grades.pop("reasoning_utility") == "abstain" and set(grades.values()) == {"correct"}


def test_grading_assembles_coverage_exactly_as_the_coverage_module(tasks: list[Task], context: GradingContext) -> None:
    for task in tasks:
        agent = [task.dual_sql, "SELEC nonsense", "SELECT 1; SELECT * FROM okta_users"]
        assert context.coverage(task.witness_sql, agent) == coverage(task.witness_sql, agent, context.schema), task.id
    with pytest.raises(CoverageError):
        context.coverage("SELEC broken", [])
