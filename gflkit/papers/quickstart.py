"""Profiles of the quickstart notebook: Local vs FedAvg vs FedProx on label shards.

The paper numbers it is compared with are FedSKA's Table 1 (MNIST, 100 clients, MCLR), whose
Separate/FedAvg/FedProx columns are exactly these three methods; so every profile scores them with
FedSKA's protocol (:data:`gflkit.papers.fedska.PROTOCOL`): FedAvg and FedProx on the global model,
Local on each client's model after its local training.
"""
from __future__ import annotations

from typing import Any, Sequence

from gflkit.experiment import Run
from gflkit.papers.fedska import PROTOCOL
from gflkit.profiles import Profile, chosen_sections

METHODS = ("local", "fedavg", "fedprox")
SHARDS = (2, 5, 10)
SECTIONS = ("shards",)

PROFILES = {
    # digits ships inside scikit-learn: no files, no network, about a minute on a laptop.
    "smoke": Profile(
        "smoke",
        base=dict(dataset="digits", num_clients=20, model="mclr", partition="shards", rounds=15,
                  batch_size=16, lr=0.05, eval_every=1),
        seeds=(0,),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
    # Real MNIST with the paper's 100 clients, fewer rounds and one seed: minutes on 2 CPU cores.
    "ci": Profile(
        "ci",
        base=dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", rounds=10,
                  batch_size=32, lr=0.01, eval_every=1),
        seeds=(0,),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
    # FedSKA's MNIST setting: T=200, E=1, batch 32, lr 0.01, 80/20 per-client split; 3 seeds.
    "paper": Profile(
        "paper",
        base=dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", rounds=200,
                  batch_size=32, lr=0.01, eval_every=5),
        seeds=(0, 1, 2),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
}


def grids(params: Profile, sections: Sequence[str] | None = None, data_root: Any = None) -> dict[str, list[Run]]:
    """The notebook's runs (``gflkit precompute quickstart``): every method at every shard setting ``q``
    (label ``q``) and seed. ``data_root`` is unused."""
    runs = [Run(params.config(method=method, partition_options={"shards_per_client": q}, seed=seed), {"q": q})
            for q in params.sweep["shards"] for method in params.sweep["methods"] for seed in params.seeds]
    return {name: runs for name in chosen_sections(sections, SECTIONS)}
