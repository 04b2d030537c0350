r"""Ranking many methods over several settings: average ranks, Friedman's test and Nemenyi's critical difference.

Following Demšar (2006), "Statistical Comparisons of Classifiers over Multiple Data Sets", *Journal of
Machine Learning Research* 7, 1–30. The input is a benchmark table ``scores`` with one row per setting
(data set, partition, ...) :math:`i = 1, \dots, N` and one column per method :math:`j = 1, \dots, k`,
**higher is better**. Every method must have a score in every setting: a missing cell is refused, not
skipped, because a method's rank only means something against the same settings as the others'.

**Ranks.** Within setting :math:`i` the methods are ranked, :math:`r_i^j = 1` for the best; tied
methods share the average of the ranks they span (:func:`ranks`). Scores equal to :data:`TIE_DECIMALS`
decimals tie: two means of the same numbers summed in another order differ in their last bits, and
ranking on those bits would break a real tie by floating-point noise. The average rank of method :math:`j`
is :math:`R_j = \frac1N \sum_i r_i^j` (:func:`average_ranks`).

**Friedman's test** (:func:`friedman`) of the null hypothesis that all methods are equivalent (so every
:math:`R_j` equals :math:`(k+1)/2`):

.. math::

    \chi^2_F = \frac{12 N}{k (k+1)} \left[ \sum_j R_j^2 - \frac{k (k+1)^2}{4} \right],

asymptotically :math:`\chi^2` with :math:`k - 1` degrees of freedom. The statistic is
:func:`scipy.stats.friedmanchisquare`'s, which divides :math:`\chi^2_F` by the tie correction
:math:`1 - \sum_{i} \sum_{t} (t^3 - t) / (N k (k^2 - 1))` (:math:`t` the sizes of the groups of tied
scores of setting :math:`i`); without ties it is Demšar's equation exactly, with ties slightly larger.

**Nemenyi's post-hoc test** (:func:`nemenyi_critical_difference`): two methods perform significantly
differently at level :math:`\alpha` when their average ranks differ by at least the critical difference

.. math::

    \mathrm{CD} = q_\alpha \sqrt{\frac{k (k+1)}{6 N}}, \qquad
    q_\alpha = \frac{q_{1-\alpha}(k, \infty)}{\sqrt 2},

with :math:`q_{1-\alpha}(k, \infty)` the :math:`1-\alpha` quantile of the studentized range of :math:`k`
means with infinite degrees of freedom (:func:`nemenyi_q`; Demšar's Table 5 lists :math:`q_{0.05} =
1.960, 2.343, 2.569, \dots` for :math:`k = 2, 3, 4, \dots`). In a critical-difference diagram the methods
whose average ranks all lie within CD of each other are joined by a bar (:func:`cd_groups`,
:func:`gflkit.plots.critical_difference_diagram`).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pandas as pd
from scipy import stats


#: Scores are compared to this many decimals (see the module docstring on ties).
TIE_DECIMALS = 9


class FriedmanResult(NamedTuple):
    """Friedman's test of a settings × methods table: :math:`\\chi^2_F` (tie-corrected), its p-value under
    :math:`\\chi^2_{k-1}`, the number of settings ``n`` and of methods ``k``."""

    statistic: float
    pvalue: float
    n: int
    k: int


def _validated(scores: pd.DataFrame) -> np.ndarray:
    """``scores`` as a float (N, k) array rounded to :data:`TIE_DECIMALS` decimals, refusing an empty table,
    non-numeric cells and missing scores."""
    if not isinstance(scores, pd.DataFrame):
        raise TypeError(f"scores must be a settings × methods DataFrame, got {type(scores).__name__}")
    if scores.shape[0] == 0 or scores.shape[1] == 0:
        raise ValueError(f"scores must have at least one setting and one method, got shape {scores.shape}")
    if scores.columns.has_duplicates:
        duplicated = sorted(map(str, scores.columns[scores.columns.duplicated()]))
        raise ValueError(f"scores has duplicate methods: {duplicated}")
    try:
        values = scores.to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"scores must be numeric: {error}") from None
    missing = np.argwhere(np.isnan(values))
    if len(missing):
        cells = [f"({scores.index[i]!r}, {scores.columns[j]!r})" for i, j in missing[:10]]
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(
            f"scores has no value for (setting, method) {', '.join(cells)}{more}; "
            "a method must be run in every setting to be ranked (drop the setting or the method)"
        )
    if np.isinf(values).any():
        i, j = np.argwhere(np.isinf(values))[0]
        raise ValueError(
            f"scores has an infinite value for (setting, method) ({scores.index[i]!r}, {scores.columns[j]!r})"
        )
    return np.round(values, TIE_DECIMALS)


def ranks(scores: pd.DataFrame) -> pd.DataFrame:
    """The rank of each method within each setting: same index and columns as ``scores``, rank 1 for the
    highest score, tied methods sharing their average rank (``scipy.stats.rankdata(-row, "average")``).

    Raises ``ValueError`` naming the (setting, method) cells without a score.
    """
    values = _validated(scores)
    return pd.DataFrame(stats.rankdata(-values, method="average", axis=1), index=scores.index, columns=scores.columns)


def average_ranks(scores: pd.DataFrame) -> pd.Series:
    """Each method's rank averaged over the settings (:math:`R_j`), best (lowest) first.

    ``scores``: settings × methods, higher is better, no missing values. Methods with equal average ranks
    keep their column order.
    """
    mean = ranks(scores).mean(axis=0)
    mean.name = "average rank"
    return mean.sort_values(kind="stable")


def friedman(scores: pd.DataFrame) -> FriedmanResult:
    """Friedman's test that all methods (the columns of ``scores``) perform alike over the settings (rows).

    The statistic and p-value are :func:`scipy.stats.friedmanchisquare` over the methods' columns
    (tie-corrected :math:`\\chi^2_F`, see the module docstring). Needs ``k ≥ 3`` methods and ``N ≥ 2``
    settings, no missing scores, and at least one setting where not all methods tie.
    """
    values = _validated(scores)
    n, k = values.shape
    if k < 3:
        raise ValueError(
            f"Friedman's test needs at least 3 methods (columns), got {k}; compare two methods with a paired test"
        )
    if n < 2:
        raise ValueError(f"Friedman's test needs at least 2 settings (rows), got {n}")
    if all(np.all(row == row[0]) for row in values):
        raise ValueError("every setting ties all methods; Friedman's statistic is undefined")
    result = stats.friedmanchisquare(*values.T)
    return FriedmanResult(float(result.statistic), float(result.pvalue), n, k)


def _check_alpha(alpha: float) -> None:
    if not (isinstance(alpha, (int, float)) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")


def _check_count(name: str, value: int, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")


def nemenyi_q(k: int, alpha: float = 0.05) -> float:
    """Nemenyi's :math:`q_\\alpha` for ``k`` methods: the studentized range's :math:`1-\\alpha` quantile
    (``k`` means, infinite degrees of freedom) divided by :math:`\\sqrt 2` (Demšar's Table 5)."""
    _check_count("k", k, 2)
    _check_alpha(alpha)
    return float(stats.studentized_range.ppf(1.0 - alpha, int(k), np.inf) / math.sqrt(2.0))


def nemenyi_critical_difference(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi's critical difference :math:`\\mathrm{CD} = q_\\alpha \\sqrt{k(k+1)/(6N)}` for ``k`` methods
    ranked over ``n`` settings: two average ranks differing by at least CD differ significantly at level
    ``alpha``. Needs ``k ≥ 2``, ``n ≥ 1`` and ``0 < alpha < 1``.
    """
    _check_count("k", k, 2)
    _check_count("n", n, 1)
    return nemenyi_q(k, alpha) * math.sqrt(k * (k + 1) / (6.0 * n))


def cd_groups(average_ranks: pd.Series, cd: float) -> list[tuple[str, ...]]:
    """The groups of methods not significantly different from each other: the bars of a CD diagram.

    The methods are taken in order of average rank (``average_ranks``, indexed by method; ties keep their
    order); from each method, the group runs to the last method whose average rank is less than ``cd``
    above its own. Groups contained in another (the runs that end where the previous one ends) and
    single methods are dropped, so the result lists the maximal groups, best first, each in rank order.
    """
    if not isinstance(average_ranks, pd.Series):
        raise TypeError(f"average_ranks must be a Series indexed by method, got {type(average_ranks).__name__}")
    if not (isinstance(cd, (int, float, np.floating)) and math.isfinite(cd) and cd > 0):
        raise ValueError(f"cd must be a positive finite number, got {cd!r}")
    ordered = average_ranks.astype(np.float64).sort_values(kind="stable")
    if ordered.isna().any() or np.isinf(ordered.to_numpy()).any():
        raise ValueError(f"average_ranks must be finite, got {average_ranks.to_dict()}")
    names = [str(name) for name in ordered.index]
    values = ordered.to_numpy()
    groups: list[tuple[str, ...]] = []
    previous_end = -1
    for start in range(len(values)):
        end = start
        while end + 1 < len(values) and values[end + 1] - values[start] < cd:
            end += 1
        if end > previous_end and end > start:
            groups.append(tuple(names[start:end + 1]))
        previous_end = max(previous_end, end)
    return groups


def separated_pairs(average_ranks: pd.Series, cd: float) -> list[tuple[str, str]]:
    """The pairs of methods whose average ranks differ by at least the critical difference ``cd`` (Nemenyi:
    significantly different), the better-ranked method first, in rank order."""
    ordered = average_ranks.astype(np.float64).sort_values(kind="stable")
    names, values = [str(n) for n in ordered.index], ordered.to_numpy()
    return [(names[i], names[j]) for i in range(len(names)) for j in range(i + 1, len(names))
            if values[j] - values[i] >= cd]


__all__ = [
    "FriedmanResult",
    "average_ranks",
    "cd_groups",
    "friedman",
    "nemenyi_critical_difference",
    "nemenyi_q",
    "ranks",
    "separated_pairs",
]
