r"""RNNForecaster: the SFL paper's "pure RNN" traffic forecaster (hidden size 64): one recurrent layer over
the input window and a linear read-out of all :math:`T_{out}` future values from its last state,

.. math::
    h_t = \mathrm{RNN}(x_t, h_{t-1}),\; t = 1 \dots T_{in}, \qquad \hat y = W h_{T_{in}} + b \in \mathbb R^{T_{out}}.

The paper says only "pure RNN ... with 64 hidden layer sizes" (no graph convolution, no decoder); its
code covers the image tasks only. The cell is a choice: ``cell="rnn"`` (the Elman RNN, tanh; the
default: what "pure RNN" names), ``"gru"`` or ``"lstm"``. ``features(x)`` is :math:`h_{T_{in}}`, the head is
the read-out (named ``classifier``, local under encoder-only sharing).
"""
from __future__ import annotations

from torch import Tensor, nn

from gflkit.models.base import FeatureModel

CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


class RNNForecaster(FeatureModel):
    """One recurrent layer over ``(T_in, F)`` windows, a linear map of its last state to the horizon.

    Args:
        input_shape: ``(T_in, F)``: input steps and features per step (``(12, 2)`` for the traffic data).
        num_classes: the forecast horizon :math:`T_{out}` (the output size, 12).
        hidden: hidden size (64, the paper's).
        cell: ``"rnn"`` (default), ``"gru"`` or ``"lstm"``.
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 64, cell: str = "rnn"):
        super().__init__()
        if len(input_shape) != 2:
            raise ValueError(f"RNNForecaster needs inputs of shape (steps, features), got input_shape {tuple(input_shape)}")
        if cell not in CELLS:
            raise ValueError(f"RNNForecaster cell must be one of {sorted(CELLS)}, got {cell!r}")
        self.recurrent = CELLS[cell](input_shape[1], hidden, batch_first=True)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        """The last step's hidden state, ``(n, hidden)``; ``x`` is ``(n, T_in, F)``."""
        output, _ = self.recurrent(x)
        return output[:, -1]

    def head(self, h: Tensor) -> Tensor:
        """``(n, T_out)`` predictions in the scaled units of the first input feature."""
        return self.classifier(h)
