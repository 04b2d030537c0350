"""Profiles of the FedVGAE notebook (Tables 3–8, Figure 3, the partition figure).

Paper settings (Sec. 4, NOTES.md): each graph cut into 10 subgraph clients, 100 rounds of 5 local
iterations, averages over 5 runs; VGAE encoder (shared GCN layer + μ / log σ layers), inner-product
decoder, 2-layer MLP readout for node classification; λ = 0.8, φ = 0.5. The paper does not name its
partitioner, optimiser or learning rate: we cut with Louvain (FedSage's and OpenFGL's default for
subgraph FL), and train with SGD, lr 0.1 and momentum 0.9 (full-batch steps on a client's subgraph).
"""
from __future__ import annotations

from gflkit.profiles import Profile

METHODS = ("local", "fedavg", "fedprox", "moon", "gcfl", "fedsage", "fedpub", "fedvgae")
BASE = dict(num_clients=10, partition="louvain", model="vgae", task="link_prediction", lr=0.1, momentum=0.9)
# Ablations and sweeps of Tables 5–8: FedVGAE's options per setting name.
SHARE = {"encoder": {"share": "encoder"}, "all": {"share": "all"}}
COMPONENTS = {"full": {}, "without_contrastive": {"lam": 0.0}, "without_finetuning": {"finetune": False},
              "without_both": {"lam": 0.0, "finetune": False}}

PROFILES = {
    # Cora (offline copy), 3 rounds: the whole notebook in about two minutes.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="cora", rounds=3, local_epochs=2),
        seeds=(0,),
        sweep={"methods": METHODS, "link_datasets": ("cora",), "node_datasets": ("cora",),
               "ablation_dataset": ("cora",), "lambdas": (0.1, 0.8), "phis": (0.1, 0.5)},
        # NeighGen pre-training dominates a 3-round run: 3 generator rounds, at a rate high enough that
        # neighbours are still generated (with the published 20 rounds at 1e-3, fewer rounds generate none).
        method_options={"fedsage": {"gen_rounds": 3, "gen_lr": 0.01}},
    ),
    # The three graphs complete offline, 30 rounds of the paper's 5 local iterations, one run.
    "ci": Profile(
        "ci",
        base=dict(BASE, dataset="cora", rounds=30, local_epochs=5),
        seeds=(0,),
        sweep={"methods": METHODS, "link_datasets": ("cora", "citeseer", "polblogs"),
               "node_datasets": ("cora", "citeseer"), "ablation_dataset": ("cora",),
               "lambdas": (0.1, 0.8, 5.0), "phis": (0.1, 0.5, 0.9)},
    ),
    # The paper's settings; datasets whose files are absent are skipped with a message.
    "paper": Profile(
        "paper",
        base=dict(BASE, dataset="cora", rounds=100, local_epochs=5),
        seeds=(0, 1, 2, 3, 4),
        sweep={"methods": METHODS, "link_datasets": ("cora_full", "cora", "pubmed", "citeseer", "polblogs"),
               "node_datasets": ("cora", "pubmed", "citeseer", "flickr"), "ablation_dataset": ("cora",),
               "lambdas": (0.1, 0.5, 0.8, 1.0, 2.0, 5.0, 10.0), "phis": (0.1, 0.2, 0.3, 0.5, 0.8, 0.9)},
    ),
}
