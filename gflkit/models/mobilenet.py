r"""MobileNetV2 (Sandler et al., "MobileNetV2: Inverted Residuals and Linear Bottlenecks", CVPR 2018) for
small images, written out here (no torchvision).

Architecture (width multiplier :math:`\alpha = 1`)::

    stem      conv 3×3, 32, BN, ReLU6                         stride 1  (ImageNet: 2)
    stages    inverted residual blocks, rows (t, c, n, s) =
              (1,  16, 1, 1)
              (6,  24, 2, 1)                                  stride 1  (ImageNet: 2)
              (6,  32, 3, 2)
              (6,  64, 4, 2)
              (6,  96, 3, 1)
              (6, 160, 3, 2)
              (6, 320, 1, 1)
    last      conv 1×1, 1280, BN, ReLU6
    pool      global average pooling            → h ∈ R^1280   (``features``)
    head      linear 1280 → C                   (``classifier``)

Each block of a row with expansion ``t``, output channels ``c`` and stride ``s`` (``s`` on the row's
first block only) computes

.. math::
    \mathrm{block}(x) = [x +]\; \mathrm{BN}(W_{\text{proj}} * \mathrm{ReLU6}(\mathrm{BN}(
        W_{\text{dw}} \circledast \mathrm{ReLU6}(\mathrm{BN}(W_{\text{exp}} * x)))))

a 1×1 expansion to :math:`t \cdot c_{\text{in}}` channels (omitted when :math:`t = 1`), a 3×3 depthwise
convolution with stride :math:`s`, and a linear 1×1 projection to :math:`c` channels (no activation: the
"linear bottleneck"). The residual :math:`x +` is added when :math:`s = 1` and :math:`c_{\text{in}} = c`.

CIFAR adaptation (as is common, e.g. for 32×32 inputs): the **stem stride 2 → 1** and the **stride of the
second stage (c = 24) 2 → 1**; every other stride is as published. A 32×32 input is thus down-sampled
8× (to 4×4) instead of 32× (to 1×1). Strides do not change the parameter count. The published classifier's
dropout (0.2) is left out so that ``head`` is exactly the linear ``classifier`` and
``forward(x) = head(features(x))`` holds in training mode too. With :math:`\alpha = 1` and ten classes the
model has 2,236,682 parameters (2,223,872 in the body, 12,810 in the classifier) — the count of
torchvision's ``mobilenet_v2(num_classes=10)``.

Width multiplier: every channel count :math:`c` becomes :math:`\alpha c` rounded to a multiple of 8 (never
down by more than 10 %), the last convolution has :math:`1280 \cdot \max(1, \alpha)` channels, as in the
reference implementation. Initialisation as the reference: convolutions Kaiming-normal (fan-out), BN
weight 1 and bias 0, the classifier :math:`\mathcal N(0, 0.01^2)` with zero bias.
"""
from __future__ import annotations

from torch import Tensor, nn

from gflkit.models.base import FeatureModel

#: Rows (expansion t, output channels c, repeats n, stride s) of the CIFAR variant (second row's s = 2 → 1).
CIFAR_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1),
    (6, 24, 2, 1),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
STEM_CHANNELS = 32
LAST_CHANNELS = 1280


def make_divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to the nearest multiple of ``divisor`` (at least ``divisor``), never below 90 % of it."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn_relu6(in_channels: int, out_channels: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    """Convolution (no bias, "same" padding) → BatchNorm → ReLU6."""
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    """One MobileNetV2 block: 1×1 expansion (when ``expansion > 1``) → 3×3 depthwise → linear 1×1 projection."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, expansion: int):
        super().__init__()
        hidden = in_channels * expansion
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(conv_bn_relu6(in_channels, hidden, 1))
        layers += [
            conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels),
        ]
        self.conv = nn.Sequential(*layers)
        self.residual = stride == 1 and in_channels == out_channels

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


class MobileNetV2(FeatureModel):
    r"""MobileNetV2 for small images (stem and second-stage stride 1); ``features`` = the pooled 1280-d vector.

    Args:
        input_shape: ``(C, H, W)`` of one image, e.g. ``(3, 32, 32)`` (CIFAR) or ``(1, 28, 28)``.
        num_classes: number of classes :math:`C`.
        width: width multiplier :math:`\alpha` (1.0 in FedSKA).
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, width: float = 1.0):
        super().__init__()
        if len(input_shape) != 3:
            raise ValueError(f"MobileNetV2 needs image inputs (C, H, W), got input_shape {tuple(input_shape)}")
        if width <= 0:
            raise ValueError(f"width must be positive, got {width}")
        channels = make_divisible(STEM_CHANNELS * width)
        layers: list[nn.Module] = [conv_bn_relu6(input_shape[0], channels, 3, stride=1)]
        for expansion, out, repeats, stride in CIFAR_STAGES:
            out_channels = make_divisible(out * width)
            for i in range(repeats):
                layers.append(InvertedResidual(channels, out_channels, stride if i == 0 else 1, expansion))
                channels = out_channels
        self.feature_dim = make_divisible(LAST_CHANNELS * max(1.0, width))
        layers.append(conv_bn_relu6(channels, self.feature_dim, 1))
        self.body = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(self.feature_dim, num_classes)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, 0.01)
                nn.init.zeros_(module.bias)

    def features(self, x: Tensor) -> Tensor:
        return self.pool(self.body(x)).flatten(1)

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)
