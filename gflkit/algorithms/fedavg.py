"""FedAvg (McMahan et al., AISTATS 2017), with optional partial sharing (FedPer-style)."""
from __future__ import annotations

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm, weighted_mean
from gflkit.algorithms.sharing import SharingParams, shared_mask
from gflkit.communication import Communication
from gflkit.federation import Federation, LocalResult


class FedAvg(Algorithm):
    r"""Federated averaging.

    Each sampled client starts from the global model :math:`w` and runs local SGD; the server sets

    .. math:: w \leftarrow \sum_{k \in S} \frac{n_k}{\sum_{j \in S} n_j}\, w_k

    with :math:`n_k` the client's number of training samples. Every client is evaluated with the
    global model (its "personalised" model is the global one).

    With ``share`` other than ``"all"`` (:mod:`gflkit.algorithms.sharing`) only the shared entries
    are averaged; the others stay the client's own (FedPer with ``share="encoder"``: base layers
    federated, classifier personal; Table 5 of FedVGAE shares the VGAE encoder). Under the ``server``
    protocol a client is then scored with the global shared entries and its own personal ones, under
    ``local`` with the model it just trained. Subclasses whose parameters have no ``share`` share everything.
    """

    name = "fedavg"
    Params = SharingParams
    batchable = True

    @property
    def share(self) -> str:
        """Which entries leave the client (:data:`~gflkit.algorithms.sharing.SHARES`)."""
        return self.params.share

    @property
    def partial(self) -> bool:
        """Whether some entries stay on the client."""
        return self.share != "all"

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.shared = shared_mask(fed, self.share)

    def configure(self, fed: Federation, client: int) -> Tensor:
        """The global model on the shared entries, the client's own model elsewhere."""
        return torch.where(self.shared, fed.global_model, fed.models[client]) if self.partial else fed.global_model

    def finish_client(self, fed: Federation, client: int, result: LocalResult) -> LocalResult:
        """Under partial sharing the client keeps its model and uploads the shared entries only."""
        if not self.partial:
            return result
        fed.models[client] = result.vector
        return LocalResult(torch.where(self.shared, result.vector, torch.zeros_like(result.vector)), result.loss)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        self.set_global_model(fed, clients, updates, weighted_mean(updates, fed.num_train[clients]))

    def set_global_model(self, fed: Federation, clients: Tensor, updates: Tensor, new: Tensor) -> None:
        """Make ``new`` the global model — on the shared entries only under partial sharing (nothing else of it
        is read) — and, with everything shared, keep each sampled client's upload as its row."""
        if self.partial:
            fed.global_model = torch.where(self.shared, new, fed.global_model)
        else:
            fed.models[clients] = updates
            fed.global_model = new

    def evaluation_models(self, fed: Federation) -> Tensor:
        """The global model; under partial sharing each client's next starting point, the global shared
        entries with its own personal ones (what FedPer's and LG-FedAvg's codes evaluate)."""
        if not self.partial:
            return fed.global_model
        return torch.where(self.shared, fed.global_model, fed.models)

    def trained_model(self, fed: Federation, client: int, result: LocalResult) -> Tensor:
        return fed.models[client] if self.partial else result.vector  # ``result`` holds the shared entries only

    def communication(self, fed: Federation) -> Communication:
        """The shared entries each way: the global model's down, the trained model's up (``d`` with
        ``share="all"``; under partial sharing the rest stays on the client)."""
        return Communication.both(int(self.shared.sum()))
