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
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pandas as pd

from gflkit.papers.comparison import PairedScores

ClientEffect = Literal["normal", "skewed"]


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


__all__ = ["coverage", "coverage_table", "percentile_bootstrap_coverage", "simulate"]
