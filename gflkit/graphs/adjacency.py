"""Dense adjacency-matrix operations on small client graphs (K ≤ a few hundred nodes).

Every function takes and returns a dense ``K × K`` tensor and is differentiable where it makes sense,
so that learned graphs (FedSKA's structure learner) can back-propagate through it.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def cosine_similarity_matrix(features: Tensor, eps: float = 1e-8) -> Tensor:
    r"""Pairwise cosine similarities :math:`S_{ij} = \frac{x_i^\top x_j}{\lVert x_i\rVert \lVert x_j\rVert}` of the rows."""
    normed = F.normalize(features, dim=1, eps=eps)
    return normed @ normed.T


def knn_sparsify(similarity: Tensor, k: int, keep_self: bool = True) -> Tensor:
    r"""Keep, in every row, the ``k`` largest entries (plus the diagonal when ``keep_self``); zero the rest.

    With ``keep_self`` the row keeps its top-(k+1) entries, the node itself included — the FedSKA
    generator's "top-(k+1) per row, self kept" (Eq. 5). Gradients flow through the kept entries.
    """
    num_nodes = similarity.shape[0]
    keep = k + 1 if keep_self else k
    if not 1 <= keep <= num_nodes:
        raise ValueError(
            f"k must satisfy 1 <= k{' + 1' if keep_self else ''} <= number of nodes ({num_nodes}), got k={k}"
        )
    scores = similarity
    if keep_self:
        scores = similarity + torch.diag(torch.full((num_nodes,), float("inf"), device=similarity.device))
    index = scores.topk(keep, dim=1).indices
    mask = torch.zeros_like(similarity, dtype=torch.bool).scatter_(1, index, True)
    return similarity * mask


def symmetrize(adjacency: Tensor) -> Tensor:
    r""":math:`\frac{1}{2}(S + S^\top)`."""
    return 0.5 * (adjacency + adjacency.T)


def sym_normalize(adjacency: Tensor, eps: float = 1e-10) -> Tensor:
    r"""Symmetric normalisation :math:`D^{-1/2} S D^{-1/2}` with :math:`D = \mathrm{diag}(S\mathbf{1})`.

    Rows of zero degree stay zero.
    """
    degree = adjacency.sum(dim=1)
    inv_sqrt = torch.where(degree > eps, degree.clamp(min=eps).rsqrt(), torch.zeros_like(degree))
    return inv_sqrt[:, None] * adjacency * inv_sqrt[None, :]


def row_normalize(adjacency: Tensor, eps: float = 1e-10) -> Tensor:
    r"""Row-stochastic normalisation :math:`D^{-1} S` (rows of zero degree stay zero)."""
    degree = adjacency.sum(dim=1, keepdim=True)
    return torch.where(degree > eps, adjacency / degree.clamp(min=eps), torch.zeros_like(adjacency))


def inverse_distance_similarity(features: Tensor, eps: float = 1e-12) -> Tensor:
    r"""FedCG's Eq. 6 similarity :math:`h_{ij} = 1 / \lVert x_i - x_j\rVert_2` between the rows (flattened);
    the diagonal is zero (a node's similarity to itself is set by :func:`self_weighted`)."""
    flat = features.reshape(features.shape[0], -1)
    distance = torch.cdist(flat.unsqueeze(0), flat.unsqueeze(0)).squeeze(0)
    similarity = 1.0 / distance.clamp(min=eps)
    return similarity.fill_diagonal_(0.0)


def self_weighted(similarity: Tensor, beta: float = 0.5) -> Tensor:
    r"""The adjacency of FedCG's Eq. 6 from any off-diagonal similarity :math:`h`:

    .. math:: A_{ii} = \beta, \qquad A_{ij} = (1 - \beta)\,\frac{h_{ij}}{\sum_{d \ne i} h_{id}} \quad (i \ne j),

    so every row sums to one (a single node keeps :math:`A = [1]`). ``uniform`` domains are
    ``self_weighted(ones)``; the identity ("eye") is ``beta = 1``.
    """
    if not 0 <= beta <= 1:
        raise ValueError(f"beta (the self-connection weight) must lie in [0, 1], got {beta}")
    num_nodes = similarity.shape[0]
    if num_nodes == 1:
        return torch.ones(1, 1, dtype=similarity.dtype, device=similarity.device)
    off = similarity.clone().fill_diagonal_(0.0)
    adjacency = (1 - beta) * row_normalize(off)
    return adjacency + beta * torch.eye(num_nodes, dtype=similarity.dtype, device=similarity.device)
