"""Reliability and consistency statistics of a run (docs/scoring.md, section 4), as pure functions.

Grades enter as ranks on the ordinal scale ``incorrect`` (0) < ``partial`` (1) < ``correct`` (2); ``abstain`` is
not a grade, so it never enters an agreement statistic and is counted by :func:`abstention_rate` instead.
Nothing here reads a file, a clock or global randomness: the bootstrap draws from its own seeded generator, so a
record rebuilt from the journal carries the same numbers as the one written at the end of the run.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from runner.grading.grades import ABSTAIN, SCALE, Grade, Vote, rank
from runner.sample_key import SampleKey

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20260701
CI_LEVEL = 0.95
_K = len(SCALE)


def task_agreement(epochs: Mapping[int, Grade], grade: Grade) -> float | None:
    """The share of one task's epochs that agree with its consensus, for one dimension.

    ``agreement = #{e : epoch_consensus(e) == grade} / #{e : epoch_consensus(e) != abstain}``.
    Abstaining epochs are left out of the denominator (they are counted as abstentions, not as disagreement).
    ``None`` when the consensus ``grade`` abstained or no epoch has a real grade.
    """
    real = [g for g in epochs.values() if g != ABSTAIN]
    if grade == ABSTAIN or not real:
        return None
    return sum(g == grade for g in real) / len(real)


def mean_agreement(tasks: Iterable[tuple[Mapping[int, Grade], Grade]]) -> float | None:
    """The mean of :func:`task_agreement` over the tasks where it is defined; ``None`` if it is nowhere defined.

    Each item is one task's ``(epoch grades, consensus grade)`` for one dimension.
    """
    values = [a for a in (task_agreement(e, g) for e, g in tasks) if a is not None]
    return sum(values) / len(values) if values else None


def units(votes: Iterable[Vote]) -> dict[SampleKey, dict[str, int]]:
    """The votes of ONE dimension grouped into units of agreement: ``(task, epoch) -> {judge: rank}``.

    Abstentions are dropped here because they have no rank; callers that want them count them with
    :func:`abstention_rate`.
    """
    out: dict[SampleKey, dict[str, int]] = defaultdict(dict)
    for v in votes:
        if v.grade != ABSTAIN:
            out[SampleKey(task_id=v.task_id, epoch=v.epoch)][v.judge] = rank(v.grade)
    return dict(out)


def judge_pairs(unit_grades: Mapping[SampleKey, Mapping[str, int]]) -> list[tuple[int, int]]:
    """Every pair of two different judges' ranks within one unit, the judge named first alphabetically first.

    With the two judge slots of v1 this is one pair per (task, epoch) where both judges gave a real grade.
    """
    pairs = []
    for grades in unit_grades.values():
        names = sorted(grades)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                pairs.append((grades[a], grades[b]))
    return pairs


def _ordinal_delta2(c: int, k: int, n: Sequence[float]) -> float:
    # Krippendorff's ordinal metric: the distance between two ranks is the mass of values between them,
    # counting each endpoint's own mass half.
    lo, hi = min(c, k), max(c, k)
    return (sum(n[lo : hi + 1]) - (n[lo] + n[hi]) / 2) ** 2


def krippendorff_alpha_ordinal(unit_values: Iterable[Sequence[int]], categories: int = _K) -> float | None:
    """Krippendorff's alpha with the ordinal metric over ranks ``0..categories-1`` (v1's scale: ``0..2``).

    Each item holds one unit's real grades (one per judge). Units with fewer than two values are not pairable
    and are ignored. With the coincidence matrix ``o[c][k] = sum_u (#ordered pairs (c, k) in u) / (m_u - 1)``,
    ``n_c = sum_k o[c][k]``, ``n = sum_c n_c`` and the ordinal distance
    ``delta2(c, k) = (sum_{g=c..k} n_g - (n_c + n_k) / 2) ** 2``::

        alpha = 1 - (n - 1) * sum_{c,k} o[c][k] delta2(c, k) / sum_{c,k} n_c n_k delta2(c, k)

    ``None`` when fewer than two units are pairable or the expected disagreement is zero (every value the same).
    """
    size = categories
    o = [[0.0] * size for _ in range(size)]
    pairable = 0
    for values in unit_values:
        m = len(values)
        if m < 2:
            continue
        pairable += 1
        for i, c in enumerate(values):
            for j, k in enumerate(values):
                if i != j:
                    o[c][k] += 1 / (m - 1)
    n_c = [sum(row) for row in o]
    n = sum(n_c)
    if pairable < 2:
        return None
    cells = [(c, k) for c in range(size) for k in range(size)]
    observed = sum(o[c][k] * _ordinal_delta2(c, k, n_c) for c, k in cells)
    expected = sum(n_c[c] * n_c[k] * _ordinal_delta2(c, k, n_c) for c, k in cells)
    if expected == 0:
        return None
    return 1 - (n - 1) * observed / expected


def quadratic_kappa(pairs: Sequence[tuple[int, int]], categories: int = _K) -> float | None:
    """Cohen's kappa with quadratic weights over ranks ``0..categories-1``, for pairs ``(rater A, rater B)``.

    With ``N`` pairs, observed proportions ``O[i][j]``, marginals ``a_i = sum_j O[i][j]``, ``b_j = sum_i O[i][j]``,
    expected ``E[i][j] = a_i b_j`` and weights ``w[i][j] = (i - j) ** 2 / (K - 1) ** 2`` (K = 3 on v1's scale)::

        kappa = 1 - sum_{i,j} w[i][j] O[i][j] / sum_{i,j} w[i][j] E[i][j]

    ``None`` when there are fewer than two pairs or the expected disagreement is zero.
    """
    if len(pairs) < 2:
        return None
    size, total = categories, len(pairs)
    o = [[0.0] * size for _ in range(size)]
    for a, b in pairs:
        o[a][b] += 1 / total
    row = [sum(o[i]) for i in range(size)]
    col = [sum(o[i][j] for i in range(size)) for j in range(size)]
    cells = [(i, j) for i in range(size) for j in range(size)]

    def w(i: int, j: int) -> float:
        return (i - j) ** 2 / (size - 1) ** 2

    observed = sum(w(i, j) * o[i][j] for i, j in cells)
    expected = sum(w(i, j) * row[i] * col[j] for i, j in cells)
    if expected == 0:
        return None
    return 1 - observed / expected


def bootstrap_cis(
    columns: Mapping[str, Sequence[float | None]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> dict[str, tuple[float, float] | None]:
    """Percentile bootstrap CIs of several means that share one set of task resamples.

    Every column holds one value per task, in the same task order (``None`` where the task has no value, e.g. its
    consensus abstained). Each of ``resamples`` draws picks ``T`` task indices with replacement from
    ``random.Random(seed)`` (``T`` = number of tasks); a column's statistic on a draw is the mean of its non-``None``
    values, and a draw with none is skipped for that column. With the ``B`` statistics sorted ascending and
    ``a = (1 - level) / 2``::

        lo = s[floor(a * B)],  hi = s[B - 1 - floor(a * B)]

    (for B = 2000: the 51st and the 1950th). A column with no value at all gets ``None``.
    """
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError("every column needs one value per task")
    count = lengths.pop() if lengths else 0
    rng = random.Random(seed)
    draws = [rng.choices(range(count), k=count) for _ in range(resamples)] if count else []
    out: dict[str, tuple[float, float] | None] = {}
    for name, values in columns.items():
        stats = []
        for draw in draws:
            picked = [x for x in (values[i] for i in draw) if x is not None]
            if picked:
                stats.append(sum(picked) / len(picked))
        out[name] = _percentile_interval(stats, level)
    return out


def bootstrap_ci(
    values: Sequence[float | None],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = CI_LEVEL,
) -> tuple[float, float] | None:
    """The percentile bootstrap CI of one mean over tasks; see :func:`bootstrap_cis` for the formula."""
    return bootstrap_cis({"x": values}, resamples=resamples, seed=seed, level=level)["x"]


def _percentile_interval(stats: list[float], level: float) -> tuple[float, float] | None:
    if not stats:
        return None
    stats.sort()
    # Symmetric indices from one floor, so float noise in (1 - level) cannot move the two tails differently.
    cut = math.floor((1 - level) / 2 * len(stats) + 1e-9)
    return stats[cut], stats[len(stats) - 1 - cut]


def abstention_rate(grades: Iterable[Grade]) -> float | None:
    """``#abstain / #votes`` over raw judge votes; ``None`` when there are no votes."""
    seen = list(grades)
    return sum(g == ABSTAIN for g in seen) / len(seen) if seen else None
