"""Convolutional client models for image classification."""
from __future__ import annotations

import torch
from torch import Tensor, nn

from gflkit.models.base import FeatureModel


def _flat_size(body: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Number of features ``body`` produces for one input of ``input_shape`` (found by a dry run)."""
    with torch.no_grad():
        return int(body(torch.zeros(1, *input_shape)).flatten(1).shape[1])


class McMahanCNN(FeatureModel):
    r"""The 2-conv CNN of McMahan et al. (2017), "Communication-efficient learning ...".

    conv 5×5 (32) → max-pool 2 → conv 5×5 (64) → max-pool 2 → fc 512 → fc C, ReLU after every
    hidden layer; ``features`` is the 512-d output of the first fully-connected layer.
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 512):
        super().__init__()
        channels = input_shape[0]
        self.conv = nn.Sequential(
            nn.Conv2d(channels, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(_flat_size(self.conv, input_shape), hidden)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        return torch.relu(self.fc(self.conv(x).flatten(1)))

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)


class SimpleCNN(FeatureModel):
    r"""A LeNet-style CNN with two convolutional and two fully-connected layers (JGESR's "simple CNN").

    conv 5×5 (6) → max-pool 2 → conv 5×5 (16) → max-pool 2 → fc 120 → fc C, ReLU after every hidden
    layer; ``features`` is the 120-d hidden layer. Inputs smaller than 12×12 (e.g. 8×8 digits) use
    padding 2 so both pools still have something to pool.
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 120):
        super().__init__()
        channels, height = input_shape[0], input_shape[-1]
        padding = 2 if height < 12 else 0
        self.conv = nn.Sequential(
            nn.Conv2d(channels, 6, 5, padding=padding), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5, padding=padding), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.fc = nn.Linear(_flat_size(self.conv, input_shape), hidden)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        return torch.relu(self.fc(self.conv(x).flatten(1)))

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)


class LeafCelebACNN(FeatureModel):
    r"""LEAF's CelebA CNN (Caldas et al., "LEAF: A Benchmark for Federated Settings", 2018), FedCG's CelebA model.

    Four blocks of conv 3×3 (32, "same" padding) → BatchNorm → max-pool 2 → ReLU on 84×84 RGB faces,
    then a linear layer to the classes; ``features`` is the flattened output of the last block
    (32 × 5 × 5 = 800 for 84×84 inputs). LEAF's ``celeba/cnn.py`` builds exactly these four blocks.
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, channels: int = 32, blocks: int = 4):
        super().__init__()
        layers: list[nn.Module] = []
        previous = input_shape[0]
        for _ in range(blocks):
            layers += [nn.Conv2d(previous, channels, 3, padding=1), nn.BatchNorm2d(channels), nn.MaxPool2d(2),
                       nn.ReLU()]
            previous = channels
        self.conv = nn.Sequential(*layers)
        self.feature_dim = _flat_size(self.conv.eval(), input_shape)
        self.conv.train()
        self.classifier = nn.Linear(self.feature_dim, num_classes)

    def features(self, x: Tensor) -> Tensor:
        return self.conv(x).flatten(1)

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)
