r"""SFL*'s client-graph learner: the MTGNN graph constructor (Wu et al., KDD 2020) fitted to the
clients' model distances, as the SFL authors' code does it (``GraphConstructor.py``, ``generate_adj``).

Two node-embedding tables :math:`E_1, E_2 \in \mathbb R^{K \times h}` give a directed graph

.. math::
    M_1 = \tanh(\alpha\, E_1 \Theta_1), \quad M_2 = \tanh(\alpha\, E_2 \Theta_2), \quad
    A = \mathrm{ReLU}\big(\tanh(\alpha\,(M_1 M_2^\top - M_2 M_1^\top))\big)

(the antisymmetric term makes at most one of :math:`A_{ij}, A_{ji}` non-zero, and the diagonal zero).
A fresh constructor is fitted for a few SGD steps so that its row-L2-normalised output matches the
row-L2-normalised target :math:`T` (MSE); the result keeps its ``k`` largest entries per row and is
row-normalised (:func:`learn_client_graph`).

The target. The authors' code fits :math:`A` to the pairwise Euclidean *distances* between the
flattened client models, :math:`T_{ij} = \lVert v_i - v_j \rVert_2` (``target="distance"``), so the
top-``k`` edges link each client to the clients *farthest* from it. The paper asks for a graph that is
"sparse while preserving proximity relationship among participants"; ``target="proximity"`` fits
:math:`T_{ij} = \max D - D_{ij}` (:math:`i \ne j`; 0 on the diagonal, which the constructor cannot
produce) instead, so close clients get the large weights. The default is the
paper's (proximity); the code's is one option away.

Shared with FedSKA's learner (:mod:`gflkit.graphs.structure_learner`): the per-row top-k
(:func:`~gflkit.graphs.adjacency.knn_sparsify`) and the normalisations of :mod:`gflkit.graphs.adjacency`.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gflkit.graphs.adjacency import knn_sparsify, row_normalize

TARGETS = ("proximity", "distance")


class GraphConstructor(nn.Module):
    """MTGNN's graph-learning layer over ``num_nodes`` nodes with embedding size ``dim`` and saturation ``alpha``."""

    def __init__(self, num_nodes: int, dim: int = 40, alpha: float = 3.0):
        super().__init__()
        self.alpha = alpha
        self.source = nn.Embedding(num_nodes, dim)
        self.target = nn.Embedding(num_nodes, dim)
        self.source_map = nn.Linear(dim, dim)
        self.target_map = nn.Linear(dim, dim)

    def forward(self) -> Tensor:
        """The dense ``K × K`` adjacency :math:`A` (non-negative, zero diagonal, one direction per pair)."""
        m1 = torch.tanh(self.alpha * self.source_map(self.source.weight))
        m2 = torch.tanh(self.alpha * self.target_map(self.target.weight))
        return torch.relu(torch.tanh(self.alpha * (m1 @ m2.T - m2 @ m1.T)))


def distance_target(models: Tensor, target: str = "proximity") -> Tensor:
    """The fitting target :math:`T` for client models ``models`` (``K × d``), rows L2-normalised."""
    if target not in TARGETS:
        raise ValueError(f"target must be one of {list(TARGETS)}, got {target!r}")
    distances = torch.cdist(models, models, compute_mode="donot_use_mm_for_euclid_dist")  # exact zero diagonal
    if target == "proximity":  # the constructor's diagonal is 0: so is the target's, or it dominates every row
        distances = (distances.max() - distances).fill_diagonal_(0.0)
    return F.normalize(distances, dim=1)


class LearnedGraph(NamedTuple):
    """A learned client graph: ``adjacency`` (``K × K``, top-k, row-normalised) and the fit's first and
    last loss (a fit that did not move is visible: ``fit_loss[1] ≈ fit_loss[0]``)."""

    adjacency: Tensor
    fit_loss: tuple[float, float]


def learn_client_graph(
    models: Tensor,
    k: int = 30,
    dim: int = 40,
    alpha: float = 3.0,
    steps: int = 10,
    lr: float = 0.01,
    weight_decay: float = 1e-4,
    target: str = "proximity",
    seed: int = 0,
) -> LearnedGraph:
    r"""Fit a fresh :class:`GraphConstructor` (initialised from ``seed``) to :func:`distance_target` of
    ``models`` for ``steps`` SGD steps (``lr``, ``weight_decay``), keep each row's ``min(k, K)`` largest
    entries and row-normalise. Defaults: the SFL authors' ``k=30, α=3, node_dim=40, gc_epoch=10`` and
    their model learning rate and weight decay (0.01, 1e-4), which the constructor's optimiser reuses.
    """
    num_nodes = models.shape[0]
    goal = distance_target(models.detach().float(), target)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        constructor = GraphConstructor(num_nodes, dim, alpha).to(models.device)
    optimizer = torch.optim.SGD(constructor.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    with torch.enable_grad():
        for _ in range(steps):
            optimizer.zero_grad()
            loss = F.mse_loss(F.normalize(constructor(), dim=1), goal)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    with torch.no_grad():
        dense = constructor()
        final = float(F.mse_loss(F.normalize(dense, dim=1), goal))
        adjacency = row_normalize(knn_sparsify(dense, min(k, num_nodes), keep_self=False))
    return LearnedGraph(adjacency, (losses[0] if losses else final, final))
