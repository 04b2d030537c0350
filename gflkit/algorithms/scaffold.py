"""SCAFFOLD (Karimireddy, Kale, Mohri, Reddi, Stich and Suresh, "SCAFFOLD: Stochastic Controlled
Averaging for Federated Learning", ICML 2020) — Algorithm 1 with control variates of option II."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.communication import Communication
from gflkit.federation import Federation, LocalResult
from gflkit.training import LocalStep, plain_sgd_obstacle


@dataclass(frozen=True)
class ScaffoldParams:
    """``global_lr``: the server step size :math:`\\eta_g` (> 0; 1 in the paper's experiments, which makes
    the server step the plain average of the client models)."""

    global_lr: float = 1.0

    def __post_init__(self) -> None:
        if not self.global_lr > 0:
            raise ValueError(f"scaffold global_lr must be > 0, got {self.global_lr}")


class Scaffold(FedAvg):
    r"""Federated averaging with control variates that correct the clients' drift.

    The server keeps a control variate :math:`c`, every client :math:`i` its own :math:`c_i` (all zero at
    first). A sampled client starts from the global model :math:`x` and takes its :math:`K_i` SGD steps
    on the corrected gradient

    .. math:: y_i \leftarrow y_i - \eta_l\,\big(g_i(y_i) - c_i + c\big)

    (a linear loss term :math:`\langle y_i, c - c_i\rangle` whose gradient is the correction), then
    updates its control variate with option II of the paper,

    .. math:: c_i^+ = c_i - c + \frac{1}{K_i \eta_l}(x - y_i).

    The server averages the model and control updates of the sampled clients :math:`S` (of the :math:`N`
    clients that train: unseen test clients, ``RunConfig.held_out``, never do, and counting them would
    shrink :math:`c` below the mean of the :math:`c_i`):

    .. math::
        x \leftarrow x + \frac{\eta_g}{|S|}\sum_{i \in S}(y_i - x), \qquad
        c \leftarrow c + \frac{1}{N}\sum_{i \in S}(c_i^+ - c_i).

    Control variates and :math:`\eta_g` cover the trainable parameters only (buffers such as BatchNorm
    statistics get no control variate and are averaged). The correction assumes plain SGD steps, so a run
    with Adam or momentum is refused. The control-variate updates travel outside the uplink channel
    (:mod:`gflkit.channel` corrupts the model uploads only). Every client is scored with
    the global model under the ``server`` protocol, as FedAvg.
    """

    name = "scaffold"
    client_step = "one_by_one"
    adds_local_loss = True
    Params = ScaffoldParams
    share = "all"

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.server_control: Tensor | None = None
        self.client_controls: Tensor | None = None
        self._pending: dict[int, Tensor] = {}
        self._steps = 0

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        obstacle = plain_sgd_obstacle(fed.train_config)
        if obstacle:
            raise ValueError(f"scaffold's control variates assume plain SGD local steps at one rate (option II "
                             f"divides the displacement by K·lr), got {obstacle}; use optimizer='sgd', "
                             "momentum=0 and no lr_schedule")
        self.trainable = fed.layout.parameter_mask(fed.device)
        self.server_control = torch.zeros(fed.dim, device=fed.device)
        self.client_controls = torch.zeros(fed.num_clients, fed.dim, device=fed.device)
        self.num_training = len(fed.training_clients)

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        return {"correction": self.server_control - self.client_controls[client]}

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor:
        self._steps += 1
        correction = fed.flat.parameters_as_views(step.context["correction"])
        return torch.stack([(p * c).sum() for p, c in zip(step.params, correction)]).sum()

    def client_update(self, fed: Federation, client: int, round: int) -> LocalResult:
        self._steps = 0
        start = self.configure(fed, client)
        result = super().client_update(fed, client, round)
        old = self.client_controls[client]
        drift = (start - result.vector) / (max(self._steps, 1) * fed.train_config.lr)
        new = torch.where(self.trainable, old - self.server_control + drift, torch.zeros_like(old))
        self._pending[client] = new - old
        self.client_controls[client] = new
        return result

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        fed.models[clients] = updates
        step = torch.where(self.trainable, self.params.global_lr, 1.0)  # buffers (BatchNorm statistics): averaged
        fed.global_model = fed.global_model + step * (updates - fed.global_model).mean(dim=0)
        deltas = torch.stack([self._pending.pop(int(k)) for k in clients])
        self.server_control = self.server_control + deltas.sum(dim=0) / self.num_training

    def communication(self, fed: Federation) -> Communication:
        """FedAvg's model (``d`` each way) plus a control variate on the trainable entries each way: the
        server's :math:`c` down, the client's :math:`c_i^+ - c_i` up (``2d`` without buffers)."""
        return super().communication(fed) + Communication.both(int(self.trainable.sum()))

    def state_dict(self) -> dict[str, Any]:
        return {"server_control": self.server_control, "client_controls": self.client_controls}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.server_control = state["server_control"]
        self.client_controls = state["client_controls"]
