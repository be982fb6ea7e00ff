"""The offline reference judge ``ref``: deterministic grades from the entity, verdict, replay and coverage checks.

It fills either judge slot, for offline runs and tests; it never calls a model. Its rules, with
``r`` the entity recall, ``p`` the precision and "verdict right" the parsed verdict matching the
truth (verdict tasks only):

``answer_correctness``
    Verdict tasks: a wrong or missing verdict is ``incorrect``. With the verdict right, a truth
    without entities is ``correct``; otherwise ``correct`` when the entities meet the bar below,
    else ``partial`` (the primary call is right, the findings are not).
    Enumeration tasks: ``correct`` when r = 1 and p ≥ 0.8; ``partial`` when r ≥ 0.5 and p ≥ 0.5
    (listing everything queried is not a materially correct finding); else ``incorrect``.
``answer_verdict``
    Verdict tasks only: ``correct`` when the verdict is right, else ``incorrect``.
``evidence_completeness``
    From recall: r = 1 ``correct``, r ≥ 0.5 ``partial``, else ``incorrect``. A truth without
    entities has nothing to cover: ``correct`` when the verdict is right, else ``incorrect``.
``contextual_evidence_relevancy``
    From precision: p ≥ 0.8 ``correct``, p ≥ 0.5 ``partial``, else ``incorrect``. No evidence is
    ``incorrect`` when the truth has entities and ``correct`` when it has none. Evidence against
    a truth without entities cannot be told apart from supporting context here: ``abstain``.
``sql_semantic_appropriateness``
    ``correct`` when at least one query executes, every declared query executes, and the table
    recall of the witness is 1; ``partial`` when at least one query executes and table recall
    ≥ 0.5; else ``incorrect`` (no SQL, nothing executes, or the wrong tables). ``abstain`` when
    coverage could not be measured, which is the harness's fault, not the agent's.
``reasoning_utility``
    Always ``abstain``: auditability of prose is not decidable from these checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from runner.contract import Answer, EvidenceItem
from runner.grading.grades import Dimension, Grade
from runner.grading.judge import JudgeInput, JudgeVote, dimensions_for
from runner.grading.rubric import RubricSet
from runner.grading.slots import REFERENCE_ALIAS
from runner.tasks.model import Task
from runner.tasks.truth import TaskTruth

RECALL_FULL: Final = 1.0
PRECISION_CORRECT: Final = 0.8
RECALL_PARTIAL: Final = 0.5
PRECISION_PARTIAL: Final = 0.5
TABLE_RECALL_PARTIAL: Final = 0.5


def gold_answer(task: Task, truth: TaskTruth) -> Answer:
    """The answer a perfect agent would give: the truth's verdict and entities, and the witness SQL.

    SWE-bench validates its harness with gold patches; this is ours: every gold answer must get
    ``correct`` from ``ref`` on every dimension it does not abstain on.
    """
    evidence = [
        EvidenceItem.model_validate({"vendor": e.vendor, "kind": e.type, "identifier": e.identifier})
        for e in truth.entities
    ]
    call = f"{truth.verdict.capitalize()}. " if truth.verdict else ""
    return Answer(
        response=f"{call}The witness query returns {truth.row_count} row(s); the findings are listed as evidence.",
        verdict=truth.verdict,
        evidence=evidence,
        queries=[task.witness_sql],
    )


class ReferenceJudge:
    """The deterministic judge ``ref``. Pure: the same input always gives the same votes."""

    def __init__(self, alias: str = REFERENCE_ALIAS, rubrics: RubricSet | None = None) -> None:
        """``alias`` names the slot in votes; ``rubrics``, when given, stamps each vote with its rubric hash."""
        self.alias = alias
        self.requested_model: str | None = None
        self.rubrics = rubrics

    def judge(self, item: JudgeInput) -> list[JudgeVote]:
        """One vote per graded dimension of ``item.task``, each with its figures as the rationale."""
        votes = []
        for dim in dimensions_for(item.task):
            grade, why = _RULES[dim](item)
            votes.append(JudgeVote.cast(self, item.task.id, item.epoch, dim, grade, why, rubrics=self.rubrics))
        return votes


Rule = tuple[Grade, str]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _figures(item: JudgeInput) -> str:
    e = item.entities
    return f"recall {_fmt(e.recall)} ({len(e.matched)}/{e.truth_count}), precision {_fmt(e.precision)}"


def _entity_grade(recall: float | None, precision: float | None) -> Grade:
    r, p = recall or 0.0, precision or 0.0
    if r >= RECALL_FULL and p >= PRECISION_CORRECT:
        return "correct"
    if r >= RECALL_PARTIAL and p >= PRECISION_PARTIAL:
        return "partial"
    return "incorrect"


def _verdict_text(item: JudgeInput) -> str:
    v = item.verdict
    return f"verdict {v.verdict or 'none'} (expected {v.expected})"


def _correctness(item: JudgeInput) -> Rule:
    e = item.entities
    if item.task.kind == "verdict":
        if not item.verdict.correct:
            return "incorrect", f"{_verdict_text(item)}: the primary call is wrong or missing"
        if e.truth_count == 0:
            return "correct", f"{_verdict_text(item)}; the truth names no entities"
        grade = _entity_grade(e.recall, e.precision)
        return ("correct" if grade == "correct" else "partial"), f"{_verdict_text(item)}; {_figures(item)}"
    return _entity_grade(e.recall, e.precision), _figures(item)


def _verdict(item: JudgeInput) -> Rule:
    return ("correct" if item.verdict.correct else "incorrect"), _verdict_text(item)


def _completeness(item: JudgeInput) -> Rule:
    e = item.entities
    if e.recall is None:
        ok = item.task.kind == "verdict" and bool(item.verdict.correct)
        return ("correct" if ok else "incorrect"), f"the truth names no entities; {_verdict_text(item)}"
    grade: Grade = "correct" if e.recall >= RECALL_FULL else "partial" if e.recall >= RECALL_PARTIAL else "incorrect"
    return grade, _figures(item)


def _relevancy(item: JudgeInput) -> Rule:
    e = item.entities
    if e.precision is None:
        if e.truth_count:
            return "incorrect", "no evidence is cited although the truth names entities"
        return "correct", "no evidence cited and none expected"
    if e.truth_count == 0:
        return "abstain", f"{e.evidence_count} item(s) cited against a truth without entities: cannot tell context"
    p = e.precision
    grade: Grade = "correct" if p >= PRECISION_CORRECT else "partial" if p >= PRECISION_PARTIAL else "incorrect"
    return grade, _figures(item)


def _reasoning(item: JudgeInput) -> Rule:
    return "abstain", "the reference judge does not grade reasoning utility"


def _sql(item: JudgeInput) -> Rule:
    replay, cov = item.replay, item.coverage
    if cov is None:
        return "abstain", "structural coverage is unavailable (the witness could not be analysed)"
    recall = cov.table_recall
    # A witness that reads no table leaves nothing to recall: count it as full.
    tables = 1.0 if recall is None else recall
    declared = [q for q in replay.queries if "declared" in q.sources]
    declared_ok = all(q.status == "ok" for q in declared)
    why = (
        f"{replay.ok}/{len(replay.queries)} distinct queries execute "
        f"({sum(q.status == 'ok' for q in declared)}/{len(declared)} declared); table recall {_fmt(recall)}"
    )
    if replay.ok and declared_ok and tables >= RECALL_FULL:
        return "correct", why
    if replay.ok and tables >= TABLE_RECALL_PARTIAL:
        return "partial", why
    return "incorrect", why


_RULES: Final[dict[Dimension, Callable[[JudgeInput], Rule]]] = {
    "answer_correctness": _correctness,
    "answer_verdict": _verdict,
    "evidence_completeness": _completeness,
    "contextual_evidence_relevancy": _relevancy,
    "reasoning_utility": _reasoning,
    "sql_semantic_appropriateness": _sql,
}
