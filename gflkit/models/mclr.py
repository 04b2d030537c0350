"""MCLR: the one-hidden-layer perceptron of the FedSKA MNIST experiments."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gflkit.models.base import FeatureModel


class MCLR(FeatureModel):
    r"""Multiclass logistic regression with one hidden layer.

    .. math::
        h = \mathrm{ReLU}(W_1 \,\mathrm{vec}(x) + b_1) \in \mathbb{R}^{64}, \qquad
        \hat y = W_2 h + b_2 \in \mathbb{R}^{C}

    ``features(x)`` returns :math:`h`, the 64-d representation FedSKA averages into client features.

    Args:
        input_shape: shape of one sample, e.g. ``(1, 28, 28)`` (784 inputs).
        num_classes: number of classes :math:`C`.
        hidden: width of the hidden layer (64 in the paper).
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 64):
        super().__init__()
        self.hidden = nn.Linear(math.prod(input_shape), hidden)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        return torch.relu(self.hidden(x.flatten(1)))

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)
