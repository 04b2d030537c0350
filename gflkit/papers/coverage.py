r"""How often the claims' 95 % intervals cover the truth: a simulation of the two-level noise model.

The intervals of :mod:`gflkit.papers.comparison` are only as good as their coverage. This module draws
synthetic paired differences from the model those intervals assume, with a known true difference
:math:`\Delta`,

.. math::

    d_{s,k} = \Delta + u_s + e_{s,k}, \qquad u_s \sim \mathcal N(0, \sigma_u^2), \quad
    e_{s,k} \sim \text{client effect of variance } \sigma_e^2,

for :math:`S` seeds (a seed redraws the partition, so each seed has its own :math:`K` clients) and counts
how often the interval that :meth:`~gflkit.papers.comparison.PairedScores.difference` returns contains the
truth. With two or more seeds the truth is :math:`\Delta`, what a rerun would average to. With one seed no
interval can know :math:`\sigma_u`, so the one-seed interval only claims :math:`\Delta + u_1`, the
difference on the seed that ran (client sampling only); :func:`coverage` measures that claim, and also how
often the one-seed interval happens to contain :math:`\Delta` — the reason claims need several seeds.

The client effect is ``"normal"`` or ``"skewed"`` (a centred exponential: a few clients far below the rest,
like the clients a restoring server leaves at 0 % in JGESR). :func:`percentile_bootstrap_coverage` measures
the percentile bootstrap over clients that the one-seed model replaced, on the same draws.

**The decision rule under lopsided seed effects** (:func:`rule_errors`). A seed redraws the partition, and
the committed grids show single bad seeds, so the seed effect :math:`u_s` is drawn here from a
:data:`SeedEffect`: ``"normal"``; ``"skewed"`` (a centred exponential, a long tail of bad seeds);
``"contaminated"`` (normal, plus with probability ``bad_rate`` a bad seed ``bad_shift`` standard deviations
away, centred so that the rerun average is the truth); or an array of standardised seed residuals to
resample (:func:`committed_seed_residuals`: the committed grids' own). A grid of equally good methods run on
the same seeds, each with its own seed effects (or only one of them lopsided, the others normal), is decided
pair by pair by :func:`~gflkit.papers.comparison.seed_difference` with the spread pooled over the grid's pairs
(:func:`~gflkit.papers.comparison.pool_seed_spread`); the errors that produce a verdict are the shares of
draws whose interval lies wholly above 0 (a false "reproduced") or wholly below it (a false "not
reproduced"), each of which the rule must keep at or below 2.5 %.
"""
from __future__ import annotations

from typing import Any, Iterable, Literal, Union

import numpy as np
import pandas as pd

from gflkit.papers.comparison import (DECISIVE_SEEDS, PairedScores, Scoring, per_seed_differences, pool_seed_spread,
                                      seed_difference)

ClientEffect = Literal["normal", "skewed"]
#: how seed effects are drawn: a named distribution, or standardised residuals to resample
SeedEffect = Union[Literal["normal", "skewed", "contaminated"], np.ndarray]


def _client_effects(rng: np.random.Generator, shape: tuple[int, ...], sd: float, kind: ClientEffect) -> np.ndarray:
    if kind == "normal":
        return rng.normal(0.0, sd, shape)
    if kind == "skewed":
        return sd * (1.0 - rng.exponential(1.0, shape))  # mean 0, sd `sd`, a long tail of low clients
    raise ValueError(f"client_effect must be 'normal' or 'skewed', got {kind!r}")


