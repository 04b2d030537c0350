"""Profiles of the JGESR notebook (Table 1, Figures 3 and 4, the learned graph, the PDCA objective).

Paper settings (Sec. 5.1, NOTES.md): K = 20 clients, Dirichlet κ = 0.05 label split, 75/25 local split,
simple CNN, R = 30 rounds, E = 5 local epochs, SGD lr 0.01; α = 0.05, μ = β = γ = ρ = 1, ε = 1e-3;
channel noise s ∈ {0.1, 0.2}; Figure 4: PDCA at s = 0.1 with missing rates 0 … 0.1; 10 runs.
The paper gives no batch size (we use 32) and no iteration cap for the solvers (we use 1000).

**Evaluation protocol**: the paper measures "the local test accuracy for each client" without saying
which model; its subject is the quality of aggregation, so every method is scored with the model the
server holds for the client after aggregating the corrupted uploads (``"server"``: the restored
:math:`\\psi_k` for PDCA / Two-step, the global model for FedAvg / FedProx, the cluster model for CFL,
the personalised cloud model for FedAMP / pFedGraph). The ``"local"`` scores (each client's model
after its local training of the round, before it is uploaded) are recorded beside and shown where
they differ by more than a point.
"""
from __future__ import annotations

from gflkit.profiles import Profile

METHODS = ("pdca", "two_step", "fedavg", "fedprox", "cfl", "fedamp", "pfedgraph")
NOISE_LEVELS = (0.1, 0.2)
BASE = dict(num_clients=20, model="simple_cnn", partition="dirichlet", partition_options={"alpha": 0.05},
            test_ratio=0.25, batch_size=32, lr=0.01, evaluate="server")
# CIFAR-10 rows of Table 1: the same setting on the other dataset (absent offline here).
EXTRA_DATASETS = {"cifar10": dict(dataset="cifar10")}


PROFILES = {
    # scikit-learn's embedded digits, 4 rounds: the whole notebook in about a minute.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="digits", rounds=4, local_epochs=1, batch_size=16, lr=0.05),
        seeds=(0,),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": (0.0, 0.1), "extra_datasets": ()},
    ),
    # Real MNIST (20,000 pooled samples), 15 rounds of 2 local epochs, one seed: about 15 minutes on 2 cores.
    "ci": Profile(
        "ci",
        base=dict(BASE, dataset="mnist", max_samples=20_000, rounds=15, local_epochs=2),
        seeds=(0,),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": (0.0, 0.1), "extra_datasets": ()},
    ),
    # The paper's settings; the CIFAR-10 rows run when its files are present.
    "paper": Profile(
        "paper",
        base=dict(BASE, dataset="mnist", rounds=30, local_epochs=5),
        seeds=tuple(range(10)),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": tuple(round(0.01 * i, 2) for i in range(11)),
               "extra_datasets": ("cifar10",)},
    ),
}
