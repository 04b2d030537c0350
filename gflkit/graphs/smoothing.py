r"""Graph-smooth aggregation of client models (JGESR, Eq. 6).

Given an inter-client graph :math:`W` with Laplacian :math:`L = \mathrm{diag}(W\mathbf 1) - W`, client
weights :math:`Z = \mathrm{diag}(\zeta)` and received model rows :math:`\tilde X` (``K × d``),

.. math:: \Psi = \arg\min_\Psi \frac{\mu}{2}\lVert M \odot \Psi - \tilde X\rVert_Z^2
          + \alpha\, \mathrm{tr}(\Psi^\top L \Psi)
          \;\overset{M = \mathbf 1}{=}\; \Big(Z + \frac{2\alpha}{\mu} L\Big)^{-1} Z \tilde X ,

a graph low-pass filter of the rows. With a mask :math:`M` of received entries every column ``j`` has
its own system :math:`(\mu Z \mathrm{diag}(m_j) + 2\alpha L)\,\psi_j = \mu Z \tilde x_j`.
"""
from __future__ import annotations

import torch
from torch import Tensor

# A Tikhonov weight, negligible against any real entry, that keeps a column's system solvable when a
# client is isolated in the graph and lost that entry: the entry is then restored as 0 (zero-filled).
RIDGE = 1e-9
MASKED_COLUMNS_PER_SOLVE = 4096


def laplacian(adjacency: Tensor) -> Tensor:
    r"""The combinatorial Laplacian :math:`L = \mathrm{diag}(W\mathbf 1) - W` of a symmetric ``K × K`` graph."""
    return torch.diag(adjacency.sum(dim=1)) - adjacency


def graph_filter(
    received: Tensor,
    adjacency: Tensor,
    weights: Tensor,
    alpha: float,
    mu: float,
    mask: Tensor | None = None,
) -> Tensor:
    r"""The minimiser of Eq. (6): received rows smoothed over the graph ``adjacency``.

    Args:
        received: :math:`\tilde X`, ``K × d`` (lost entries as zeros).
        adjacency: symmetric, non-negative ``K × K`` graph :math:`W`.
        weights: :math:`\zeta`, the clients' weights (``K``).
        alpha, mu: the smoothness and fidelity weights (:math:`\alpha > 0, \mu > 0`).
        mask: boolean ``K × d`` of received entries, or ``None`` when every entry arrived.

    Returns:
        :math:`\Psi`, ``K × d``, in the dtype of ``received``. As :math:`\alpha/\mu \to \infty` on a graph of
        disjoint connected blocks with equal weights, every row becomes its block's mean (the paper's Eq. 7).
    """
    if not (alpha > 0 and mu > 0):
        raise ValueError(f"graph_filter needs alpha > 0 and mu > 0, got alpha={alpha}, mu={mu}")
    system = mu * torch.diag(weights).double() + 2.0 * alpha * laplacian(adjacency.double())
    scale = mu * weights.double()[:, None]
    if mask is None:
        return torch.linalg.solve(system, scale * received.double()).to(received.dtype)
    restored = torch.empty_like(received)
    eye = torch.eye(len(weights), dtype=torch.float64, device=received.device)
    for start in range(0, received.shape[1], MASKED_COLUMNS_PER_SOLVE):
        columns = slice(start, start + MASKED_COLUMNS_PER_SOLVE)
        observed = mask[:, columns].T.double()  # (columns, K)
        systems = 2.0 * alpha * laplacian(adjacency.double()) + RIDGE * eye + torch.diag_embed(observed * scale.T)
        rhs = (scale * received[:, columns].double() * mask[:, columns]).T.unsqueeze(-1)
        restored[:, columns] = torch.linalg.solve(systems, rhs).squeeze(-1).T.to(received.dtype)
    return restored


__all__ = ["graph_filter", "laplacian"]
