r"""The uplink between clients and server: noisy and incomplete uploads (JGESR, Eq. 10).

What the server receives from client :math:`k` is not its model vector :math:`x_k` but

.. math:: \tilde{x}_k = m_k \odot x_k + n_k, \qquad n_k \sim \mathcal{N}(0, \sigma_k^2 I),
          \qquad \sigma_k = s\, \mathbb{E}_k\big[|\psi_k^{(0)}|\big],

where :math:`m_k \in \{0, 1\}^d` drops each entry independently with probability ``missing_rate``
and the noise scale is ``noise_scale`` (:math:`s`) times the mean absolute entry of the initial model
vector :math:`\psi^{(0)}` (the same for every client here: all start from one initial model).

A lost entry arrives as zero. (Eq. 10 read literally adds :math:`n_k` to lost entries too, i.e. they
would arrive as pure noise; in the objective of Eq. 11, :math:`\lVert M \odot \Psi - \tilde X\rVert`,
those entries are constants, so for PDCA both readings are the same problem.)

The channel sits between :meth:`~gflkit.algorithms.base.Algorithm.client_update` and
:meth:`~gflkit.algorithms.base.Algorithm.aggregate` for *every* method, so all methods can be
compared under the same noise; a method that can use the missing-entry mask (JGESR's PDCA) reads it
from ``Federation.upload_mask``, every other one sees the dropped entries as zeros. Each client's noise
and mask in a round come from their own seeded stream: the same seed gives the same corruption to
every method.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gflkit.seeding import UPLOAD_CHANNEL, generator


@dataclass(frozen=True)
class Channel:
    """Uplink corruption: ``noise_scale`` (:math:`s`) and ``missing_rate`` (probability an entry is lost)."""

    noise_scale: float = 0.0
    missing_rate: float = 0.0

    def __post_init__(self) -> None:
        if self.noise_scale < 0:
            raise ValueError(f"channel noise_scale s must be >= 0, got {self.noise_scale}")
        if not 0 <= self.missing_rate < 1:
            raise ValueError(f"channel missing_rate must lie in [0, 1), got {self.missing_rate}")

    @property
    def is_perfect(self) -> bool:
        """Whether uploads arrive unchanged."""
        return self.noise_scale == 0 and self.missing_rate == 0

    def transmit(
        self, updates: Tensor, clients: Tensor, round: int, seed: int, reference_scale: float
    ) -> tuple[Tensor, Tensor | None]:
        """What the server receives from ``clients`` (rows of ``updates``): ``(received, mask)``.

        ``reference_scale`` is :math:`\\mathbb{E}[|\\psi^{(0)}|]`; ``mask`` is the boolean matrix of
        received entries, ``None`` when nothing is dropped.
        """
        if self.is_perfect:
            return updates, None
        sigma = self.noise_scale * reference_scale
        received = torch.empty_like(updates)
        mask = torch.ones_like(updates, dtype=torch.bool) if self.missing_rate > 0 else None
        for row, client in enumerate(clients.tolist()):
            stream = generator(seed, round, client, UPLOAD_CHANNEL)
            noise = torch.randn(updates.shape[1], generator=stream).to(updates.device)
            received[row] = updates[row] + sigma * noise
            if mask is not None:
                mask[row] = (torch.rand(updates.shape[1], generator=stream) >= self.missing_rate).to(updates.device)
        if mask is not None:
            received = received * mask
        return received, mask


__all__ = ["Channel"]
