"""FedAvg (McMahan et al., AISTATS 2017)."""
from __future__ import annotations

from torch import Tensor

from gflkit.algorithms.base import Algorithm, weighted_mean
from gflkit.federation import Federation


class FedAvg(Algorithm):
    r"""Federated averaging.

    Each sampled client starts from the global model :math:`w` and runs local SGD; the server sets

    .. math:: w \leftarrow \sum_{k \in S} \frac{n_k}{\sum_{j \in S} n_j}\, w_k

    with :math:`n_k` the client's number of training samples. Every client is evaluated with the
    global model (its "personalised" model is the global one).
    """

    name = "fedavg"

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        fed.models[clients] = updates
        fed.global_model = weighted_mean(updates, fed.num_train[clients])

    def evaluation_models(self, fed: Federation) -> Tensor:
        return fed.global_model
