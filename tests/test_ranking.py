"""Average ranks, Friedman's test, Nemenyi's critical difference and the CD diagram (Demšar 2006)."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from scipy import stats  # noqa: E402

from gflkit import plots  # noqa: E402
from gflkit.papers import ranking  # noqa: E402

#: Demšar (2006), Table 5(a): Nemenyi's q_0.05 for k = 2..10
DEMSAR_Q05 = {2: 1.960, 3: 2.343, 4: 2.569, 5: 2.728, 6: 2.850, 7: 2.949, 8: 3.031, 9: 3.102, 10: 3.164}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def tied_table() -> pd.DataFrame:
    """3 settings × 4 methods; in s2, b and c tie for first."""
    return pd.DataFrame(
        {"a": [0.9, 0.5, 0.6], "b": [0.8, 0.7, 0.9], "c": [0.7, 0.7, 0.5], "d": [0.6, 0.4, 0.8]},
        index=["s1", "s2", "s3"],
    )


def test_ranks_and_average_ranks_by_hand() -> None:
    table = ranking.ranks(tied_table())
    expected = pd.DataFrame(
        {"a": [1.0, 3.0, 3.0], "b": [2.0, 1.5, 1.0], "c": [3.0, 1.5, 4.0], "d": [4.0, 4.0, 2.0]},
        index=["s1", "s2", "s3"],
    )
    pd.testing.assert_frame_equal(table, expected)
    mean = ranking.average_ranks(tied_table())
    assert list(mean.index) == ["b", "a", "c", "d"]
    assert np.allclose(mean.to_numpy(), [4.5 / 3, 7 / 3, 8.5 / 3, 10 / 3])
    # each setting's ranks sum to k(k+1)/2, so the average ranks do too
    assert math.isclose(mean.sum(), 4 * 5 / 2)


def test_means_equal_but_for_their_last_bits_tie() -> None:
    """Two means of the same client scores summed in another order (the benchmark's Local and LG-FedAvg
    at q = 2) must tie, in the ranks and in Friedman's tie correction."""
    noisy = tied_table().assign(d=[0.6, 0.4, 0.9 - 1e-13])  # d equals b in s3 up to summation noise
    assert 0.9 - 1e-13 != 0.9
    assert list(ranking.ranks(noisy).loc["s3"]) == [3.0, 1.5, 4.0, 1.5]
    exact = tied_table().assign(d=[0.6, 0.4, 0.9])
    assert ranking.friedman(noisy).statistic == pytest.approx(ranking.friedman(exact).statistic, rel=1e-12)


def test_friedman_is_scipys_on_the_columns() -> None:
    scores = tied_table()
    result = ranking.friedman(scores)
    expected = stats.friedmanchisquare(*(scores[c] for c in scores.columns))
    assert result.statistic == pytest.approx(expected.statistic, rel=1e-12)
    assert result.pvalue == pytest.approx(expected.pvalue, rel=1e-12)
    assert (result.n, result.k) == (3, 4)


def test_friedman_without_ties_is_demsars_equation() -> None:
    # 4 settings × 3 methods, no ties: ranks (1,2,3), (1,3,2), (2,1,3), (1,2,3) -> R = (5/4, 8/4, 11/4)
    scores = pd.DataFrame({"x": [3.0, 3.0, 2.0, 9.0], "y": [2.0, 1.0, 3.0, 8.0], "z": [1.0, 2.0, 1.0, 7.0]})
    n, k = 4, 3
    r = np.array([5 / 4, 8 / 4, 11 / 4])
    chi2 = 12 * n / (k * (k + 1)) * (np.sum(r**2) - k * (k + 1) ** 2 / 4)
    result = ranking.friedman(scores)
    assert chi2 == pytest.approx(4.5)
    assert result.statistic == pytest.approx(chi2)
    assert result.pvalue == pytest.approx(stats.chi2.sf(chi2, k - 1))


def test_nemenyi_q_matches_demsars_table() -> None:
    for k, q in DEMSAR_Q05.items():
        # Demšar's table is rounded from 3-digit studentized-range tables (k = 7: exact 2.9483, table 2.949)
        assert ranking.nemenyi_q(k) == pytest.approx(q, abs=1e-3), k


