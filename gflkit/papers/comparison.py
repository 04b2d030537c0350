r"""Whether one method beats another: the difference of two scores, its 95 % interval and its noise model.

A claim such as "FedSKA beats SFL" compares two measured numbers, each of which would move if the runs
were repeated with another seed or scored on other clients. A comparison therefore returns the measured
difference :math:`\hat\Delta` (first − second, in the score's unit) with a 95 % interval
:math:`[\Delta_-, \Delta_+]` and the noise model that produced it (:class:`Difference`). The claim "first
beats second by more than :math:`m`" (:math:`m = 0` unless the claim states a margin) is then

* **reproduced** when :math:`\Delta_- > m`: the whole interval lies above the margin;
* **not reproduced** when :math:`\Delta_+ \le m`: the whole interval lies at or below it;
* **inconclusive** otherwise: the difference is within noise, and this budget decides nothing.

"First is within :math:`m` of second" is reproduced when :math:`[\Delta_-, \Delta_+] \subseteq [-m, m]` and
not reproduced when the interval lies entirely outside :math:`[-m, m]`.

**Noise models**, the first that applies:

1. *Seeds* (:func:`seed_difference`; at least :data:`MIN_SEEDS` seeds). Both methods ran with each seed
   :math:`s = 1, \dots, S` (same partition, same initial model), so the difference of their client means
   :math:`d_s = \bar a_s - \bar b_s` is paired per seed. With :math:`\bar d` the mean and :math:`s_d` the
   sample standard deviation (ddof = 1) of the :math:`d_s`, Student's t interval is
   :math:`\bar d \pm t_{0.975,\,S-1}\; s_d / \sqrt S`. It covers everything a seed changes.
2. *Clients* (:func:`bootstrap_difference`; one or two seeds). Client :math:`k` scored both methods on its
   own test split, so its difference :math:`d_k = a_k - b_k` is the unit. The statistic is the mean
   difference, unweighted :math:`\hat\Delta = \frac1K \sum_k d_k` (the tables' ``mean``) or weighted by the
   clients' test sizes :math:`n_k`, :math:`\hat\Delta = \sum_k n_k d_k / \sum_k n_k` (``weighted_mean``).
   A paired bootstrap draws :data:`RESAMPLES` resamples of the :math:`K` clients with replacement from a
   seeded generator, recomputes the statistic on each, and takes their 2.5 % and 97.5 % percentiles. It
   measures how much the conclusion depends on which clients were scored; training noise across seeds
   is not in it, so it is the narrower of the two.
3. *Test images* (:func:`held_out_difference`; one accuracy over the union of unseen clients' images,
   FedCG's and LEAF's protocol). Two accuracies near :math:`p` measured on the same :math:`n` images differ
   by noise of standard error :math:`\mathrm{se} = 100 \sqrt{2 p (1 - p) / n}` points
   (:func:`difference_noise`, the two methods' errors taken as independent); the interval is
   :math:`\hat\Delta \pm z_{0.975}\,\mathrm{se}` with :math:`z_{0.975} \approx 1.96`.

**From records** (:class:`Scoring`, :func:`compare`): tidy per-client rows as :mod:`gflkit.metrics`
describes them (``method``, ``seed``, ``client``, ``round``, the score, ``num_samples``). Each run's scores
at its reported round are paired on ``(seed, client)``; a pair that exists for one side only is refused.
A ranking claim ("best of the eight") compares the method with the best *other* one
(:func:`compare_with_best_other`); an ablation claim ("removing X lowers the accuracy") is the comparison
of the full method with the ablated one.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from gflkit import metrics
from gflkit.papers.verdict import Verdict

#: coverage of every interval
LEVEL = 0.95
#: bootstrap resamples
RESAMPLES = 2000
#: seeds from which the seed model (Student t) replaces the bootstrap over clients
MIN_SEEDS = 3


def _signed(value: float) -> str:
    """``+0.45`` / ``−0.12`` (a true minus sign; what rounds to zero is ``+0.00``)."""
    return f"{round(value, 2) + 0.0:+.2f}".replace("-", "−")


@dataclass(frozen=True)
class Difference:
    r"""A measured difference ``first − second`` of two scores and the claim it is judged against.

    Attributes:
        estimate: the measured difference :math:`\hat\Delta`.
        low, high: its 95 % interval.
        model: the noise model that gave the interval, in words ("paired bootstrap over 100 clients,
            unweighted mean").
        n: the model's number of units (clients, seeds or test images).
        claim: ``"exceeds"`` (``difference > margin``: "first beats second") or ``"within"``
            (``|difference| ≤ margin``).
        margin: the claim's threshold, 0 unless the claim states one.
    """

    estimate: float
    low: float
    high: float
    model: str
    n: int
    claim: Literal["exceeds", "within"] = "exceeds"
    margin: float = 0.0

    def exceeding(self, margin: float) -> Difference:
        """Judged against "first beats second by more than ``margin``"; a negative margin reads "first is
        no more than ``−margin`` below second" (e.g. "FedAvg matches or beats Local")."""
        return dataclasses.replace(self, claim="exceeds", margin=margin)

    def within(self, margin: float) -> Difference:
        """Judged against "first and second differ by at most ``margin``"."""
        if margin < 0:
            raise ValueError(f"a 'within' margin must be non-negative, got {margin}")
        return dataclasses.replace(self, claim="within", margin=margin)

    @property
    def verdict(self) -> Verdict:
        """Reproduced when the interval lies inside the claim's region, not reproduced when it lies outside
        it, inconclusive when it reaches across the region's edge (see the module docstring)."""
        if self.claim == "exceeds":
            inside, outside = self.low > self.margin, self.high <= self.margin
        else:
            inside = -self.margin <= self.low and self.high <= self.margin
            outside = self.low > self.margin or self.high < -self.margin
        if inside:
            return Verdict.REPRODUCED
        return Verdict.NOT_REPRODUCED if outside else Verdict.INCONCLUSIVE

    @property
    def estimate_text(self) -> str:
        """``+0.45``."""
        return _signed(self.estimate)

    @property
    def interval_text(self) -> str:
        """``[−0.12, +1.02]``."""
        return f"[{_signed(self.low)}, {_signed(self.high)}]"

    def describe(self) -> str:
        """``+0.45 [−0.12, +1.02] (paired bootstrap over 100 clients, unweighted mean)``."""
        return f"{self.estimate_text} {self.interval_text} ({self.model})"


@dataclass(frozen=True)
class Comparison:
    """A claim decided by several differences (one per setting, dataset, ...): its verdict and its
    labelled ``parts``."""

    verdict: Verdict
    parts: tuple[tuple[str, Difference], ...]


def at_least(count: int, parts: Mapping[str, Difference]) -> Comparison:
    """A claim that holds for at least ``count`` of the ``parts`` (e.g. "on most datasets"): reproduced when
    ``count`` parts are reproduced, not reproduced when fewer than ``count`` are reproduced or inconclusive,
    inconclusive otherwise (the inconclusive parts could still go either way)."""
    if not parts:
        raise ValueError("a comparison needs at least one part")
    verdicts = [difference.verdict for difference in parts.values()]
    reproduced = verdicts.count(Verdict.REPRODUCED)
    if reproduced >= count:
        verdict = Verdict.REPRODUCED
    elif reproduced + verdicts.count(Verdict.INCONCLUSIVE) < count:
        verdict = Verdict.NOT_REPRODUCED
    else:
        verdict = Verdict.INCONCLUSIVE
    return Comparison(verdict, tuple(parts.items()))


def every(parts: Mapping[str, Difference]) -> Comparison:
    """A claim that holds for every part (e.g. at every shard setting): :func:`at_least` all of them."""
    return at_least(len(parts), parts)


def _vector(values: Any, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1 or len(array) == 0 or not np.isfinite(array).all():
        raise ValueError(f"{name} must be a non-empty 1-D sequence of finite numbers, got {array!r}")
    return array


def _paired(first: Any, second: Any) -> np.ndarray:
    """``first − second`` of two equally long score vectors."""
    a, b = _vector(first, "first"), _vector(second, "second")
    if a.shape != b.shape:
        raise ValueError(f"paired scores must have equal lengths, got {len(a)} and {len(b)}")
    return a - b


def seed_difference(first: Any, second: Any, statistic: str = "client mean") -> Difference:
    r"""The seed model: per-seed scores ``first[s]``, ``second[s]`` of the two methods (each seed's
    ``statistic``, e.g. its client mean), :math:`\bar d \pm t_{0.975,\,S-1}\, s_d/\sqrt S` over the paired
    differences :math:`d_s` (ddof = 1)."""
    d = _paired(first, second)
    if len(d) < 2:
        raise ValueError("the seed model needs at least two seeds")
    half = stats.t.ppf(0.5 + LEVEL / 2, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    mean = float(d.mean())
    return Difference(mean, mean - half, mean + half, f"Student t over {len(d)} seeds of the {statistic}", len(d))


def bootstrap_difference(first: Any, second: Any, weights: Any = None, *, unit: str = "clients",
                         resamples: int = RESAMPLES, seed: int = 0) -> Difference:
    r"""The client model: per-client scores of the two methods on the same clients, the mean difference
    :math:`\sum_k n_k d_k / \sum_k n_k` (``weights`` :math:`n_k`, the clients' test sizes; ``None``: equal)
    and the percentile interval of ``resamples`` paired bootstrap resamples of the clients drawn from
    ``numpy.random.default_rng(seed)``."""
    d = _paired(first, second)
    w = np.ones_like(d) if weights is None else _vector(weights, "weights")
    if w.shape != d.shape or (w <= 0).any():
        raise ValueError(f"weights must be one positive test size per client, got {w!r} for {len(d)} clients")
    draws = np.random.default_rng(seed).integers(0, len(d), size=(resamples, len(d)))
    resampled = (w[draws] * d[draws]).sum(axis=1) / w[draws].sum(axis=1)
    low, high = np.quantile(resampled, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    weighting = "unweighted mean" if weights is None else "mean weighted by test size"
    return Difference(float(np.average(d, weights=w)), float(low), float(high),
                      f"paired bootstrap over {len(d)} {unit}, {weighting}", len(d))


def difference_noise(accuracy: float, images: int) -> float:
    r"""The standard error (in points) of the difference of two accuracies near ``accuracy`` % measured on
    the same ``images`` test images, :math:`100\sqrt{2p(1-p)/n}` (about 3.6 points on 366 images at 58 %)."""
    p = min(max(accuracy / 100.0, 0.0), 1.0)
    return 100.0 * (2.0 * p * (1.0 - p) / max(images, 1)) ** 0.5


def held_out_difference(first: float, second: float, images: int) -> Difference:
    r"""The test-image model: two accuracies (%) over the same ``images`` test images,
    :math:`\hat\Delta \pm z_{0.975}\,` :func:`difference_noise` at their mean accuracy."""
    estimate = first - second
    half = stats.norm.ppf(0.5 + LEVEL / 2) * difference_noise((first + second) / 2, images)
    return Difference(estimate, estimate - half, estimate + half, f"per-image standard error, {images} test images",
                      images)


@dataclass(frozen=True)
class PairedScores:
    """Two sides' scores on the same ``(seed, client)`` pairs: ``first[i]`` and ``second[i]`` belong to
    seed ``seeds[i]``; ``weights``: the clients' test sizes, or ``None`` for an unweighted mean."""

    first: np.ndarray
    second: np.ndarray
    seeds: np.ndarray
    weights: np.ndarray | None = None

    def per_seed(self) -> tuple[np.ndarray, np.ndarray]:
        """Each seed's (weighted) client mean of both sides, in seed order."""
        first, second = [], []
        for s in np.unique(self.seeds):
            chosen = self.seeds == s
            weights = None if self.weights is None else self.weights[chosen]
            first.append(np.average(self.first[chosen], weights=weights))
            second.append(np.average(self.second[chosen], weights=weights))
        return np.array(first), np.array(second)

    def difference(self, seed: int = 0) -> Difference:
        """``first − second`` under the seed model with at least :data:`MIN_SEEDS` seeds, else the paired
        bootstrap over the ``(seed, client)`` pairs (``seed``: the bootstrap generator's)."""
        num_seeds = len(np.unique(self.seeds))
        if num_seeds >= MIN_SEEDS:
            statistic = "client mean" if self.weights is None else "client mean weighted by test size"
            return seed_difference(*self.per_seed(), statistic=statistic)
        unit = "clients" if num_seeds == 1 else "(seed, client) pairs"
        return bootstrap_difference(self.first, self.second, self.weights, unit=unit, seed=seed)


@dataclass(frozen=True)
class Scoring:
    """Which score of a records frame a comparison reads.

    Attributes:
        value: the score column (``accuracy``, ``auc``, ...; higher is better).
        column: the column naming the compared sides (``method``; ``setting`` for ablation rows, ``q``, ...).
        weighted: weigh each client by its test size ``num_samples`` (the tables' ``weighted_mean``)
            instead of equally (their ``mean``).
        report, select_by: each run's reported round (:func:`gflkit.metrics.reported_rows`); ``report=None``
            when the records already hold one row per (side, seed, client), e.g. an area under the curve.
    """

    value: str = "accuracy"
    column: str = "method"
    weighted: bool = False
    report: str | None = "last"
    select_by: str | None = None

    def rows(self, records: pd.DataFrame) -> pd.DataFrame:
        """The records' rows at each run's reported round, one per (side, seed, client)."""
        needed = [self.column, "seed", "client", self.value, *(["num_samples"] if self.weighted else [])]
        missing = [c for c in needed if c not in records.columns]
        if missing:
            raise ValueError(f"records lack the columns {missing}; they have {list(records.columns)}")
        rows = records if self.report is None else metrics.reported_rows(
            records, [self.column, "seed"], self.report, self.select_by or self.value)
        repeated = rows[rows.duplicated([self.column, "seed", "client"], keep=False)]
        if len(repeated):
            example = repeated[[self.column, "seed", "client"]].iloc[0].to_dict()
            raise ValueError(f"records hold several rows per ({self.column}, seed, client), e.g. {example}: select "
                             f"one setting (dataset, q, ...) before comparing")
        return rows

    def means(self, records: pd.DataFrame) -> pd.Series:
        """Each side's score: its (weighted) client mean at the reported round, averaged over seeds."""
        per_run = metrics.summarize_records(self.rows(records), self.value, by=[self.column, "seed"])
        return per_run.groupby(self.column)["weighted_mean" if self.weighted else "mean"].mean()

    def pairs(self, records: pd.DataFrame, first: Any, second: Any) -> PairedScores:
        """The scores of sides ``first`` and ``second`` paired on ``(seed, client)``; refuses a pair that
        exists for one side only, a missing score and, weighted, a client whose test size differs."""
        rows = self.rows(records)
        sides = []
        for name in (first, second):
            side = rows[rows[self.column] == name].set_index(["seed", "client"]).sort_index()
            if side.empty:
                raise ValueError(f"no records with {self.column} = {name!r}; they hold "
                                 f"{sorted(rows[self.column].unique().tolist())}")
            sides.append(side)
        a, b = sides
        unpaired = a.index.symmetric_difference(b.index)
        if len(unpaired):
            raise ValueError(f"{first!r} and {second!r} must be scored on the same (seed, client) pairs; "
                             f"{len(unpaired)} pair(s) scored for one side only, e.g. {list(unpaired[:3])}")
        b = b.loc[a.index]
        if a[self.value].isna().any() or b[self.value].isna().any():
            raise ValueError(f"{self.value} is missing (NaN) for some clients of {first!r} or {second!r}")
        weights = None
        if self.weighted:
            if not np.array_equal(a["num_samples"].to_numpy(), b["num_samples"].to_numpy()):
                raise ValueError(f"{first!r} and {second!r} scored some client on different test sizes: "
                                 "not the same clients")
            weights = a["num_samples"].to_numpy(dtype=np.float64)
        return PairedScores(a[self.value].to_numpy(dtype=np.float64), b[self.value].to_numpy(dtype=np.float64),
                            a.index.get_level_values("seed").to_numpy(), weights)


def compare(records: pd.DataFrame, first: Any, second: Any, scoring: Scoring = Scoring(), *,
            seed: int = 0) -> Difference:
    """``first − second`` from ``records`` (:meth:`Scoring.pairs`, :meth:`PairedScores.difference`)."""
    return scoring.pairs(records, first, second).difference(seed)


def compare_per_group(records: pd.DataFrame, by: str, first: Any, second: Any, scoring: Scoring = Scoring(), *,
                      seed: int = 0) -> dict[str, Difference]:
    """:func:`compare` within each group of ``records`` by the column ``by`` (e.g. each shard setting ``q``),
    labelled ``"q=2"``: the parts of a claim made at every setting (:func:`every`)."""
    return {f"{by}={value}": compare(group, first, second, scoring, seed=seed)
            for value, group in records.groupby(by, sort=True)}


def best_other(scores: pd.Series, method: Any, others: Sequence[Any] | None = None) -> Any:
    """The best of ``others`` by ``scores`` (indexed by side, higher is better); ``None``: every side of
    ``scores`` but ``method``."""
    candidates = [m for m in (scores.index if others is None else others) if m != method]
    missing = [m for m in candidates if m not in scores.index]
    if not candidates or missing:
        raise ValueError(f"no score for {missing or 'any other side'}; scores hold {list(scores.index)}")
    return scores[candidates].idxmax()


def compare_with_best_other(records: pd.DataFrame, method: Any, others: Sequence[Any] | None = None,
                            scoring: Scoring = Scoring(), *, seed: int = 0) -> tuple[Any, Difference]:
    """A ranking claim ("``method`` is the best"): ``method`` against the best of ``others`` (by
    :meth:`Scoring.means`; ``None``: every other side in ``records``). Returns that side and the difference."""
    other = best_other(scoring.means(records), method, others)
    return other, compare(records, method, other, scoring, seed=seed)


def best_other_per_group(records: pd.DataFrame, by: str, method: Any, others: Sequence[Any] | None = None,
                         scoring: Scoring = Scoring(), *, seed: int = 0) -> dict[str, Difference]:
    """:func:`compare_with_best_other` within each group of ``records`` by the column ``by``, labelled with the
    group and its best other side (``"q=2 vs sfl"``): a ranking claim made at every setting."""
    parts = {}
    for value, group in records.groupby(by, sort=True):
        other, difference = compare_with_best_other(group, method, others, scoring, seed=seed)
        parts[f"{by}={value} vs {other}"] = difference
    return parts


__all__ = [
    "LEVEL", "MIN_SEEDS", "RESAMPLES", "Comparison", "Difference", "PairedScores", "Scoring", "at_least",
    "best_other", "best_other_per_group", "bootstrap_difference", "compare", "compare_per_group",
    "compare_with_best_other", "difference_noise", "every", "held_out_difference", "seed_difference",
]
