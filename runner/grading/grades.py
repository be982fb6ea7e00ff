"""The grade scale, the judged dimensions and one judge vote, as types.

The scale is ``correct`` (1.0) > ``partial`` (0.5) > ``incorrect`` (0.0). ``abstain`` is what a
judge returns when it could not grade: it is a possible *outcome* but not a grade, so it has no
score and no rank, and the consensus rules never let it win over a real grade.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

Grade = Literal["correct", "partial", "incorrect", "abstain"]
"""What a judge may return for one dimension, and what a consensus may come to."""

ABSTAIN: Final[Grade] = "abstain"

GRADES: Final[tuple[Grade, ...]] = get_args(Grade)

# Lowest first, so that ``rank`` doubles as an index into this tuple.
SCALE: Final[tuple[Grade, ...]] = ("incorrect", "partial", "correct")

SCORES: Final[dict[Grade, float]] = {"incorrect": 0.0, "partial": 0.5, "correct": 1.0}

Dimension = Literal[
    "answer_correctness",
    "answer_verdict",
    "evidence_completeness",
    "contextual_evidence_relevancy",
    "reasoning_utility",
    "sql_semantic_appropriateness",
]
"""The six judged dimensions, in the order docs/scoring.md lists them."""

DIMENSIONS: Final[tuple[Dimension, ...]] = get_args(Dimension)


def rank(grade: Grade) -> int:
    """The position of ``grade`` on the scale, 0 for ``incorrect`` up to 2 for ``correct``.

    Raises:
        ValueError: for ``abstain``, which has no place on the scale.
    """
    if grade == ABSTAIN:
        raise ValueError("abstain is not a grade and has no rank")
    return SCALE.index(grade)


def score(grade: Grade) -> float | None:
    """The numeric score of ``grade``; ``None`` for ``abstain``."""
    return SCORES.get(grade)


class Vote(BaseModel):
    """One judge's grade for one dimension of one task in one epoch."""

    # Strict: a vote file is audit input, so "1" is not an epoch and "Correct" is not a grade.
    # Extra keys (model ids, tokens, latency) are ignored, because they do not change the vote.
    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", use_attribute_docstrings=True)

    task_id: str = Field(min_length=1)
    """The task this vote is about."""
    epoch: int = Field(ge=1)
    """The epoch, counted from 1."""
    judge: str = Field(min_length=1)
    """The judge alias that cast the vote, e.g. ``anthropic/claude-sonnet`` or ``ref``."""
    dimension: Dimension
    """The judged dimension."""
    grade: Grade
    """The grade, or ``abstain`` when the judge could not grade."""
    rationale: str | None = None
    """The judge's stated reason, when it gave one."""
