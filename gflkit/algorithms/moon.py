"""MOON (Li, He and Song, "Model-Contrastive Federated Learning", CVPR 2021) — Algorithm 1 of the paper."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.algorithms.sharing import SharingParams
from gflkit.algorithms.terms import model_contrastive
from gflkit.federation import Federation, LocalResult
from gflkit.training import LocalStep


@dataclass(frozen=True)
class MOONParams(SharingParams):
    """Hyper-parameters of MOON (defaults: the authors' code, ``main.py``).

    ``share``: which entries leave the client (:mod:`gflkit.algorithms.sharing`; ``"all"``). ``mu``: weight μ of the contrastive term (code default 1; the paper uses 5 on CIFAR-10 and 1 on
    CIFAR-100 / Tiny-ImageNet). ``tau``: temperature τ (0.5). ``pool_size``: how many previous local
    models each client contrasts against (``model_buffer_size``, 1).
    """

    mu: float = 1.0
    tau: float = 0.5
    pool_size: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        check_contrastive(self.mu, self.tau, self.pool_size, "moon", "mu")


def check_contrastive(weight: float, tau: float, pool_size: int, method: str, weight_name: str) -> None:
    """ValueError unless the contrastive term's weight is >= 0, τ > 0 and the pool holds >= 1 model."""
    if weight < 0:
        raise ValueError(f"{method} {weight_name} (weight of the contrastive term) must be >= 0, got {weight}")
    if tau <= 0:
        raise ValueError(f"{method} tau (temperature) must be > 0, got {tau}")
    if pool_size < 1:
        raise ValueError(f"{method} pool_size must be >= 1 previous model, got {pool_size}")


class MOON(FedAvg):
    r"""FedAvg whose local objective adds the model-contrastive term on representations :math:`z`:

    .. math:: \min_w\; f_k(w) + \mu\, \ell_{con}\big(z_w, z_{w^t}, \{z_{w_k^{t-p}}\}_{p=1}^{P}\big)

    (:func:`~gflkit.algorithms.terms.model_contrastive`), where :math:`z_w` is the representation
    (``features``) of the batch under the model being trained, :math:`z_{w^t}` under the global model the
    round started from and :math:`z_{w_k^{t-p}}` under the client's last :math:`P` trained models (kept
    on the client; none in its first round, where the term vanishes). The reference representations are
    computed in eval mode without gradient. Aggregation and evaluation are FedAvg's.
    """

    name = "moon"
    varying_state = ("previous",)
    adds_local_loss = True
    Params = MOONParams

    @property
    def contrastive_weight(self) -> float:
        """The weight of the contrastive term (MOON's μ)."""
        return self.params.mu

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.previous: list[list[Tensor]] = [[] for _ in range(fed.num_clients)]

    def state_dict(self) -> dict[str, Any]:
        return {"previous": self.previous}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.previous = state["previous"]

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        """The client's previous models, ``P × d`` (``0 × d`` before its first training)."""
        history = self.previous[client]
        return {"previous": torch.stack(history) if history else fed.initial.new_zeros(0, fed.dim)}

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        history = step.context["previous"]
        if len(history) == 0 or self.contrastive_weight == 0:
            return None
        z_global = fed.representations(fed.global_model, step.x)
        z_previous = [fed.representations(model, step.x) for model in history.unbind(0)]
        return self.contrastive_weight * model_contrastive(step.features, z_global, z_previous, self.params.tau)

    def finish_client(self, fed: Federation, client: int, result: LocalResult) -> LocalResult:
        result = super().finish_client(fed, client, result)
        trained = self.trained_model(fed, client, result)  # the whole model, also under partial sharing
        self.previous[client] = [*self.previous[client], trained][-self.params.pool_size:]
        return result
