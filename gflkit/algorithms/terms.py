"""Loss terms shared by several methods' local objectives."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def squared_distance(params: Sequence[Tensor], anchor: Sequence[Tensor]) -> Tensor:
    r""":math:`\lVert w - a \rVert_2^2` summed over matching parameter tensors (``anchor`` is constant)."""
    return torch.stack([(p - a.detach()).pow(2).sum() for p, a in zip(params, anchor)]).sum()


def cosine_similarity(params: Sequence[Tensor], anchor: Sequence[Tensor], eps: float = 1e-12) -> Tensor:
    r""":math:`\cos(w, a) = \frac{\langle w, a\rangle}{\lVert w\rVert\,\lVert a\rVert}` of the concatenated tensors.

    ``params`` and ``anchor`` are matching lists of tensors (a model's parameters and their views in
    another model vector); the anchor is constant. ``eps`` guards the division for a zero vector.
    """
    dot = torch.stack([(p * a.detach()).sum() for p, a in zip(params, anchor)]).sum()
    norm_w = torch.stack([p.pow(2).sum() for p in params]).sum().sqrt()
    norm_a = torch.stack([a.detach().pow(2).sum() for a in anchor]).sum().sqrt()
    return dot / (norm_w * norm_a).clamp(min=eps)
