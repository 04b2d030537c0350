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

1. *Seeds and clients* (:func:`seed_difference`; at least :data:`MIN_SEEDS` seeds). A seed draws the
   partition, the initial model, the sampling and the minibatch order, so client :math:`k` of seed
   :math:`s` is a fresh client: the per-client differences follow the two-level model
   :math:`d_{s,k} = \Delta + u_s + e_{s,k}` (a seed effect :math:`u_s`, variance :math:`\sigma_u^2`, and a
   client effect :math:`e_{s,k}` nested in it, variance :math:`\sigma_e^2`). Each seed's client mean
   :math:`\bar d_s = \Delta + u_s + \bar e_s` then has variance :math:`\sigma_u^2 + \sigma_e^2/K` and the
   seeds are independent, so Student's t over the :math:`S` per-seed paired differences,
   :math:`\bar d \pm t_{0.975,\,S-1}\; s / \sqrt S`, covers both levels when the :math:`\bar d_s` are normal.

   **They are not always normal.** A seed redraws the partition, and some partitions break one method
   (a restoring server that leaves clients at 0 %, a graph learned from an unlucky split): the committed
   grids show single seeds 10–13 points away from their method's others. With such lopsided seed effects
   three seeds that all missed the bad draw sit close together, :math:`s` is small, and the interval
   excludes the rerun average far more often than 2.5 % on a side (:mod:`gflkit.papers.coverage`: 7–16 % at
   3 seeds, worse at 5–8). The rule therefore takes the spread from a **random-effects model of the grid**:
   the comparisons of one grid (the methods of one setting, run on the same seeds) share one distribution
   of seed effects, whose variance :math:`\sigma_p^2` is pooled over every pair of the grid's sides with at
   least :data:`DECISIVE_SEEDS` shared seeds (:func:`pooled_seed_spread`, :class:`SeedSpread`). A comparison's
   interval is :math:`\bar d \pm t_{0.975,\,2}\,\max(s, \hat\sigma_p)/\sqrt S`: its own spread where it saw
   a bad seed, the grid's where it happened not to, and the quantile of three seeds whatever :math:`S` — more
   seeds shrink the standard error, but when one method breaks on, say, one partition in ten, five or eight
   seeds that all missed it look tight, and only the wider quantile keeps the error of that case at 2.5 %.
   Where the pooling assumption fails (a grid whose pairs vary unequally, which the committed grids do), the
   floor can only widen an interval, never narrow it. Simulated under normal, skewed and contaminated seed
   effects (in every method, or in one method only) and under the committed grids' own, resampled, at 3, 5
   and 8 seeds, its one-sided error stays at or below 2.5 % (docs/papers/noise_model.md gives the numbers).
   The price is width: the rule trades power for verdicts that a rerun does not overturn.

   A verdict over reruns needs :data:`DECISIVE_SEEDS` seeds: with two, Student's t has one degree of freedom
   and the floor cannot be estimated, so the interval is shown and the difference decides nothing
   (:attr:`Difference.short_of`). **A claim has one kind of interval**: where some of its comparisons are
   over seeds, a comparison that has a single seed (a candidate run once) is not given a client-sampling
   interval but marked undecided, naming how many seeds it has (:func:`one_kind`).

   When both sides score every client alike to the scores' precision (:data:`IDENTICAL_TOLERANCE`), the runs
   are identical and no noise model applies: the difference is marked :attr:`Difference.identical` and the
   claim's verdict says so ("trivial: identical runs") instead of reading like evidence.
