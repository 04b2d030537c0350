"""Profiles of the ``flower`` notebook: SFL in Flower's simulation against gflkit's engine.

The setting is the quickstart's (label shards, MCLR), with SFL scored under FedSKA's protocol for it
(``"local"``: each client's personalised model after its local training; the ``"server"`` protocol is
recorded beside it).
"""
from __future__ import annotations

from gflkit.profiles import Profile

#: FedSKA's MNIST setting with SFL under the ``local`` protocol (each profile changes the size).
MNIST = dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", partition_options={"shards_per_client": 2},
             rounds=10, batch_size=32, lr=0.01, method="sfl", evaluate="local")
SWEEP = {"methods": ("sfl",)}

PROFILES = {
    # digits ships inside scikit-learn: no files, no network; seconds on a laptop.
    "smoke": Profile("smoke", base=dict(MNIST, dataset="digits", num_clients=20, batch_size=16, lr=0.05), sweep=SWEEP),
    # Real MNIST with FedSKA's 100 clients, 10 rounds: minutes on 2 CPU cores (both runs).
    "ci": Profile("ci", base=MNIST, sweep=SWEEP),
    # FedSKA's MNIST setting, 200 rounds, three seeds.
    "paper": Profile("paper", base=dict(MNIST, rounds=200, eval_every=5), seeds=(0, 1, 2), sweep=SWEEP),
}
