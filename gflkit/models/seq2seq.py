r"""GRUSeq2Seq: the GRU encoder–decoder of the FedSKA METR-LA experiments (a DCRNN-style sequence-to-sequence
forecaster without the graph convolution).

Encoder: an :math:`L`-layer GRU (hidden :math:`d`) reads the :math:`T_{in}` input steps
:math:`x_1 \dots x_{T_{in}} \in \mathbb{R}^F` (e.g. scaled speed and time of day) and ends in the states
:math:`H = (h^{(1)}, \dots, h^{(L)})`.

Decoder: another :math:`L`-layer GRU, started from :math:`H`, unrolls :math:`T_{out}` steps; its input is
the previous prediction (a zero "GO" value first) and each step's top-layer state is projected to one value:

.. math::
    \hat y_0 = 0, \qquad
    (H_\tau, o_\tau) = \mathrm{GRU}_{dec}(\hat y_{\tau-1}, H_{\tau-1}),\; H_0 = H, \qquad
    \hat y_\tau = w^\top o_\tau + b, \quad \tau = 1 \dots T_{out}.

The decoder always feeds back its own prediction (DCRNN's inference mode; DCRNN's scheduled sampling,
which feeds ground truth with a decaying probability during training, is not used: no teacher forcing).
Outputs are ``(n, T_out)`` predictions in the same (scaled) units as the first input feature.

Feature / head split: the decoder needs every encoder layer's state, so ``features(x)`` is the flattened
stack :math:`[h^{(1)}; \dots; h^{(L)}] \in \mathbb{R}^{L d}` (layer 1 first; the last :math:`d` entries are
the top layer's state) and ``feature_dim = layers * hidden`` (128 with the defaults); ``head`` is the whole
decoder, whose output projection :math:`(w, b)` is the layer named ``classifier`` (both stay local under
encoder-only sharing).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from gflkit.models.base import FeatureModel


class GRUSeq2Seq(FeatureModel):
    """GRU encoder over the input window, GRU decoder unrolling ``horizon`` one-value predictions.

    Args:
        input_shape: ``(T_in, F)``: input steps and features per step (METR-LA: ``(12, 2)``).
        num_classes: the forecast horizon :math:`T_{out}` (the output size; 12 for METR-LA).
        hidden: hidden size :math:`d` of both GRUs (64).
        layers: number of layers :math:`L` of both GRUs (2).
    """

    local_prefixes = ("decoder.", "classifier.")

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 64, layers: int = 2):
        super().__init__()
        if len(input_shape) != 2:
            raise ValueError(f"GRUSeq2Seq needs inputs of shape (steps, features), "
                             f"got input_shape {tuple(input_shape)}")
        self.horizon = num_classes
        self.hidden = hidden
        self.layers = layers
        self.encoder = nn.GRU(input_shape[1], hidden, num_layers=layers, batch_first=True)
        self.decoder = nn.GRU(1, hidden, num_layers=layers, batch_first=True)
        self.classifier = nn.Linear(hidden, 1)
        self.feature_dim = layers * hidden

    def features(self, x: Tensor) -> Tensor:
        """The encoder's final states of all layers, flattened: ``(n, layers * hidden)``; ``x`` is ``(n, T_in, F)``."""
        _, state = self.encoder(x)
        return state.transpose(0, 1).flatten(1)

    def head(self, h: Tensor) -> Tensor:
        """Unroll the decoder from the encoder states ``h`` (``(n, layers * hidden)``): ``(n, horizon)`` predictions."""
        state = h.reshape(len(h), self.layers, self.hidden).transpose(0, 1).contiguous()
        step = h.new_zeros(len(h), 1, 1)
        predictions = []
        for _ in range(self.horizon):
            output, state = self.decoder(step, state)
            step = self.classifier(output)
            predictions.append(step[:, 0, 0])
        return torch.stack(predictions, dim=1)
