"""Loss terms shared by several methods' local objectives."""
from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor


def squared_distance(params: Sequence[Tensor], anchor: Sequence[Tensor]) -> Tensor:
    r""":math:`\lVert w - a \rVert_2^2` summed over matching parameter tensors (``anchor`` is constant)."""
    return torch.stack([(p - a.detach()).pow(2).sum() for p, a in zip(params, anchor)]).sum()
