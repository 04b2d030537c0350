"""Profiles of the "your method" notebook: a method of your own on the benchmark's protocol, beside some of the
papers' methods, over three seeds so that a verdict can be decided.

The protocol, settings and method options are the benchmark's (:mod:`gflkit.papers.benchmark`); only the
methods, settings and seeds differ. The notebook defines its method, registers it and places it on this grid
with :class:`~gflkit.papers.benchmark.Entrant` and :func:`~gflkit.papers.benchmark.entrant_runs`.
"""
from __future__ import annotations

import dataclasses
from typing import Sequence

from gflkit.experiment import Run
from gflkit.papers import benchmark
from gflkit.profiles import Profile
from gflkit.runtime import Runtime

#: The methods the new one is compared with: a local baseline, the global-model methods, a personalised one and
#: the graph-based personalised baseline it most resembles (pFedGraph).
BASELINES = ("local", "fedavg", "fedprox", "ditto", "pfedgraph")
#: Two label-shard skews and a Dirichlet split: three independent settings for the ranks.
SETTINGS = ("shards q=2", "shards q=10", "dirichlet α=0.5")
SEEDS = (0, 1, 2)
SECTIONS = benchmark.SECTIONS


def _on(profile: Profile, settings: tuple[str, ...] = SETTINGS) -> Profile:
    """The benchmark's ``profile`` with this notebook's methods, settings and seeds."""
    return dataclasses.replace(profile, seeds=SEEDS, sweep={"variants": BASELINES, "settings": settings})


PROFILES = {
    # scikit-learn's embedded digits, 20 clients, 4 rounds: the benchmark's smoke protocol, about a minute.
    "smoke": _on(benchmark.PROFILES["smoke"]),
    # Real MNIST (20,000 pooled samples), 100 clients, 20 rounds: the benchmark's ci protocol.
    "ci": _on(benchmark.PROFILES["ci"], ("shards q=2", "shards q=10", "dirichlet α=0.1")),
}


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The baselines' runs (``gflkit precompute your_method`` computes them ahead; the notebook adds its own
    method's, :func:`~gflkit.papers.benchmark.entrant_runs`): the benchmark's grid of this profile."""
    return benchmark.grids(params, sections, runtime)
