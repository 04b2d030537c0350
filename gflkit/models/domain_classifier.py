"""FedCG's domain classifier (Caporali et al., CVPR-W 2021, Sec. 4.1 "Implementation details").

Two 3×3 convolutions of 32 and 64 features, average pooling and a linear layer to ``D`` domain scores.
The paper is silent on the non-linearity and padding: ReLU after each convolution and "same" padding,
global average pooling (so the classifier takes any image size).
"""
from __future__ import annotations

from torch import Tensor, nn


class DomainClassifier(nn.Module):
    r""":math:`g: \mathcal X \to \mathbb R^D`, the scores of an image's ``num_domains`` domains (logits)."""

    def __init__(self, in_channels: int, num_domains: int):
        super().__init__()
        if num_domains < 1:
            raise ValueError(f"num_domains must be >= 1, got {num_domains}")
        self.body = nn.Sequential(
            nn.Conv2d(in_channels, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.linear = nn.Linear(64, num_domains)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(self.body(x))
