"""FedProx (Li et al., MLSys 2020)."""
from __future__ import annotations

from dataclasses import dataclass

from gflkit.algorithms.method import Method
from gflkit.algorithms.sharing import SharingParams


@dataclass(frozen=True)
class FedProxParams(SharingParams):
    """``mu``: weight of the proximal term (the FedProx paper sweeps {0.001, 0.01, 0.1, 1}; 0.01 default);
    ``share``: which entries leave the client (:mod:`gflkit.algorithms.sharing`; ``"all"``)."""

    mu: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mu < 0:
            raise ValueError(f"fedprox mu must be >= 0, got {self.mu}")


class FedProx(Method):
    r"""FedAvg with a proximal term in every client's local objective:

    .. math:: \min_w\; f_k(w) + \frac{\mu}{2} \lVert w - w^t \rVert_2^2

    where :math:`w^t` is the global model the round started from (under partial sharing, the model the
    client started from: global on the shared entries, its own elsewhere). Aggregation is FedAvg's. Written on
    the public surface (:class:`~gflkit.algorithms.method.Method`): a proximal weight and nothing else.
    """

    name = "fedprox"
    Params = FedProxParams

    def proximal_weight(self) -> float:
        return self.params.mu
