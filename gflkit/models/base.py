"""The interface every client model implements: ``features`` then ``head``."""
from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor, nn

from gflkit.state import Layout


class FeatureModel(nn.Module):
    """A model split into a representation and a prediction head: ``forward(x) = head(features(x))``.

    Methods that act on representations (FedSKA's structure features, MOON's contrastive term) call
    ``features`` and ``head`` themselves, so they need no model-specific code. The classifier layer is
    named ``classifier`` in every model so that head/body splits (FedPer, LG-FedAvg) can select it by name.

    ``local_prefixes`` name the modules that stay on a client under encoder-only sharing (FedVGAE):
    :meth:`encoder_mask` selects every other entry of the model vector.
    """

    feature_dim: int
    local_prefixes: ClassVar[tuple[str, ...]] = ("classifier.",)

    def features(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        """The representation :math:`h` of a batch, shape ``(n, feature_dim)``."""
        raise NotImplementedError

    def head(self, h: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Class scores from representations, shape ``(n, num_classes)``."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))

    def auxiliary_loss(self) -> Tensor | None:
        """A loss the model adds to the task loss of its latest forward pass (VGAE's KL term); None by default."""
        return None

    def encoder_mask(self, layout: Layout, device: torch.device | str | None = None) -> Tensor:
        """Boolean mask over this model's flat vector (``layout``): True on the shared encoder's entries.

        The encoder is everything outside ``local_prefixes`` (by default: all but the classifier).
        """
        return layout.mask(lambda entry: not entry.name.startswith(self.local_prefixes), device)
