r"""FedCG's graph convolution over domain-specific parameters (Caporali et al., CVPR-W 2021, Eq. 5).

Each of the ``D`` domains is a node whose feature is its parameters of one layer,
:math:`\mathbf V^\ell \in \mathbb R^{D \times q}`; the GCN returns the parameters the layer uses,

.. math:: \hat{\mathbf V}^\ell = \sigma(\mathbf A \mathbf V^\ell \mathbf W^\ell),

so a gradient on one domain's parameters reaches every domain in proportion to :math:`\mathbf A`.

**Where the projection acts (our choice).** Eq. 5 writes :math:`\mathbf W \in \mathbb R^{q \times q'}` over
a layer's whole parameter vector; for the last 3×3 convolution of the LEAF CelebA CNN
(:math:`q = 32 \cdot 32 \cdot 9 + 32 = 9{,}248`) that is 85 M weights, for FEMNIST's last 5×5 convolution
(:math:`q = 51{,}264`) 2.6 G — far beyond a CPU client and larger than the whole network. Here the
layer's parameters are a matrix (one row per output filter: its weights and bias, ``p`` entries) and
:math:`\mathbf W` projects the filter axis, shared by all filters (the full :math:`q \times q` map
restricted to :math:`I_{C_{out}} \otimes \mathbf W_p`). ``reduction`` r > 1 makes it the paper's
bottleneck ``p → p / r → p``; with several GCN layers the first maps to the bottleneck, the last back.
A square ``W`` starts as the identity and a bottleneck as an orthogonal pair, so that at initialisation
the GCN only propagates.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

ACTIVATIONS = ("relu", "none")


def _widths(features: int, layers: int, reduction: int) -> list[int]:
    """The feature widths through the GCN: ``features``, bottleneck(s), back to ``features``."""
    if reduction == 1:
        return [features] * (layers + 1)
    bottleneck = max(features // reduction, 1)
    if layers == 1:
        return [features, bottleneck, features]  # one propagation, W = W_down W_up
    return [features] + [bottleneck] * (layers - 1) + [features]


class DomainGCN(nn.Module):
    r"""Eq. 5 over ``(D, rows, features)`` domain parameters: ``layers`` propagations by ``A``.

    Args:
        features: entries per row (per output filter) ``p``.
        layers: GCN layers (1 for CelebA, 2 for FEMNIST in the paper).
        reduction: bottleneck factor r of the projection (1: square ``W``; 16 in the paper's FEMNIST model).
        projection: whether there is a ``W`` at all (Table 3's "W" column); without it
            :math:`\hat V = \sigma(A^{layers} V)`.
        activation: ``"relu"`` (the paper's σ) or ``"none"`` (Table 3's ablation).
    """

    def __init__(self, features: int, layers: int = 1, reduction: int = 1, projection: bool = True,
                 activation: str = "relu"):
        super().__init__()
        if layers < 1:
            raise ValueError(f"a domain GCN needs at least one layer, got layers={layers}")
        if reduction < 1:
            raise ValueError(f"reduction must be >= 1 (1: no bottleneck), got {reduction}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; choose one of {list(ACTIVATIONS)}")
        self.layers, self.activation = layers, activation
        self.projections = nn.ModuleList()
        if projection:
            widths = _widths(features, layers, reduction)
            self.projections.extend(nn.Linear(a, b, bias=False) for a, b in zip(widths[:-1], widths[1:]))
            self._initialise(widths)

    def _initialise(self, widths: list[int]) -> None:
        with torch.no_grad():
            if len(set(widths)) == 1:
                for linear in self.projections:
                    linear.weight.copy_(torch.eye(widths[0]))
                return
            down = torch.empty(widths[1], widths[0])
            nn.init.orthogonal_(down)
            self.projections[0].weight.copy_(down)
            for linear in self.projections[1:-1]:
                linear.weight.copy_(torch.eye(linear.weight.shape[0]))
            self.projections[-1].weight.copy_(down.T)

    def _propagations(self) -> list[list[nn.Linear]]:
        """The projections applied after each propagation (a 1-layer bottleneck applies two)."""
        if not self.projections:
            return [[] for _ in range(self.layers)]
        if self.layers == 1:
            return [list(self.projections)]
        return [[linear] for linear in self.projections]

    def forward(self, values: Tensor, adjacency: Tensor) -> Tensor:
        """``values``: ``(D, rows, features)``; ``adjacency``: ``(D, D)``. Returns ``(D, rows, features)``."""
        h = values
        for projections in self._propagations():
            h = torch.einsum("ij,jrf->irf", adjacency, h)
            for linear in projections:
                h = linear(h)
            if self.activation == "relu":
                h = torch.relu(h)
        return h
