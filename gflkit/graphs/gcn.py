"""A dense GCN over a given (already normalised) adjacency matrix.

PyG's ``DenseGCNConv`` re-normalises the adjacency it receives (adding self-loops and applying
:math:`D^{-1/2}(A+I)D^{-1/2}`). The graphs learned here are normalised by their own post-processor
(FedSKA Eq. 6) and must be used as they are, hence this small layer.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


class DenseGraphConv(nn.Module):
    r"""One propagation step :math:`H' = S\,(H W + b)` with a dense ``K × K`` adjacency :math:`S`."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.linear = nn.Linear(in_dim, out_dim)

    def forward(self, features: Tensor, adjacency: Tensor) -> Tensor:
        return adjacency @ self.linear(features)


class DenseGCN(nn.Module):
    r"""``layers`` stacked :class:`DenseGraphConv` with ReLU between them (none after the last).

    .. math:: H^{(l+1)} = \mathrm{ReLU}\big(S H^{(l)} W^{(l)}\big), \qquad
              \mathrm{out} = S H^{(L-1)} W^{(L-1)}
    """

    def __init__(self, in_dim: int, hidden_dim: int, out_dim: int, layers: int):
        super().__init__()
        if layers < 1:
            raise ValueError(f"a GCN needs at least one layer, got layers={layers}")
        dims = [in_dim] + [hidden_dim] * (layers - 1) + [out_dim]
        self.convs = nn.ModuleList(DenseGraphConv(a, b) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, features: Tensor, adjacency: Tensor) -> Tensor:
        h = features
        for i, conv in enumerate(self.convs):
            h = conv(h, adjacency)
            if i < len(self.convs) - 1:
                h = torch.relu(h)
        return h
