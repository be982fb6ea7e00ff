"""``ispm_consensus``: the v1 consensus across epochs as an Inspect epoch reducer.

Each epoch's score holds, per dimension, that epoch's consensus across the judges (the lower non-abstaining
grade, :mod:`.scorer`) as its score (1.0, 0.5, 0.0), or ``None`` where every judge abstained. The reducer takes
the mode of the scored epochs, a tie going to the lower grade, with :func:`runner.grading.consensus.task_consensus`
itself; a dimension no epoch scored stays ``None`` (abstained), never 0. Inspect's own ``mode`` reducer takes
the first value seen in a tie, so its result depends on the order of the epochs.
"""

from __future__ import annotations

from collections.abc import Mapping

from inspect_ai.scorer import Score, ScoreReducer, score_reducer

from runner.grading.consensus import task_consensus
from runner.grading.grades import ABSTAIN, SCORES, Grade
from runner.inspect_names import REDUCER, qualified

REDUCER_NAME = qualified(REDUCER)
_GRADES: dict[float, Grade] = {value: grade for grade, value in SCORES.items()}


def grade_of(value: object) -> Grade:
    """The grade a dimension's score stands for: ``None`` is ``abstain``.

    Raises:
        ValueError: a value that is no grade's score.
    """
    if value is None:
        return ABSTAIN
    if isinstance(value, int | float) and not isinstance(value, bool) and float(value) in _GRADES:
        return _GRADES[float(value)]
    raise ValueError(f"{value!r} is not the score of a grade (1.0, 0.5, 0.0) or None (abstained)")


def consensus_of(epochs: list[Mapping[str, object]]) -> dict[str, Grade]:
    """Each dimension's consensus across the epochs' values (dimension -> score or ``None``).

    Raises:
        ValueError: a value that is no grade's score.
    """
    grades: dict[str, list[Grade]] = {}
    for value in epochs:
        for dimension, score in value.items():
            grades.setdefault(dimension, []).append(grade_of(score))
    return {dimension: task_consensus(found) for dimension, found in grades.items()}


@score_reducer(name=REDUCER_NAME)
def ispm_consensus() -> ScoreReducer:
    """The v1 consensus across epochs: the modal scored grade per dimension, ties going down."""

    def reduce(scores: list[Score]) -> Score:
        values: list[Mapping[str, object]] = []
        for score in scores:
            if not isinstance(score.value, Mapping):
                raise ValueError(f"ispm_consensus reduces ispm_scorer's scores, not {score.value!r}")
            values.append(score.value)
        consensus = consensus_of(values)
        return Score(
            value={dimension: SCORES.get(grade) for dimension, grade in consensus.items()},
            explanation="; ".join(f"{d}: {g}" for d, g in consensus.items()),
            metadata={
                "consensus": consensus,
                "epochs": [{d: grade_of(v) for d, v in value.items()} for value in values],
            },
        )

    return reduce
