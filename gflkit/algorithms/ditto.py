"""Ditto (Li, Hu, Beirami and Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021) — Algorithm 1 of the paper."""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from gflkit.algorithms.base import weighted_mean
from gflkit.algorithms.fedavg import FedAvg
from gflkit.federation import Federation, LocalResult
from gflkit.training import Proximal


@dataclass(frozen=True)
class DittoParams:
    """``lam``: weight λ of the pull of a personal model towards the global one (λ ≥ 0).

    Default λ = 1: the Ditto authors' run scripts (``run_*_ditto_lam1.sh``; the paper tunes λ over
    {0.05, 0.1, 0.2, 0.5, 1, 2}).
    """

    lam: float = 1.0

    def __post_init__(self) -> None:
        if not self.lam >= 0:
            raise ValueError(f"ditto lam must be >= 0, got {self.lam}")


class Ditto(FedAvg):
    r"""Global-regularised personalisation.

    The global model :math:`w` is learned by FedAvg. Every sampled client ``k`` also keeps a personal
    model :math:`v_k` (row ``k`` of ``fed.models``) and, in the same round, trains it on

    .. math:: \min_{v_k}\; f_k(v_k) + \frac{\lambda}{2} \lVert v_k - w^t \rVert_2^2

    from its previous :math:`v_k`, where :math:`w^t` is the global model the round started from. The
    two local trainings use separate minibatch streams (``stream`` 0: global copy, 1: personal model)
    of the one shared loop. The server averages the global copies (sample-weighted, as FedAvg);
    personal models never leave the client. Every client is evaluated with its personal model.

    Differences from the official (TensorFlow) code: it interleaves one personal and one global step
    per batch and averages updates unweighted; here the two trainings run one after the other (as in
    the paper's Algorithm 1) and aggregation is FedAvg's. FedSKA's re-implementation applies
    ``0.3·‖v − w‖`` to detached copies of the weights, i.e. a term without gradient — its Ditto is
    separate training of the personal models (Table 1: Ditto ≈ Separate on MNIST).
    """

    name = "ditto"
    share = "all"  # FedAvg's whole-model sharing; no share option
    Params = DittoParams

    def train_clients(self, fed: Federation, clients: Tensor, round: int) -> list[LocalResult]:
        ids = [int(k) for k in clients]
        shared = fed.train_clients(ids, round, fed.global_model.expand(len(ids), -1), stream=0)
        anchor = [{"anchor": fed.global_model}] * len(ids)  # the same for every client
        personal = fed.train_clients(ids, round, fed.models[ids], contexts=anchor, stream=1,
                                     proximal=Proximal(self.params.lam))
        for client, result in zip(ids, personal):
            fed.models[client] = result.vector
        return shared

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        fed.global_model = weighted_mean(updates, fed.num_train[clients])

    def evaluation_models(self, fed: Federation) -> Tensor:
        return fed.models

    def trained_model(self, fed: Federation, client: int, result: LocalResult) -> Tensor:
        return fed.models[client]  # the personal model, trained this round (``result`` is the global copy)