def _check(seeds: int, clients: int, draws: int, seed_sd: float, client_sd: float) -> None:
    for name, value, minimum in (("seeds", seeds, 1), ("clients", clients, 2), ("draws", draws, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    if not (seed_sd >= 0 and client_sd > 0):
        raise ValueError(f"seed_sd must be ≥ 0 and client_sd > 0, got {seed_sd!r} and {client_sd!r}")


def simulate(seeds: int, clients: int, draws: int, *, delta: float = 1.0, seed_sd: float = 0.3,
             client_sd: float = 3.0, client_effect: ClientEffect = "normal",
             rng_seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``draws`` synthetic comparisons: the per-client differences, shape ``(draws, seeds, clients)``, and each
    draw's seed effects, shape ``(draws, seeds)``, from ``numpy.random.default_rng(rng_seed)``."""
    _check(seeds, clients, draws, seed_sd, client_sd)
    rng = np.random.default_rng(rng_seed)
    seed_effects = rng.normal(0.0, seed_sd, (draws, seeds))
    differences = delta + seed_effects[:, :, None] + _client_effects(rng, (draws, seeds, clients), client_sd,
                                                                     client_effect)
    return differences, seed_effects


def coverage(seeds: int, clients: int, draws: int = 2000, *, delta: float = 1.0, seed_sd: float = 0.3,
             client_sd: float = 3.0, client_effect: ClientEffect = "normal", rng_seed: int = 0) -> dict[str, float]:
    """The share of ``draws`` simulated comparisons (:func:`simulate`) whose interval from
    :meth:`PairedScores.difference <gflkit.papers.comparison.PairedScores.difference>` contains the truth.

    Returns ``covered`` (the truth the interval claims: :math:`\\Delta` from two seeds, :math:`\\Delta + u_1`
    with one), ``covered_delta`` (always :math:`\\Delta`) and ``mean_width`` (in the differences' unit).
    """
    differences, seed_effects = simulate(seeds, clients, draws, delta=delta, seed_sd=seed_sd, client_sd=client_sd,
                                         client_effect=client_effect, rng_seed=rng_seed)
    seed_ids = np.repeat(np.arange(seeds), clients)
    claimed = delta + (seed_effects[:, 0] if seeds == 1 else 0.0)
    low, high = np.empty(draws), np.empty(draws)
    for i, draw in enumerate(differences):
        difference = PairedScores(draw.ravel(), np.zeros(draw.size), seed_ids).difference()
        low[i], high[i] = difference.low, difference.high
    claimed = np.broadcast_to(claimed, (draws,))
    return {"covered": float(np.mean((low <= claimed) & (claimed <= high))),
            "covered_delta": float(np.mean((low <= delta) & (delta <= high))),
            "mean_width": float(np.mean(high - low))}


def percentile_bootstrap_coverage(clients: int, draws: int = 2000, *, resamples: int = 2000, client_sd: float = 3.0,
                                  client_effect: ClientEffect = "normal", rng_seed: int = 0) -> float:
    """How often the 95 % percentile bootstrap of the mean over ``clients`` one-seed differences covers the
    seed's true difference (the interval the one-seed model used before Student's t)."""
    differences, seed_effects = simulate(1, clients, draws, seed_sd=0.0, client_sd=client_sd,
                                         client_effect=client_effect, rng_seed=rng_seed)
    rng = np.random.default_rng(rng_seed + 1)
    covered = 0
    for draw in differences[:, 0, :]:
        means = draw[rng.integers(0, clients, (resamples, clients))].mean(axis=1)
        low, high = np.quantile(means, [0.025, 0.975])
        covered += low <= 1.0 <= high
    return covered / draws


def coverage_table(seeds: tuple[int, ...] = (1, 3, 5), clients: tuple[int, ...] = (10, 20, 100), draws: int = 2000,
                   client_effect: ClientEffect = "normal", **options: float) -> pd.DataFrame:
    """:func:`coverage` for every (seeds, clients) pair: one row each, with the number of draws."""
    rows = [{"seeds": s, "clients": k, "draws": draws, "client_effect": client_effect,
             **coverage(s, k, draws, client_effect=client_effect, **options)} for s in seeds for k in clients]
    return pd.DataFrame(rows)


def interval_coverage(draws: int = 2000) -> pd.DataFrame:
    """:func:`coverage_table` on 1, 2, 3 and 5 seeds of 10, 20 and 100 clients, normal clients then skewed ones:
    the table the noise-model page shows (``docs/results/interval_coverage.csv``)."""
    return pd.concat([coverage_table(seeds=(1, 2, 3, 5), clients=(10, 20, 100), draws=draws, client_effect=effect)
                      for effect in ("normal", "skewed")], ignore_index=True)


def _seed_effects(rng: np.random.Generator, shape: tuple[int, ...], sd: float, kind: SeedEffect,
                  bad_rate: float, bad_shift: float) -> np.ndarray:
    """Seed effects of mean 0: ``sd`` times a standardised draw of ``kind``."""
    if isinstance(kind, np.ndarray):
        pool = (kind - kind.mean()) / kind.std()
        # a smoothed bootstrap: resample the residuals, jittered so that few of them still give a continuum
        jitter = 0.25 * rng.normal(0.0, 1.0, shape)
        return sd * (rng.choice(pool, shape) + jitter) / np.sqrt(1.0 + 0.25 ** 2)
    if kind == "normal":
        return rng.normal(0.0, sd, shape)
    if kind == "skewed":
        return sd * (1.0 - rng.exponential(1.0, shape))
    if kind == "contaminated":
        bad = rng.random(shape) < bad_rate
        return sd * (rng.normal(0.0, 1.0, shape) + bad_shift * (bad - bad_rate))
    raise ValueError(f"seed_effect must be 'normal', 'skewed', 'contaminated' or an array of residuals, got {kind!r}")


def rule_errors(seeds: int, draws: int = 4000, *, methods: int = 4, clients: int = 20, seed_sd: float = 2.0,
                client_sd: float = 3.0, seed_effect: SeedEffect = "normal", bad_rate: float = 0.2,
                bad_shift: float = 6.0, one_method: bool = False, pooled: bool = True,
                rng_seed: int = 0) -> dict[str, float]:
    """How often the decision rule errs on a grid of ``methods`` methods that are all equally good, run on the
    same ``seeds`` seeds of ``clients`` clients: each method's per-seed effect is drawn from ``seed_effect``
    (see the module docstring; ``one_method``: the first method's only, the others' normal, as when one method
    breaks on some partitions), every pair of methods is a comparison of the grid, and the first pair is judged
    with the spread pooled over all of them.

    Returns ``false_above`` (its interval lies wholly above 0), ``false_below`` (wholly below), ``covered`` and
    ``mean_width``; ``pooled=False`` decides with the pair's own spread only (the plain Student t over seeds).
    """
    _check(seeds, clients, draws, seed_sd, client_sd)
    if seeds < DECISIVE_SEEDS or methods < 2:
        raise ValueError(f"rule_errors needs seeds ≥ {DECISIVE_SEEDS} and methods ≥ 2, got {seeds}, {methods}")
    rng = np.random.default_rng(rng_seed)
    effects = _seed_effects(rng, (draws, methods, seeds), seed_sd, seed_effect, bad_rate, bad_shift)
    if one_method:
        effects[:, 1:] = rng.normal(0.0, seed_sd, (draws, methods - 1, seeds))
    scores = effects + rng.normal(0.0, client_sd, (draws, methods, seeds, clients)).mean(axis=3)
    pairs = [(a, b) for a in range(methods) for b in range(a + 1, methods)]
    low, high = np.empty(draws), np.empty(draws)
    for i, grid in enumerate(scores):
        spread = pool_seed_spread([grid[a] - grid[b] for a, b in pairs]) if pooled else None
        difference = seed_difference(grid[0], grid[1], spread=spread)
        low[i], high[i] = difference.low, difference.high
    return {"false_above": float(np.mean(low > 0)), "false_below": float(np.mean(high < 0)),
            "covered": float(np.mean((low <= 0) & (0 <= high))), "mean_width": float(np.mean(high - low))}


def committed_seed_residuals(grids: Iterable[tuple[pd.DataFrame, Scoring]]) -> np.ndarray:
    """The seed effects the committed grids show, standardised: every pair of sides' per-seed differences
    (:func:`~gflkit.papers.comparison.per_seed_differences`, pairs with at least three seeds) minus their mean,
    divided by the grid's pooled spread — so a pair with a bad seed keeps its lopsided residuals, large beside
    the grid's other pairs. ``grids``: each grid's records (one setting) and how it is scored."""
    residuals = []
    for records, scoring in grids:
        differences = [d for d in per_seed_differences(records, scoring).values() if len(d) >= DECISIVE_SEEDS]
        spread = pool_seed_spread(differences)
        if spread is None or spread.sd == 0:
            continue
        residuals.extend((d - d.mean()) / spread.sd for d in differences)
    if not residuals:
        raise ValueError("no committed grid has a pair of sides with at least three seeds and some spread")
    return np.concatenate(residuals)


#: The committed paper-budget grids whose seed effects :func:`committed_seed_residuals` reads: per-client CSVs
#: of ``docs/results`` (several files are concatenated), the rows kept (a pandas query, or None), the columns
#: that name one grid, and how the grid is scored.
COMMITTED_GRIDS = (
    (("jgesr_paper1/table1_clients.csv",), None, ("s",), Scoring()),
    (("fedska_paper1/table1_clients.csv",), None, ("q",), Scoring()),
    (("fedska_paper1/table3_clients.csv",), None, ("q",), Scoring(column="setting")),
    (("fedvgae_paper/clients.csv",), "section in ['table3', 'table4']", ("section", "dataset"), Scoring(value="auc")),
    (("fedvgae_paper/clients.csv",), "task == 'link_prediction' and section not in ['table3', 'table4']",
     ("section", "dataset", "method"), Scoring(value="auc", column="setting")),
    (("benchmark_paper1/clients.csv", "benchmark_paper/clients_seed1.csv", "benchmark_paper/clients_seed2.csv"),
     None, ("setting",), Scoring(value="accuracy_own", column="variant")),
)


def committed_grids(results: Any) -> list[tuple[pd.DataFrame, Scoring]]:
    """The grids of :data:`COMMITTED_GRIDS` under the results folder ``results`` (``docs/results``), one frame
    per grid, for :func:`committed_seed_residuals`."""
    from pathlib import Path

    grids = []
    for files, rows, keys, scoring in COMMITTED_GRIDS:
        records = pd.concat([pd.read_csv(Path(results) / name) for name in files], ignore_index=True)
        records = records if rows is None else records.query(rows)
        grids.extend((group, scoring) for _, group in records.groupby(list(keys), sort=True))
    return grids


#: The seed effects :func:`rule_error_table` simulates by default: normal, skewed, and bad seeds in every
#: method or in one method only (6 sd away in 1 seed of 5, as SFL's `ci` seed 2; 12 sd away in 1 of 10).
DEFAULT_EFFECTS = {
    "normal": {"seed_effect": "normal"},
    "skewed": {"seed_effect": "skewed"},
    "1 bad seed in 5, 6 sd away": {"seed_effect": "contaminated", "bad_rate": 0.2, "bad_shift": 6.0},
    "1 bad seed in 10, 12 sd away": {"seed_effect": "contaminated", "bad_rate": 0.1, "bad_shift": 12.0},
    "one method: 1 bad seed in 5, 6 sd away": {"seed_effect": "contaminated", "bad_rate": 0.2, "bad_shift": 6.0,
                                               "one_method": True},
    "one method: 1 bad seed in 10, 12 sd away": {"seed_effect": "contaminated", "bad_rate": 0.1, "bad_shift": 12.0,
                                                 "one_method": True},
}


def rule_error_table(seeds: tuple[int, ...] = (3, 5, 8), draws: int = 4000,
                     effects: dict[str, dict[str, Any]] | None = None, **options: Any) -> pd.DataFrame:
    """:func:`rule_errors` with the pooled rule and with the plain t for each of ``seeds`` and each named set of
    seed-effect options in ``effects`` (default :data:`DEFAULT_EFFECTS`): one row each."""
    effects = effects or DEFAULT_EFFECTS
    rows = []
    for name, effect in effects.items():
        for s in seeds:
            pooled, plain = (rule_errors(s, draws, pooled=p, **effect, **options) for p in (True, False))
            rows.append({"seed effects": name, "seeds": s, "draws": draws, **pooled,
                         "plain t false above": plain["false_above"], "plain t false below": plain["false_below"],
                         "plain t mean width": plain["mean_width"]})
    return pd.DataFrame(rows)


def committed_rule_errors(results: Any, draws: int = 4000) -> pd.DataFrame:
    """:func:`rule_error_table` for :data:`DEFAULT_EFFECTS` and the committed grids' own seed effects
    (:func:`committed_seed_residuals` of the grids under ``results``): the table docs/papers/noise_model.md shows,
    written to ``docs/results/rule_errors.csv`` by ``python -m gflkit.papers.coverage``."""
    effects = {**DEFAULT_EFFECTS,
               "committed grids, resampled": {"seed_effect": committed_seed_residuals(committed_grids(results))}}
    return rule_error_table(seeds=(3, 5, 8), draws=draws, effects=effects)


__all__ = ["COMMITTED_GRIDS", "DEFAULT_EFFECTS", "SeedEffect", "committed_grids", "committed_rule_errors",
           "committed_seed_residuals", "coverage", "coverage_table", "interval_coverage", "percentile_bootstrap_coverage",
           "rule_error_table", "rule_errors", "simulate"]


if __name__ == "__main__":
    from pathlib import Path

    RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
    committed_rule_errors(RESULTS).to_csv(RESULTS / "rule_errors.csv", index=False, float_format="%.4f")
    interval_coverage().to_csv(RESULTS / "interval_coverage.csv", index=False, float_format="%.4f")
