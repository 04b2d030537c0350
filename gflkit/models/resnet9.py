r"""ResNet-9: the residual CNN that the SFL authors' code trains (``BResidual.py`` of
github.com/dawenzi098/SFL-Structural-Federated-Learning, the "authors_code" profile), written out as a
:class:`~gflkit.models.base.FeatureModel`.

Architecture (every convolution 3×3, stride 1, padding 1, no bias; :math:`\mathrm{cbr}_{c}` = conv to
:math:`c` channels → BatchNorm → ReLU, :math:`P` = max-pool 2×2, stride 2)::

    prep      cbr_64                                              H × W
    layer1    P(cbr_128);  x ↦ x + cbr_128(cbr_128(x))            H/2
    layer2    P(cbr_256);  x ↦ x + cbr_256(cbr_256(x))            H/4
    layer3    P(cbr_256)                                          H/8
    pool      P, flatten                  → h ∈ R^256             H/16 = 1   (``features``)
    head      0.2 · W h,  W ∈ R^{C×256}, no bias                             (``classifier`` × ``scale``)

Sizes are floored at every pool: a 28×28 MNIST image goes 28 → 14 → 7 → 3 → 1. The last pool is the
authors' ``MaxPool2d(2)`` over layer3's 3×3 map, so ``h`` is the maximum over its **top-left 2×2
window only** (the last row and column are dropped, as in their code); this is kept exactly. With one
input channel, 28×28 inputs and ten classes the model has 2,439,104 parameters (2,436,544 in the body,
2,560 in the classifier) and 2,944 BatchNorm running statistics (means and variances of 1,472 channels:
buffers, part of the flat state, so batched training falls back to the sequential loop).

Differences from ``BResidual.py`` (none in the computation on 28×28 inputs):

* Their ``Flatten`` (``x.view(n, c)``) assumes the final map is 1×1 and crashes otherwise (e.g. on
  32×32 CIFAR images, whose final map is 2×2). Here the constructor checks this instead: an image side
  outside 16–31 pixels raises a :class:`ValueError` naming the input shape, before any training. No
  adaptive pooling is substituted, since it would change the 28×28 model (max over 3×3 instead of 2×2).
* Their linear layer has 10 outputs whatever the data; here it has ``num_classes``.
* Their ReLUs are in-place; these are not (same values). Their graph-of-dicts module becomes named
  submodules (``prep``, ``layer1`` … ``layer3``, ``classifier``) whose tensors come in the same order.
* Initialisation is PyTorch's default, as theirs (their ``bn_weight_init=1.0`` is BatchNorm's default).
"""
from __future__ import annotations

from torch import Tensor, nn

from gflkit.models.base import FeatureModel

#: output channels of prep, layer1, layer2 and layer3 (the authors' ``channels`` dictionary)
CHANNELS = (64, 128, 256, 256)
#: the authors' ``Mul(weight)`` after the linear layer
SCALE = 0.2
#: image sides (pixels) whose map is 1×1 after the four 2×2 pools — ⌊⌊⌊⌊s/2⌋/2⌋/2⌋/2⌋ = 1
SUPPORTED_SIDES = range(16, 32)


def conv_bn_relu(in_channels: int, out_channels: int) -> nn.Sequential:
    """The authors' ``conv_bn``: conv 3×3 (padding 1, no bias) → BatchNorm → ReLU."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, 3, stride=1, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    )


class Residual(nn.Module):
    """The authors' ``residual``: ``x + res2(res1(x))``, both branches conv-BN-ReLU at constant width."""

    def __init__(self, channels: int):
        super().__init__()
        self.res1 = conv_bn_relu(channels, channels)
        self.res2 = conv_bn_relu(channels, channels)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.res2(self.res1(x))


class ResNet9(FeatureModel):
    r"""The SFL authors' ResNet-9 (``BResidual``); ``features`` = the pooled 256-d vector, ``head`` = 0.2 · linear.

    Args:
        input_shape: ``(C, H, W)`` of one image, e.g. ``(1, 28, 28)`` (MNIST); ``H`` and ``W`` must lie in
            16–31 so that the authors' final 2×2 max-pool leaves a 1×1 map (see the module docstring).
        num_classes: number of classes :math:`C` (outputs of the bias-free linear layer).
        scale: the factor the linear layer's output is multiplied by (the authors' ``weight=0.2``).
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, scale: float = SCALE):
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"ResNet9 needs image inputs (C, H, W), got input_shape {tuple(input_shape)}")
        height, width = input_shape[1:]
        if height not in SUPPORTED_SIDES or width not in SUPPORTED_SIDES:
            raise ValueError(
                f"ResNet9 (the SFL authors' BResidual) cannot take input_shape {tuple(input_shape)}: its four "
                f"2×2 max-pools leave a {self._final_side(height)}×{self._final_side(width)} map, but its head "
                f"flattens a 1×1 map; image sides must lie in {SUPPORTED_SIDES.start}–{SUPPORTED_SIDES.stop - 1} "
                f"pixels (e.g. 28×28 MNIST; 32×32 CIFAR crashes in the authors' code too)"
            )
        prep, c1, c2, c3 = CHANNELS
        self.prep = conv_bn_relu(input_shape[0], prep)
        self.layer1 = nn.Sequential(conv_bn_relu(prep, c1), nn.MaxPool2d(2), Residual(c1))
        self.layer2 = nn.Sequential(conv_bn_relu(c1, c2), nn.MaxPool2d(2), Residual(c2))
        self.layer3 = nn.Sequential(conv_bn_relu(c2, c3), nn.MaxPool2d(2))
        self.pool = nn.MaxPool2d(2)
        self.classifier = nn.Linear(c3, num_classes, bias=False)
        self.scale = float(scale)
        self.feature_dim = c3

    @staticmethod
    def _final_side(side: int) -> int:
        """Side of the map after the four 2×2 max-pools (padding-1 convolutions keep the size)."""
        for _ in range(4):
            side //= 2
        return side

    def features(self, x: Tensor) -> Tensor:
        return self.pool(self.layer3(self.layer2(self.layer1(self.prep(x))))).flatten(1)

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h) * self.scale
