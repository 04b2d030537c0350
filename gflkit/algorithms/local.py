"""Local (a.k.a. Separate): every client trains its own model and nothing is aggregated."""
from __future__ import annotations

from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.communication import Communication
from gflkit.federation import Federation, LocalResult


class Local(Algorithm):
    r"""Separate training: :math:`w_k \leftarrow \mathrm{SGD}(w_k; D_k)`, no communication.

    The lower bound of collaboration: each client's personalised model sees only its own data.
    """

    name = "local"
    batchable = True

    def setup(self, fed: Federation) -> None:
        fed.global_model = None

    def configure(self, fed: Federation, client: int) -> Tensor:
        return fed.models[client]

    def finish_client(self, fed: Federation, client: int, result: LocalResult) -> LocalResult:
        fed.models[client] = result.vector  # kept on the client: no upload channel touches it
        return result

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        """Nothing to aggregate: the models stayed on their clients."""

    def communication(self, fed: Federation) -> Communication:
        """Nothing travels."""
        return Communication(0, 0)