def test_critical_difference_demsars_example() -> None:
    # Demšar's Section 3.2.4 example: k = 4 classifiers, N = 14 data sets, CD = 2.569 sqrt(20 / 84) ≈ 1.25
    cd = ranking.nemenyi_critical_difference(4, 14)
    assert cd == pytest.approx(2.569 * math.sqrt(4 * 5 / (6 * 14)), abs=1e-3)
    assert round(cd, 2) == 1.25
    # a stricter level needs a larger difference; more settings a smaller one
    assert ranking.nemenyi_critical_difference(4, 14, alpha=0.01) > cd > ranking.nemenyi_critical_difference(4, 28)


def test_cd_groups_by_hand() -> None:
    ranks = pd.Series({"e": 3.1, "a": 1.0, "c": 2.2, "b": 1.5, "d": 3.0})
    # from a: b (0.5); from b: c (0.7); from c: d, e (0.8, 0.9); from d: e -- inside (c, d, e), dropped
    assert ranking.cd_groups(ranks, 1.0) == [("a", "b"), ("b", "c"), ("c", "d", "e")]
    assert ranking.cd_groups(ranks, 10.0) == [("a", "b", "c", "d", "e")]
    assert ranking.cd_groups(ranks, 0.2) == [("d", "e")]
    # a difference of exactly CD is significant: no group
    assert ranking.cd_groups(pd.Series({"a": 1.0, "b": 2.0}), 1.0) == []


def test_missing_scores_are_refused_by_name() -> None:
    scores = tied_table()
    scores.loc["s2", "c"] = np.nan
    for function in (ranking.ranks, ranking.average_ranks, ranking.friedman):
        with pytest.raises(ValueError, match=r"\('s2', 'c'\).*every setting"):
            function(scores)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="at least 3 methods"):
        ranking.friedman(tied_table()[["a", "b"]])
    with pytest.raises(ValueError, match="at least 2 settings"):
        ranking.friedman(tied_table().iloc[:1])
    with pytest.raises(ValueError, match="ties all methods"):
        ranking.friedman(pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0]}))
    for alpha in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            ranking.nemenyi_critical_difference(4, 14, alpha=alpha)
    with pytest.raises(ValueError, match="k must"):
        ranking.nemenyi_critical_difference(1, 14)
    with pytest.raises(ValueError, match="n must"):
        ranking.nemenyi_critical_difference(4, 0)
    with pytest.raises(ValueError, match="cd must"):
        ranking.cd_groups(pd.Series({"a": 1.0, "b": 2.0}), 0.0)


def test_critical_difference_diagram_draws() -> None:
    ranks = pd.Series({"fedavg": 1.2, "fedprox": 1.9, "local": 2.6, "scaffold": 3.4, "ditto": 3.9})
    cd = 1.0
    fig, ax = plt.subplots()
    assert plots.critical_difference_diagram(ranks, cd, ax=ax, title="CD diagram") is ax
    texts = [t.get_text() for t in ax.texts]
    assert set(ranks.index) <= set(texts)
    assert texts.count("CD") == 1
    assert "1.20" in texts and "3.90" in texts
    bars = [line for line in ax.get_lines() if line.get_linewidth() == 4.0]
    assert len(bars) == len(ranking.cd_groups(ranks, cd)) == 4
    assert ax.get_title() == "CD diagram"
    fig.canvas.draw()
    new = plots.critical_difference_diagram(ranking.average_ranks(tied_table()), 1.25)
    assert isinstance(new, Axes)
    with pytest.raises(ValueError, match="cd must"):
        plots.critical_difference_diagram(ranks, -1.0)


def test_separated_pairs_are_those_at_least_a_critical_difference_apart():
    ranks_ = pd.Series({"a": 1.0, "b": 2.5, "c": 4.0, "d": 4.2})
    assert ranking.separated_pairs(ranks_, 2.0) == [("a", "c"), ("a", "d")]
    assert ranking.separated_pairs(ranks_, 3.0) == [("a", "c"), ("a", "d")] and ranking.separated_pairs(ranks_, 3.5) == []
