"""The reliability statistics of the run record: hand-computed tables, a textbook alpha, and properties."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice, permutations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.grading.grades import Grade, Vote
from runner.record import stats
from runner.record.build import _reliability
from runner.record.model import TaskResult
from runner.sample_key import SampleKey

# -- per-task agreement across epochs ----------------------------------------------------------------------

AGREEMENT: list[tuple[dict[int, Grade], Grade, float | None]] = [
    ({1: "correct", 2: "correct", 3: "correct"}, "correct", 1.0),
    ({1: "correct", 2: "partial", 3: "correct", 4: "incorrect", 5: "correct"}, "correct", 0.6),
    ({1: "correct", 2: "partial"}, "partial", 0.5),  # a tie resolved downward: half the epochs agree
    ({1: "abstain", 2: "partial", 3: "partial"}, "partial", 1.0),  # abstaining epochs are not disagreement
    ({1: "abstain", 2: "abstain"}, "abstain", None),
    ({}, "abstain", None),
]


@pytest.mark.parametrize(("epochs", "grade", "expected"), AGREEMENT)
def test_task_agreement(epochs: dict[int, Grade], grade: Grade, expected: float | None) -> None:
    assert stats.task_agreement(epochs, grade) == expected


def test_mean_agreement_averages_over_the_tasks_where_it_is_defined() -> None:
    tasks = [(e, g) for e, g, _ in AGREEMENT]
    assert stats.mean_agreement(tasks) == pytest.approx((1.0 + 0.6 + 0.5 + 1.0) / 4)
    assert stats.mean_agreement([]) is None


# -- Krippendorff's alpha, ordinal -------------------------------------------------------------------------


def _alpha_brute_force(unit_values: Sequence[Sequence[int]], categories: int) -> float | None:
    """Alpha from its pairable-values definition, without a coincidence matrix: ``1 - D_o / D_e`` with
    ``D_o = (1/n) sum_u 1/(m_u - 1) sum_{i != j in u} d(v_i, v_j)`` and
    ``D_e = 1/(n (n - 1)) sum_{i != j over all pairable values} d(v_i, v_j)``."""
    pairable = [list(u) for u in unit_values if len(u) >= 2]
    pooled = [v for u in pairable for v in u]
    n = len(pooled)
    if len(pairable) < 2:
        return None
    freq = [pooled.count(c) for c in range(categories)]

    def d(a: int, b: int) -> float:
        lo, hi = min(a, b), max(a, b)
        return float((sum(freq[lo : hi + 1]) - (freq[lo] + freq[hi]) / 2) ** 2)

    d_o = (
        sum(sum(d(a, b) for i, a in enumerate(u) for j, b in enumerate(u) if i != j) / (len(u) - 1) for u in pairable)
        / n
    )
    d_e = sum(d(a, b) for i, a in enumerate(pooled) for j, b in enumerate(pooled) if i != j) / (n * (n - 1))
    return None if d_e == 0 else 1 - d_o / d_e


# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4 observers x 12 units example with
# missing values; the paper gives alpha_ordinal = 0.815. Values 1..5 become ranks 0..4.
TEXTBOOK = [
    [1, 1, None, 1],
    [2, 2, 3, 2],
    [3, 3, 3, 3],
    [3, 3, 3, 3],
    [2, 2, 2, 2],
    [1, 2, 3, 4],
    [4, 4, 4, 4],
    [1, 1, 2, 1],
    [2, 2, 2, 2],
    [None, 5, 5, 5],
    [None, None, 1, 1],
    [None, 3, None, None],
]


def test_alpha_reproduces_krippendorffs_textbook_example() -> None:
    units = [[v - 1 for v in u if v is not None] for u in TEXTBOOK]
    alpha = stats.krippendorff_alpha_ordinal(units, categories=5)
    assert alpha is not None and round(alpha, 3) == 0.815
    assert alpha == pytest.approx(_alpha_brute_force(units, 5))


ALPHA: list[tuple[list[list[int]], float | None]] = [
    # By hand: n = (3, 3, 2), o_01 = o_10 = 1, delta2(0,1) = 9, delta2(1,2) = 6.25, delta2(0,2) = 30.25;
    # observed 18, expected 2 * (81 + 37.5 + 181.5) = 600, alpha = 1 - 7 * 18 / 600.
    ([[0, 0], [1, 1], [2, 2], [0, 1]], 0.79),
    ([[0, 0], [2, 2], [1, 1]], 1.0),
    # Two units in full opposition: o_02 = o_20 = 2, n = (2, 0, 2), delta2(0,2) = (4 - 2)^2 = 4;
    # observed 2 * 4 + 2 * 4 = 16, expected 2 * (2 * 2 * 4) = 32, alpha = 1 - 3 * 16 / 32.
    ([[0, 2], [2, 0]], -0.5),
    ([[0, 2]], None),  # one pairable unit
    ([[1, 1], [1, 1], [1]], None),  # no expected disagreement
    ([[0], [2], [1]], None),  # nothing pairable
]


@pytest.mark.parametrize(("units", "expected"), ALPHA)
def test_alpha_table(units: list[list[int]], expected: float | None) -> None:
    alpha = stats.krippendorff_alpha_ordinal(units)
    assert alpha == (None if expected is None else pytest.approx(expected))
    assert alpha == (None if expected is None else pytest.approx(_alpha_brute_force(units, 3)))


# -- quadratic-weighted kappa ------------------------------------------------------------------------------

KAPPA: list[tuple[list[tuple[int, int]], float | None]] = [
    ([(0, 0), (1, 1), (2, 2)], 1.0),  # perfect agreement
    ([(0, 2), (2, 0)], -1.0),  # systematic opposition
    ([(0, 2), (2, 0), (1, 1)], -1.0),
    # By hand: O has 1/4 on (0,0), (1,1), (2,2), (0,1); rows (.5, .25, .25), columns (.25, .5, .25);
    # observed 1/4 * 1/4 = .0625, expected .3125, kappa = 1 - .2.
    ([(0, 0), (1, 1), (2, 2), (0, 1)], 0.8),
    ([(1, 1)], None),  # one pair
    ([(2, 2), (2, 2)], None),  # no expected disagreement
]


@pytest.mark.parametrize(("pairs", "expected"), KAPPA)
def test_kappa_table(pairs: list[tuple[int, int]], expected: float | None) -> None:
    kappa = stats.quadratic_kappa(pairs)
    assert kappa == (None if expected is None else pytest.approx(expected))


def _kappa_as_correlation(pairs: Sequence[tuple[int, int]]) -> float:
    """The identity ``kappa_quadratic = 2 cov(a, b) / (var a + var b + (mean a - mean b) ** 2)``."""
    n = len(pairs)
    ma = sum(a for a, _ in pairs) / n
    mb = sum(b for _, b in pairs) / n
    cov = sum((a - ma) * (b - mb) for a, b in pairs) / n
    va = sum((a - ma) ** 2 for a, _ in pairs) / n
    vb = sum((b - mb) ** 2 for _, b in pairs) / n
    return 2 * cov / (va + vb + (ma - mb) ** 2)


ranks = st.integers(min_value=0, max_value=2)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ranks, ranks), max_size=40))
def test_kappa_is_bounded_and_matches_its_correlation_form(pairs: list[tuple[int, int]]) -> None:
    kappa = stats.quadratic_kappa(pairs)
    if kappa is not None:
        assert -1 - 1e-9 <= kappa <= 1 + 1e-9
        assert kappa == pytest.approx(_kappa_as_correlation(pairs))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(ranks, min_size=1, max_size=3), max_size=30))
def test_alpha_is_bounded_and_matches_the_brute_force(units: list[list[int]]) -> None:
    alpha = stats.krippendorff_alpha_ordinal(units)
    expected = _alpha_brute_force(units, 3)
    assert (alpha is None) == (expected is None)
    if alpha is not None:
        assert -1 - 1e-9 <= alpha <= 1 + 1e-9
        assert alpha == pytest.approx(expected)


def test_judge_pairs_order_judges_by_name_and_drop_abstentions() -> None:
    votes = [
        Vote(task_id="t1", epoch=1, judge="zeta", dimension="answer_correctness", grade="correct"),
        Vote(task_id="t1", epoch=1, judge="alpha", dimension="answer_correctness", grade="incorrect"),
        Vote(task_id="t1", epoch=2, judge="zeta", dimension="answer_correctness", grade="partial"),
        Vote(task_id="t1", epoch=2, judge="alpha", dimension="answer_correctness", grade="abstain"),
    ]
    grouped = stats.units(votes)
    assert grouped == {
        SampleKey(task_id="t1", epoch=1): {"zeta": 2, "alpha": 0},
        SampleKey(task_id="t1", epoch=2): {"zeta": 1},
    }
    assert stats.judge_pairs(grouped) == [(0, 2)]


# -- bootstrap CIs -----------------------------------------------------------------------------------------


def test_bootstrap_of_two_opposite_tasks_spans_the_scale() -> None:
    # Each draw's mean is 0, .5 or 1 with chance 1/4, 1/2, 1/4: both 2.5% tails sit on the extremes.
    assert stats.bootstrap_ci([0.0, 1.0]) == (0.0, 1.0)


def test_bootstrap_is_deterministic_and_skips_tasks_without_a_value() -> None:
    values: list[float | None] = [1.0, 0.5, None, 0.0, 1.0, 1.0, None, 0.5]
    assert stats.bootstrap_ci(values) == stats.bootstrap_ci(values)
    assert stats.bootstrap_ci([None, None]) is None
    assert stats.bootstrap_ci([]) is None
    both = stats.bootstrap_cis({"a": values, "b": values})
    assert both["a"] == both["b"] == stats.bootstrap_ci(values)


def test_bootstrap_columns_must_have_one_value_per_task() -> None:
    with pytest.raises(ValueError):
        stats.bootstrap_cis({"a": [1.0], "b": [1.0, 0.0]})


scores = st.sampled_from([0.0, 0.5, 1.0])


@settings(max_examples=50, deadline=None)
@given(st.lists(scores, min_size=1, max_size=30))
def test_bootstrap_ci_contains_the_point_estimate(values: list[float]) -> None:
    ci = stats.bootstrap_ci(values, resamples=400)
    mean = sum(values) / len(values)
    assert ci is not None and ci[0] - 1e-12 <= mean <= ci[1] + 1e-12


@settings(max_examples=30, deadline=None)
@given(scores, st.integers(min_value=1, max_value=30))
def test_identical_tasks_give_a_zero_width_ci(value: float, count: int) -> None:
    assert stats.bootstrap_ci([value] * count, resamples=200) == (value, value)


# -- abstention --------------------------------------------------------------------------------------------


def test_abstention_rate() -> None:
    assert stats.abstention_rate(["abstain", "correct", "abstain", "partial"]) == 0.5
    assert stats.abstention_rate([]) is None


# -- the record's reliability part -------------------------------------------------------------------------


def _row(task_id: str, epochs: dict[int, Grade], grade: Grade) -> TaskResult:
    return TaskResult(
        task_id=task_id,
        kind="enumeration",
        category="c",
        vendors=["okta"],
        hops=1,
        grades={"answer_correctness": grade},
        epochs={"answer_correctness": epochs},
        strict_success=grade == "correct",
    )


def test_the_record_reliability_part_is_assembled_from_rows_and_votes() -> None:
    rows = [_row("t1", {1: "correct", 2: "partial"}, "partial"), _row("t2", {1: "correct", 2: "correct"}, "correct")]
    grades: dict[tuple[str, int], tuple[Grade, Grade]] = {
        ("t1", 1): ("correct", "correct"),
        ("t1", 2): ("partial", "correct"),
        ("t2", 1): ("correct", "abstain"),
        ("t2", 2): ("correct", "correct"),
    }
    votes = [
        Vote(task_id=t, epoch=e, judge=j, dimension="answer_correctness", grade=g)
        for (t, e), pair in grades.items()
        for j, g in zip(("a", "b"), pair, strict=True)
    ]
    rel = _reliability(rows, votes, votes)
    assert rel.agreement == {"answer_correctness": 0.75}
    assert rel.inter_judge["answer_correctness"].pairs == 3
    assert stats.abstention_rate(v.grade for v in votes) == 0.125
    assert rel.abstention_by_judge == {"a": 0.0, "b": 0.25}
    assert rel.ci["answer_correctness"] == stats.bootstrap_ci([0.5, 1.0])
    assert rel.strict_success_ci == stats.bootstrap_ci([0.0, 1.0])
    # The part does not depend on the order the votes arrive in.
    assert all(_reliability(rows, list(p), list(p)) == rel for p in islice(permutations(votes), 50))
    # Votes of samples no judge graded (broken samples) stay out of the inter-judge statistics only.
    only_t2 = [v for v in votes if v.task_id == "t2"]
    partial = _reliability(rows, votes, only_t2)
    assert partial.inter_judge["answer_correctness"].pairs == 1
    assert partial.abstention_by_judge == rel.abstention_by_judge and partial.ci == rel.ci