2. *Clients only* (:func:`client_difference`; one seed). Client :math:`k` scored both methods on its own
   test split, so :math:`d_k = a_k - b_k` is the unit. The statistic is the mean difference, unweighted
   :math:`\hat\Delta = \frac1K \sum_k d_k` (the tables' ``mean``) or weighted by the clients' test sizes
   :math:`n_k`, :math:`\hat\Delta = \sum_k n_k d_k / \sum_k n_k` (``weighted_mean``), with Student's t
   interval :math:`\hat\Delta \pm t_{0.975,\,K-1}\,\mathrm{se}`, :math:`\mathrm{se}^2 = \frac{1}{K(K-1)}
   \sum_k (n_k/\bar n)^2 (d_k - \hat\Delta)^2` (the usual linearisation of a ratio of means; :math:`s_d^2/K`
   unweighted). It covers :math:`\Delta + u_s`, the difference *on this seed*: which clients were scored,
   not what a rerun changes, and every model string says so. (On 10–20 clients a percentile bootstrap
   covered 85–92 % in :mod:`gflkit.papers.coverage`'s simulation, the t interval 95 % on normal clients and
   91–93 % on skewed ones.)
3. *Test images* (:func:`held_out_difference`; one accuracy over the union of unseen clients' images,
   FedCG's and LEAF's protocol). Two accuracies near :math:`p` measured on the same :math:`n` images differ
   by noise of standard error :math:`\mathrm{se} = 100 \sqrt{2 p (1 - p) / n}` points
   (:func:`difference_noise`, the two methods' errors taken as independent); the interval is
   :math:`\hat\Delta \pm z_{0.975}\,\mathrm{se}` with :math:`z_{0.975} \approx 1.96`.

**Ranking claims pick the best of many** (:func:`compare_with_best_other`). "X is the best of the :math:`m + 1`
methods" holds only if X beats *every* other one: an intersection of :math:`m` one-sided claims, each
decided at the plain 95 % level (an intersection–union test needs no correction). "X is *not* the best"
holds if *some* other method beats X: a union over :math:`m` candidates, which is decided only when one
candidate's interval at the Bonferroni level :math:`1 - 0.05/m` lies below 0 (Holm's first step; it
keeps the family-wise error at 5 % whichever candidate the data make look best). Anything else is
inconclusive. Scores equal to the tables' two decimals are a tie, and a tie is named as one
(``fedu = sfl``), never broken by list order (:func:`best_other`).

**From records** (:class:`Scoring`, :func:`compare`): tidy per-client rows as :mod:`gflkit.metrics`
describes them (``method``, ``seed``, ``client``, ``round``, the score, ``num_samples``). Each run's scores
at its reported round are paired on ``(seed, client)``; a pair that exists for one side only is refused.
A grid whose later seeds ran only some methods is compared on the seeds both compared sides ran
(:func:`on_shared_seeds`), and says how many; a ranking claim compares each candidate on the seeds it shares
with the method (a union bound needs no common seeds).
A ranking claim ("best of the eight") compares the method with every other one as above
(:func:`compare_with_best_other`); an ablation claim ("removing X lowers the accuracy") is the comparison
of the full method with the ablated one.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from gflkit import metrics
from gflkit.papers.verdict import Verdict

#: coverage of every interval
LEVEL = 0.95
#: seeds from which the seed model (Student t over seeds) replaces the one-seed model over clients
MIN_SEEDS = 2
#: seeds from which a comparison over reruns may decide a claim (fewer: its interval is shown, undecided)
DECISIVE_SEEDS = 3
#: two runs whose paired scores all differ by less than this (half the CSVs' fourth decimal) are identical
IDENTICAL_TOLERANCE = 5e-5
#: decimals of the tables — scores equal to this many decimals tie
TABLE_DECIMALS = 2


def _signed(value: float, decimals: int = 2) -> str:
    """``+0.45`` / ``−0.12`` (a true minus sign; what rounds to zero is ``+0.00``)."""
    return f"{round(value, decimals) + 0.0:+.{decimals}f}".replace("-", "−")


def _bound(value: float, threshold: float) -> str:
    """An interval's bound with two decimals, or with as many more (up to 6) as it takes to show on which side
    of ``threshold`` it lies when two decimals would round it onto the threshold."""
    decimals = 2
    while decimals < 6 and value != threshold and round(value, decimals) == round(threshold, decimals):
        decimals += 1
    return _signed(value, decimals)


@dataclass(frozen=True)
class Difference:
    r"""A measured difference ``first − second`` of two scores and the claim it is judged against.

    Attributes:
        estimate: the measured difference :math:`\hat\Delta`.
        low, high: its 95 % interval.
        model: the noise model that gave the interval, in words ("Student t over 3 seeds of the client
            mean").
        n: the model's number of units (clients, seeds or test images).
        claim: ``"exceeds"`` (``difference > margin``: "first beats second") or ``"within"``
            (``|difference| ≤ margin``).
        margin: the claim's threshold, 0 unless the claim states one.
        seeds: the seeds the interval covers reruns over (1 for the one-seed models: clients, test images).
        short_of: why this difference cannot decide its claim ("1 seed (a verdict over reruns needs 3)"), or
            ``""``; such a difference is inconclusive whatever its interval.
        identical: the two sides scored every client alike (:data:`IDENTICAL_TOLERANCE`): identical runs.
    """

    estimate: float
    low: float
    high: float
    model: str
    n: int
    claim: Literal["exceeds", "within"] = "exceeds"
    margin: float = 0.0
    seeds: int = 1
    short_of: str = ""
    identical: bool = False

    def exceeding(self, margin: float) -> Difference:
        """Judged against "first beats second by more than ``margin``"; a negative margin reads "first is
        no more than ``−margin`` below second" (e.g. "FedAvg matches or beats Local")."""
        return dataclasses.replace(self, claim="exceeds", margin=margin)

    def within(self, margin: float) -> Difference:
        """Judged against "first and second differ by at most ``margin``"."""
        if margin < 0:
            raise ValueError(f"a 'within' margin must be non-negative, got {margin}")
        return dataclasses.replace(self, claim="within", margin=margin)

    def undecided(self, why: str) -> Difference:
        """This difference marked as one that cannot decide its claim (:attr:`short_of`)."""
        return dataclasses.replace(self, short_of=why)

    @property
    def verdict(self) -> Verdict:
        """:attr:`decision`, or "trivial: identical runs" when the two runs are identical."""
        return Verdict.TRIVIAL if self.identical else self.decision

    @property
    def decision(self) -> Verdict:
        """Reproduced when the interval lies inside the claim's region, not reproduced when it lies outside
        it, inconclusive when it reaches across the region's edge or the difference is :attr:`short_of` what a
        verdict needs (see the module docstring)."""
        if self.short_of:
            return Verdict.INCONCLUSIVE
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
        """``[−0.12, +1.02]``; a bound that two decimals would round onto a threshold of the claim gets more
        (``[−0.86, +0.003]``), so the printed interval shows the side that decided the verdict."""
        if self.identical:
            return "identical runs"
        if self.short_of:
            return f"undecided: {self.short_of}"
        thresholds = (self.margin,) if self.claim == "exceeds" else (-self.margin, self.margin)
        nearest = lambda value: min(thresholds, key=lambda t: abs(value - t))
        return f"[{_bound(self.low, nearest(self.low))}, {_bound(self.high, nearest(self.high))}]"

    def describe(self) -> str:
        """``+0.45 [−0.12, +1.02] (Student t over 3 seeds of the client mean)``."""
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
    inconclusive otherwise (the inconclusive parts could still go either way). The parts are first made
    :func:`one_kind`; a claim every part of which compares identical runs is "trivial: identical runs"."""
    if not parts:
        raise ValueError("a comparison needs at least one part")
    parts = one_kind(parts)
    if all(difference.identical for difference in parts.values()):
        return Comparison(Verdict.TRIVIAL, tuple(parts.items()))
    verdicts = [difference.decision for difference in parts.values()]
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


def _seeds_text(seeds: int, side: Any = None) -> str:
    has = "" if side is None else f"{side} has "
    return f"{has}{seeds} seed{'s' if seeds > 1 else ''} (a verdict over reruns needs {DECISIVE_SEEDS})"


def one_kind(parts: Mapping[Any, Difference]) -> dict[Any, Difference]:
    """The differences of one claim with one kind of interval: where any of them is over seeds (a claim about
    reruns), a one-seed difference (clients or test images of one seed) is marked undecided — its interval
    covers client sampling, not a rerun, and must not decide beside seed-level ones. A claim all of whose
    differences are one-seed keeps them (each labelled "client sampling only")."""
    if not any(difference.seeds >= MIN_SEEDS for difference in parts.values()):
        return dict(parts)
    return {label: d.undecided(_seeds_text(1)) if d.seeds == 1 and not d.short_of else d
            for label, d in parts.items()}


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


def _t_half_width(standard_error: float, units: int, level: float) -> float:
    """Half the width of Student's t interval at ``level`` with ``units − 1`` degrees of freedom."""
    _check_level(level)
    return float(stats.t.ppf(0.5 + level / 2, units - 1)) * standard_error


def _check_level(level: float) -> None:
    if not (isinstance(level, float) and 0.0 < level < 1.0):
        raise ValueError(f"an interval's level must lie strictly between 0 and 1, got {level!r}")


def _level_text(level: float) -> str:
    return "" if level == LEVEL else f", {100 * level:.2f} % interval"


@dataclass(frozen=True)
class SeedSpread:
    r"""The seed spread :math:`\hat\sigma_p` of a grid's comparisons, pooled over ``comparisons`` pairs of sides
    with ``degrees`` degrees of freedom in all (:func:`pool_seed_spread`): the floor of each comparison's own."""

    sd: float
    comparisons: int
    degrees: int


def pool_seed_spread(differences: Sequence[Any]) -> SeedSpread | None:
    r"""The pooled seed spread of a grid from each comparison's per-seed differences
    :math:`d_{c,s}`: :math:`\hat\sigma_p^2 = \sum_c \sum_s (d_{c,s} - \bar d_c)^2 / \sum_c (S_c - 1)` over the
    comparisons with at least :data:`DECISIVE_SEEDS` seeds; None when there is none."""
    kept = [_vector(d, "per-seed differences") for d in differences]
    kept = [d for d in kept if len(d) >= DECISIVE_SEEDS]
    if not kept:
        return None
    degrees = sum(len(d) - 1 for d in kept)
    squares = sum(float(((d - d.mean()) ** 2).sum()) for d in kept)
    return SeedSpread(math.sqrt(squares / degrees), len(kept), degrees)


def seed_difference(first: Any, second: Any, statistic: str = "client mean", *, level: float = LEVEL,
                    spread: SeedSpread | None = None) -> Difference:
    r"""The seed model: per-seed scores ``first[s]``, ``second[s]`` of the two methods (each seed's
    ``statistic``, e.g. its client mean), :math:`\bar d \pm t_{(1+\mathrm{level})/2,\,2}\, \max(s_d,
    \hat\sigma_p)/\sqrt S` over the paired differences :math:`d_s` (ddof = 1), where :math:`\hat\sigma_p` is the
    grid's pooled ``spread`` and the quantile is three seeds' whatever :math:`S` (module docstring); without a
    grid (``spread`` None, or pooled over one comparison) the plain :math:`t_{(1+\mathrm{level})/2,\,S-1}\,
    s_d/\sqrt S`. Covers what a rerun changes and which clients were drawn; below :data:`DECISIVE_SEEDS` seeds
    it is :attr:`~Difference.short_of` a verdict."""
    d = _paired(first, second)
    if len(d) < 2:
        raise ValueError("the seed model needs at least two seeds")
    own = d.std(ddof=1)
    floored = spread is not None and spread.comparisons > 1 and len(d) >= DECISIVE_SEEDS
    # floored: the quantile of DECISIVE_SEEDS seeds whatever their number (module docstring)
    half = _t_half_width(max(own, spread.sd) if floored else own, DECISIVE_SEEDS if floored else len(d),
                         level) / math.sqrt(len(d))
    mean = float(d.mean())
    floor = ""
    if floored:
        quantile = f", t quantile of {DECISIVE_SEEDS} seeds" if len(d) > DECISIVE_SEEDS else ""
        floor = f", seed spread at least its grid's pooled one ({spread.comparisons} pairs){quantile}"
    difference = Difference(mean, mean - half, mean + half,
                            f"Student t over {len(d)} seeds of the {statistic}{floor}{_level_text(level)}", len(d),
                            seeds=len(d))
    return difference if len(d) >= DECISIVE_SEEDS else difference.undecided(_seeds_text(len(d)))


def client_difference(first: Any, second: Any, weights: Any = None, *, unit: str = "clients",
                      level: float = LEVEL) -> Difference:
    r"""The one-seed model: per-client scores of the two methods on the same clients, the mean difference
    :math:`\sum_k n_k d_k / \sum_k n_k` (``weights`` :math:`n_k`, the clients' test sizes; ``None``: equal) and
    Student's t interval with the linearised standard error of the module docstring. It covers client
    sampling only: the model string says so."""
    d = _paired(first, second)
    if len(d) < 2:
        raise ValueError(f"the client model needs at least two {unit}, got {len(d)}")
    w = np.ones_like(d) if weights is None else _vector(weights, "weights")
    if w.shape != d.shape or (w <= 0).any():
        raise ValueError(f"weights must be one positive test size per client, got {w!r} for {len(d)} clients")
    estimate = float(np.average(d, weights=w))
    scaled = w / w.mean() * (d - estimate)
    half = _t_half_width(math.sqrt(float((scaled ** 2).sum()) / (len(d) * (len(d) - 1))), len(d), level)
    weighting = "unweighted mean" if weights is None else "mean weighted by test size"
    return Difference(estimate, estimate - half, estimate + half,
                      f"Student t over {len(d)} {unit} of one seed, {weighting}{_level_text(level)}: "
                      "client sampling only, not a rerun", len(d))


def difference_noise(accuracy: float, images: int) -> float:
    r"""The standard error (in points) of the difference of two accuracies near ``accuracy`` % measured on
    the same ``images`` test images, :math:`100\sqrt{2p(1-p)/n}` (about 3.6 points on 366 images at 58 %)."""
    p = min(max(accuracy / 100.0, 0.0), 1.0)
    return 100.0 * (2.0 * p * (1.0 - p) / max(images, 1)) ** 0.5


def held_out_difference(first: float, second: float, images: int, *, level: float = LEVEL) -> Difference:
    r"""The test-image model: two accuracies (%) over the same ``images`` test images,
    :math:`\hat\Delta \pm z_{(1+\mathrm{level})/2}\,` :func:`difference_noise` at their mean accuracy."""
    _check_level(level)
    estimate = first - second
    half = stats.norm.ppf(0.5 + level / 2) * difference_noise((first + second) / 2, images)
    return Difference(estimate, estimate - half, estimate + half,
                      f"per-image standard error, {images} test images of one seed{_level_text(level)}: "
                      "test-image sampling only, not a rerun", images)


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

    def difference(self, level: float = LEVEL, spread: SeedSpread | None = None) -> Difference:
        """``first − second`` under the seed model with at least :data:`MIN_SEEDS` seeds (its spread floored by
        the grid's pooled ``spread``), else the one-seed model over the clients (module docstring); marked
        :attr:`~Difference.identical` when every client scored both sides alike."""
        if len(np.unique(self.seeds)) >= MIN_SEEDS:
            statistic = "client mean" if self.weights is None else "client mean weighted by test size"
            difference = seed_difference(*self.per_seed(), statistic=statistic, level=level, spread=spread)
        else:
            difference = client_difference(self.first, self.second, self.weights, level=level)
        identical = bool(np.abs(self.first - self.second).max() < IDENTICAL_TOLERANCE)
        return dataclasses.replace(difference, identical=identical)


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
        rows = metrics.scored_rows(rows)  # a client without a test sample has no score to compare
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


def on_shared_seeds(records: pd.DataFrame, sides: Sequence[Any], column: str = "method") -> pd.DataFrame:
    """The rows of ``sides`` (values of ``column``) from the seeds that every one of them ran: a paired
    comparison of runs whose later seeds are incomplete (a background grid still running, a GPU lease that
    ended) reads the seeds both sides share, never one side's extra seeds.

    Raises ``ValueError`` when a side has no rows or the sides share no seed.
    """
    chosen = records[records[column].isin(list(sides))]
    seeds = {side: set(chosen.loc[chosen[column] == side, "seed"]) for side in sides}
    absent = [side for side, ran in seeds.items() if not ran]
    if absent:
        raise ValueError(f"no records with {column} = {absent}; they hold {sorted(records[column].unique().tolist())}")
    shared = set.intersection(*seeds.values())
    if not shared:
        raise ValueError(f"{list(sides)} share no seed: " + "; ".join(f"{s} ran {sorted(r)}" for s, r in seeds.items()))
    return chosen[chosen["seed"].isin(shared)]


def per_seed_differences(records: pd.DataFrame, scoring: Scoring = Scoring()) -> dict[tuple[Any, Any], np.ndarray]:
    """Every pair of sides of a grid ``records`` and their per-seed differences (first − second of each seed's
    client mean, weighted as ``scoring`` says) on the seeds the two share, in seed order."""
    rows = scoring.rows(records)
    if scoring.weighted:
        rows = rows.assign(_weighted=rows[scoring.value] * rows["num_samples"])
        sums = rows.groupby([scoring.column, "seed"])[["_weighted", "num_samples"]].sum()
        means = sums["_weighted"] / sums["num_samples"]
    else:
        means = rows.groupby([scoring.column, "seed"])[scoring.value].mean()
    table = means.unstack(scoring.column).sort_index()
    sides = list(table.columns)
    return {(a, b): (table[a] - table[b]).dropna().to_numpy() for i, a in enumerate(sides) for b in sides[i + 1:]}


def pooled_seed_spread(records: pd.DataFrame, scoring: Scoring = Scoring()) -> SeedSpread | None:
    """The seed spread pooled over every pair of sides of the grid ``records`` (:func:`per_seed_differences`,
    :func:`pool_seed_spread`): the floor of each of the grid's comparisons over seeds."""
    return pool_seed_spread(list(per_seed_differences(records, scoring).values()))


def compare(records: pd.DataFrame, first: Any, second: Any, scoring: Scoring = Scoring(), *,
            level: float = LEVEL, spread: SeedSpread | None = None) -> Difference:
    """``first − second`` from ``records`` (:meth:`Scoring.pairs`, :meth:`PairedScores.difference`), the seed
    spread floored by ``spread`` — by default the one pooled over the grid ``records`` itself
    (:func:`pooled_seed_spread`), so a caller that passes a two-sided slice of a grid passes the grid's."""
    spread = pooled_seed_spread(records, scoring) if spread is None else spread
    return scoring.pairs(records, first, second).difference(level, spread)


def compare_shared(records: pd.DataFrame, first: Any, second: Any, scoring: Scoring = Scoring(), *,
                   level: float = LEVEL, spread: SeedSpread | None = None) -> Difference:
    """:func:`compare` of two sides of the grid ``records`` on the seeds both ran (:func:`on_shared_seeds`), the
    spread floored by the grid's (default: pooled over ``records``). Where they share one seed but a side ran
    more, the grid is one of reruns and a one-seed interval would cover client sampling only: the difference
    is undecided and names the side that lacks seeds ("sfl_lg has 1 seed")."""
    spread = pooled_seed_spread(records, scoring) if spread is None else spread
    shared = on_shared_seeds(records, [first, second], scoring.column)
    difference = compare(shared, first, second, scoring, level=level, spread=spread)
    ran = records[records[scoring.column].isin([first, second])].groupby(scoring.column)["seed"].nunique()
    if difference.seeds == 1 and ran.max() > 1:
        return difference.undecided(_seeds_text(1, ran.idxmin()))
    return difference


def compare_per_group(records: pd.DataFrame, by: str, first: Any, second: Any,
                      scoring: Scoring = Scoring()) -> dict[str, Difference]:
    """:func:`compare` within each group of ``records`` by the column ``by`` (e.g. each shard setting ``q``),
    labelled ``"q=2"``: the parts of a claim made at every setting (:func:`every`). Each group is a grid: the
    two sides are compared on the seeds both ran, with the spread pooled over the group's every side."""
    return {f"{by}={value}": compare_shared(group, first, second, scoring)
            for value, group in records.groupby(by, sort=True)}


def _candidates(scores: pd.Series, method: Any, others: Sequence[Any] | None) -> list[Any]:
    candidates = [m for m in (scores.index if others is None else others) if m != method]
    missing = [m for m in candidates if m not in scores.index]
    if not candidates or missing:
        raise ValueError(f"no score for {missing or 'any other side'}; scores hold {list(scores.index)}")
    return candidates


def tied_best(scores: pd.Series, decimals: int = TABLE_DECIMALS) -> tuple[Any, ...]:
    """The sides of ``scores`` (higher is better) whose score equals the highest to ``decimals`` decimals,
    the tables' rounding: one side, or several that tie (in the order of ``scores``)."""
    if scores.empty or scores.isna().any():
        raise ValueError(f"scores must be non-empty and complete, got {scores.to_dict()}")
    rounded = scores.round(decimals)
    return tuple(rounded.index[rounded == rounded.max()])


def best_other(scores: pd.Series, method: Any, others: Sequence[Any] | None = None) -> tuple[Any, ...]:
    """The best of ``others`` by ``scores`` (indexed by side, higher is better; ``None``: every side of
    ``scores`` but ``method``), with its ties (:func:`tied_best`): a tie is never broken by list order."""
    return tied_best(scores[_candidates(scores, method, others)])


def side_label(sides: Sequence[Any]) -> str:
    """``sfl``, or ``fedu = sfl`` for sides that tie."""
    return " = ".join(str(side) for side in sides)


def against_every_candidate(compare_with: Callable[[Any, float], Difference],
                            candidates: Sequence[Any], seeds: Mapping[Any, int] | None = None) -> tuple[str, Difference]:
    """A ranking claim ("X is the best") decided against every one of ``candidates`` as the module docstring
    says: reproduced when X beats each at 95 %, not reproduced when one beats X at the Bonferroni level
    :math:`1 - 0.05/m`, else inconclusive. ``compare_with(candidate, level)`` is X − candidate at ``level``.

    Returns the label of the candidate that decides (several when they tie to the tables' rounding) and its
    difference, whose interval and verdict are the claim's; an inconclusive label also names the candidates
    whose comparison is undecided for want of seeds (``"fedamp; undecided: fedavg, cfl"``). ``seeds``: how many
    seeds each candidate's comparison rests on; where several candidates beat X, the one named is among those
    compared over the most seeds (then the clearest) — the verdict is the same, and its evidence then covers a
    rerun wherever some comparison that decides it does.
    """
    if not candidates:
        raise ValueError("a ranking claim needs at least one other candidate")
    plain = one_kind({c: compare_with(c, LEVEL) for c in candidates})
    if all(d.decision is Verdict.REPRODUCED for d in plain.values()):
        return _deciding(plain, lambda d: d.low)  # the tightest: the smallest lower bound
    corrected = one_kind({c: compare_with(c, 1.0 - (1.0 - LEVEL) / len(candidates)) for c in candidates})
    if len(candidates) > 1:
        corrected = {c: dataclasses.replace(d, model=f"{d.model}; Bonferroni over {len(candidates)} candidates")
                     for c, d in corrected.items()}
    against = {c: d for c, d in corrected.items() if d.decision is Verdict.NOT_REPRODUCED}
    if against and seeds:
        most = max(seeds[c] for c in against)
        against = {c: d for c, d in against.items() if seeds[c] == most}
    # not reproduced: the clearest candidate above; inconclusive: the open one nearest to deciding against
    # (an undecided one only where every candidate is undecided)
    if against:
        return _deciding(against, lambda d: d.high)
    undecided = [str(c) for c, d in corrected.items() if d.short_of]
    open_ = {c: d for c, d in corrected.items() if d.decision is Verdict.INCONCLUSIVE and not d.short_of}
    if not open_:
        return _deciding({c: d for c, d in corrected.items() if d.short_of}, lambda d: d.high)
    label, difference = _deciding(open_, lambda d: d.high)
    return (f"{label}; undecided: {', '.join(undecided)}" if undecided else label), difference


def _deciding(differences: dict[Any, Difference], key: Callable[[Difference], float]) -> tuple[str, Difference]:
    """The candidate with the smallest ``key`` (every one of ``differences`` carries the claim's verdict) and
    its difference, labelled with the candidates whose ``key`` ties with it to the tables' rounding."""
    best = min(differences, key=lambda c: key(differences[c]))
    rounded = round(key(differences[best]), TABLE_DECIMALS)
    tied = [c for c, d in differences.items() if round(key(d), TABLE_DECIMALS) == rounded]
    return side_label(tied), differences[best]


def compare_with_best_other(records: pd.DataFrame, method: Any, others: Sequence[Any] | None = None,
                            scoring: Scoring = Scoring()) -> tuple[str, Difference]:
    """A ranking claim ("``method`` is the best") from ``records``: :func:`against_every_candidate` with
    ``others`` (``None``: every other side in ``records``) as the candidates, each compared with ``method`` on the
    seeds the two ran (:func:`on_shared_seeds`): a candidate with more seeds is judged with them, one with fewer
    without the others' extra seeds (the Bonferroni bound needs no common seeds). Where several candidates
    decide against ``method``, the one named was compared over the most seeds."""
    candidates = _candidates(scoring.means(records), method, others)
    spread = pooled_seed_spread(records, scoring)

    def compare_with(other: Any, level: float) -> Difference:
        return compare_shared(records, method, other, scoring, level=level, spread=spread)

    shared = {c: on_shared_seeds(records, [method, c], scoring.column)["seed"].nunique() for c in candidates}
    return against_every_candidate(compare_with, candidates, shared)


def uneven_seeds(records: pd.DataFrame, column: str = "method") -> str:
    """How many seeds each side of ``records`` ran, grouped (``"4 seeds: pdca, two_step; 1 seed: fedavg"``), or
    ``""`` when every side ran the same seeds."""
    seeds = records.groupby(column)["seed"].unique().map(lambda ran: tuple(sorted(ran)))
    if seeds.nunique() == 1:
        return ""
    counts = seeds.map(len)
    return "; ".join(f"{n} seed{'s' if n > 1 else ''}: " + ", ".join(str(side) for side in counts.index[counts == n])
                     for n in sorted(counts.unique(), reverse=True))


def best_other_per_group(records: pd.DataFrame, by: str, method: Any, others: Sequence[Any] | None = None,
                         scoring: Scoring = Scoring()) -> dict[str, Difference]:
    """:func:`compare_with_best_other` within each group of ``records`` by the column ``by``, labelled with the
    group and its deciding candidate (``"q=2 vs sfl"``): a ranking claim made at every setting."""
    parts = {}
    for value, group in records.groupby(by, sort=True):
        other, difference = compare_with_best_other(group, method, others, scoring)
        parts[f"{by}={value} vs {other}"] = difference
    return parts


def spread_within(records: pd.DataFrame, margin: float,
                  scoring: Scoring = Scoring()) -> tuple[Any, Any, Difference] | None:
    """A claim that a setting hardly matters ("accuracy varies by less than ``margin`` over k"): the side with the
    highest mean score against the one with the lowest, judged ``within(margin)`` on the same clients: ``(high,
    low, difference)``, or ``None`` with fewer than two sides. Both sides are picked by the data that compare them,
    so the measured spread is, if anything, an overestimate: the claim is judged conservatively."""
    ordered = scoring.means(records).sort_values(kind="stable").index
    if len(ordered) < 2:
        return None
    high, low = ordered[-1], ordered[0]
    return high, low, compare(records, high, low, scoring).within(margin)


__all__ = [
    "DECISIVE_SEEDS", "IDENTICAL_TOLERANCE", "LEVEL", "MIN_SEEDS", "TABLE_DECIMALS", "Comparison", "Difference",
    "PairedScores", "Scoring", "SeedSpread",
    "against_every_candidate", "at_least", "one_kind", "per_seed_differences", "pool_seed_spread",
    "pooled_seed_spread",
    "best_other", "best_other_per_group", "client_difference", "compare", "compare_per_group",
    "compare_shared", "compare_with_best_other", "difference_noise", "every", "held_out_difference", "on_shared_seeds",
    "seed_difference", "side_label",
    "spread_within", "tied_best", "uneven_seeds",
]
