"""FedProx (Li et al., MLSys 2020)."""
from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.algorithms.sharing import SharingParams
from gflkit.algorithms.terms import squared_distance
from gflkit.federation import Federation
from gflkit.training import LocalStep


@dataclass(frozen=True)
class FedProxParams(SharingParams):
    """``mu``: weight of the proximal term (the FedProx paper sweeps {0.001, 0.01, 0.1, 1}; 0.01 default);
    ``share``: which entries leave the client (:mod:`gflkit.algorithms.sharing`; ``"all"``)."""

    mu: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mu < 0:
            raise ValueError(f"fedprox mu must be >= 0, got {self.mu}")


class FedProx(FedAvg):
    r"""FedAvg with a proximal term in every client's local objective:

    .. math:: \min_w\; f_k(w) + \frac{\mu}{2} \lVert w - w^t \rVert_2^2

    where :math:`w^t` is the global model the round started from (under partial sharing, the model the
    client started from: global on the shared entries, its own elsewhere). Aggregation is FedAvg's.
    """

    name = "fedprox"
    adds_local_loss = True
    Params = FedProxParams

    def anchor(self, fed: Federation, client: int) -> Tensor:
        """:math:`w^t`, the model ``client`` started the round from (its own entries where not shared)."""
        return self.configure(fed, client)

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        return {"anchor": self.anchor(fed, client)}

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor:
        anchor = fed.flat.parameters_as_views(step.context["anchor"])
        return 0.5 * self.params.mu * squared_distance(step.params, anchor)
