"""LG-FedAvg (Liang, Liu, Ziyin, Allen, Auerbach, Brent, Salakhutdinov and Morency, "Think Locally,
Act Globally: Federated Learning with Local and Global Representations", arXiv 2001.01523, 2020):
local representation layers, a federated head."""
from __future__ import annotations

from gflkit.algorithms.base import NoParams
from gflkit.algorithms.fedavg import FedAvg


class LGFedAvg(FedAvg):
    r"""FedAvg over the head only; every client keeps its own representation layers — FedPer reversed.

    With :math:`m` the head mask (the complement of the encoder mask), client :math:`k` starts from
    :math:`m \odot w + (1 - m) \odot w_k`, uploads :math:`m \odot w_k`, and the server averages the head.
    Each client is scored with its own model. This is FedAvg's ``share="head"``
    (:mod:`gflkit.algorithms.sharing`).

    Difference from the authors' code, on purpose: their runs start every client from a global model
    pre-trained by FedAvg (``--load_fed``) and keep ``num_layers_keep`` top layers global; here every
    client starts from the common initial model and the global part is the model's head, as the SFL
    paper's comparison describes it.
    """

    name = "lg_fedavg"
    Params = NoParams
    share = "head"
