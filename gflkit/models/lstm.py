r"""CharLSTM: the stacked character LSTM of the LEAF / FedSKA Shakespeare experiments.

.. math::
    e_t = E[x_t] \in \mathbb{R}^{8}, \qquad
    (h^{(\ell)}_t, c^{(\ell)}_t) = \mathrm{LSTM}^{(\ell)}(h^{(\ell-1)}_t, h^{(\ell)}_{t-1}, c^{(\ell)}_{t-1}),
    \quad h^{(0)}_t = e_t, \qquad
    \hat y = W h^{(L)}_T + b \in \mathbb{R}^{V}

over a window :math:`x_1 \dots x_T` of character ids; ``features(x)`` is :math:`h^{(L)}_T`, the top
layer's hidden state after the last character (256-d), and ``classifier`` gives the logits of the next
character over the vocabulary of size :math:`V` (= ``num_classes``). Defaults follow NOTES.md (embedding 8,
hidden 256, two layers, as in LEAF's reference model); FedSKA's Sec. 4.1 text says one LSTM layer:
pass ``layers=1`` for that reading.
"""
from __future__ import annotations

from torch import Tensor, nn

from gflkit.models.base import FeatureModel


class CharLSTM(FeatureModel):
    """Embedding → stacked LSTM → linear next-character classifier.

    Args:
        input_shape: ``(seq_len,)``: one sample is a window of ``int64`` character ids.
        num_classes: the vocabulary size :math:`V` (ids lie in ``[0, V)``; also the number of classes).
        embed_dim: embedding width (8).
        hidden: LSTM hidden size (256).
        layers: number of stacked LSTM layers (2).
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, embed_dim: int = 8, hidden: int = 256,
                 layers: int = 2):
        super().__init__()
        if len(input_shape) != 1:
            raise ValueError(f"CharLSTM needs inputs of shape (seq_len,) of token ids, "
                             f"got input_shape {tuple(input_shape)}")
        self.embedding = nn.Embedding(num_classes, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=layers, batch_first=True)
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden

    def features(self, x: Tensor) -> Tensor:
        """The top layer's hidden state after the last token, ``(n, hidden)``; ``x`` is ``(n, seq_len)`` int64."""
        output, _ = self.lstm(self.embedding(x))
        return output[:, -1]

    def head(self, h: Tensor) -> Tensor:
        return self.classifier(h)
