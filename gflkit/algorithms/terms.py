"""Loss terms shared by several methods' local objectives."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
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


def model_contrastive(z: Tensor, z_global: Tensor, z_previous: Sequence[Tensor], tau: float) -> Tensor:
    r"""MOON's model-contrastive loss (Li, He & Song, CVPR 2021, Eq. 3; FedVGAE's Eq. 10), mean over rows.

    Row :math:`i` of ``z`` (the current local model's representation of sample / node :math:`i`) is pulled
    towards the global model's :math:`z^g_i` and pushed from each previous local model's :math:`z^p_i`:

    .. math::
        \ell_{con} = -\frac1n \sum_i \log
        \frac{\exp(\mathrm{sim}(z_i, z^g_i)/\tau)}
             {\exp(\mathrm{sim}(z_i, z^g_i)/\tau) + \sum_p \exp(\mathrm{sim}(z_i, z^p_i)/\tau)}

    with the cosine similarity :math:`\mathrm{sim}` over the flattened representations and the temperature
    :math:`\tau > 0`. ``z_global`` and ``z_previous`` are constants (no gradient flows into them). Without
    previous models the loss is 0, as in MOON's first round.
    """
    if tau <= 0:
        raise ValueError(f"temperature tau must be > 0, got {tau}")
    z = z.flatten(1)
    similarities = [F.cosine_similarity(z, other.detach().flatten(1), dim=1) for other in (z_global, *z_previous)]
    logits = torch.stack(similarities, dim=1) / tau
    return F.cross_entropy(logits, torch.zeros(len(z), dtype=torch.long, device=z.device))
