"""The interface every client model implements: ``features`` then ``head``."""
from __future__ import annotations

from torch import Tensor, nn


class FeatureModel(nn.Module):
    """A model split into a representation and a prediction head: ``forward(x) = head(features(x))``.

    Methods that act on representations (FedSKA's structure features, MOON's contrastive term) call
    ``features`` and ``head`` themselves, so they need no model-specific code. The classifier layer is
    named ``classifier`` in every model so that head/body splits (FedPer, LG-FedAvg) can select it by name.
    """

    feature_dim: int

    def features(self, x: Tensor) -> Tensor:  # pragma: no cover - abstract
        """The representation :math:`h` of a batch, shape ``(n, feature_dim)``."""
        raise NotImplementedError

    def head(self, h: Tensor) -> Tensor:  # pragma: no cover - abstract
        """Class scores from representations, shape ``(n, num_classes)``."""
        raise NotImplementedError

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))
