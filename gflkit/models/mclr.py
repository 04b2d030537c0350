"""MCLR: the two-layer linear classifier of the FedSKA MNIST experiments (and a ReLU variant)."""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from gflkit.models.base import FeatureModel


class MCLR(FeatureModel):
    r"""Multiclass logistic regression through a 64-d linear bottleneck, as in the FedSKA authors' code.

    .. math::
        h = W_1 \,\mathrm{vec}(x) + b_1 \in \mathbb{R}^{64}, \qquad
        \hat y = W_2 h + b_2 \in \mathbb{R}^{C}

    There is no activation between the layers (the authors' ``Mclr_Logistic``: Linear 784 → 64 →
    10), so the classifier is linear in :math:`x`; the hidden layer exists to give FedSKA a 64-d
    representation :math:`h` (``features(x)``) to average into client features. ``mclr_relu``
    (:class:`MCLRReLU`) is the same network with a ReLU on :math:`h`.

    Args:
        input_shape: shape of one sample, e.g. ``(1, 28, 28)`` (784 inputs).
        num_classes: number of classes :math:`C`.
        hidden: width of the hidden layer (64 in the paper).
    """

    relu: bool = False

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 64):
        super().__init__()
        self.hidden = nn.Linear(math.prod(input_shape), hidden)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        h = self.hidden(x.flatten(1))
        return torch.relu(h) if self.relu else h

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)


class MCLRReLU(MCLR):
    r""":class:`MCLR` with a ReLU on the hidden layer, :math:`h = \mathrm{ReLU}(W_1 \mathrm{vec}(x) + b_1)`
    (a one-hidden-layer perceptron; gflkit's ``mclr`` before it followed the authors' linear model)."""

    relu = True
