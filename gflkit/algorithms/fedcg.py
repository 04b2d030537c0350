r"""FedCG (Caporali, Bonafede, Bocchino, Poiesi, Ricci, Mancini — "Cluster-driven Graph Federated Learning
over Multiple Domains", CVPR-W 2021): FedAvg of a :class:`~gflkit.models.fedcg.FedCGNet`, whose
domain-specific residual layers are linked by a GCN, plus the server's two extra duties.

Every round the clients train the whole network — domain-agnostic parameters :math:`\theta_a`,
domain-specific :math:`\theta_s`, the GCN's :math:`\mathbf W`, the :math:`\lambda_\ell` and the student
domain classifier :math:`\varphi` (Eq. 3, the model's auxiliary loss) — and the server averages
everything with FedAvg (Eq. 2). Then the server

1. every ``teacher_every`` (:math:`T`) rounds copies the student into the teacher, :math:`\phi \leftarrow \varphi`
   (Sec. 3.1), and restarts the running mean of its scores (the centring of the pseudo-labels,
   :class:`~gflkit.models.fedcg.FedCGNet`);
2. recomputes every domain layer's adjacency from the averaged domain parameters (Eq. 6,
   ``adjacency="distance"``): :math:`h_{ij} = 1/\lVert\theta^i_s - \theta^j_s\rVert_2`,
   :math:`A_{ii} = \beta`, off-diagonal :math:`(1-\beta)\,h_{ij}/\sum_{d\ne i} h_{id}`; ``"fixed"`` keeps the
   model's initial ``A`` (identity, uniform or random: Table 4's "A init").

The paper gives no value of :math:`T`; ``teacher_every = 10`` (ten updates of the teacher in the CelebA
protocol's 100 rounds) is our choice. :math:`\beta` is the model's (0.5, the paper's). The student's
learning rate of 10⁻⁴ against the network's 10⁻³ is a loss weight (:class:`~gflkit.models.fedcg.FedCGNet`),
which equals a separate step size only for plain SGD, so momentum and Adam are refused. Clients are scored
with the global model (FedAvg's ``server`` protocol); the paper's metric is the accuracy over the union of
the unseen test clients' images (``RunConfig.held_out``, :func:`gflkit.metrics.held_out_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.federation import Federation
from gflkit.graphs.adjacency import inverse_distance_similarity, self_weighted
from gflkit.models.fedcg import FedCGNet

ADJACENCIES = ("distance", "fixed")


@dataclass(frozen=True)
class FedCGParams:
    """``teacher_every``: T, rounds between copies of the student into the teacher; ``adjacency``:
    ``"distance"`` (Eq. 6 after every round) or ``"fixed"`` (the model's initial A throughout)."""

    teacher_every: int = 10
    adjacency: str = "distance"

    def __post_init__(self) -> None:
        if self.teacher_every < 1:
            raise ValueError(f"fedcg teacher_every must be >= 1 round, got {self.teacher_every}")
        if self.adjacency not in ADJACENCIES:
            raise ValueError(f"unknown fedcg adjacency {self.adjacency!r}; choose one of {list(ADJACENCIES)}")


class FedCG(FedAvg):
    """FedAvg of a FedCG network with the teacher refresh and Eq. 6's adjacency on the server."""

    name = "fedcg"
    Params = FedCGParams
    share = "all"

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.model = fed.flat.module
        if not isinstance(self.model, FedCGNet):
            raise ValueError(f"method 'fedcg' trains a FedCG network: use model='fedcg' (got "
                             f"{type(self.model).__name__})")
        if fed.train_config.optimizer != "sgd" or fed.train_config.momentum != 0:
            raise ValueError("fedcg weights the student's loss to give it its own SGD step size, which holds for "
                             f"plain SGD only; got optimizer {fed.train_config.optimizer!r} with momentum "
                             f"{fed.train_config.momentum}: use optimizer='sgd', momentum=0")
        self.fed = fed

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        super().aggregate(fed, clients, updates, round)
        views = fed.layout.split(fed.global_model)
        with torch.no_grad():
            if round % self.params.teacher_every == 0:
                for name, _ in self.model.student.named_parameters():
                    views[f"teacher.{name}"].copy_(views[f"student.{name}"])
                views["teacher_center"].zero_()  # a new teacher: its scores' running mean starts again
                views["teacher_center_batches"].zero_()
            if self.params.adjacency == "distance":
                for prefix in self.model.domain_layer_names():
                    similarity = inverse_distance_similarity(views[f"{prefix}.values"])
                    views[f"{prefix}.adjacency"].copy_(self_weighted(similarity, self.model.beta))

    def artifacts(self) -> dict[str, Tensor]:
        """The final λ of every domain layer, its adjacency, and the global model (to re-run the student)."""
        views = self.fed.layout.split(self.fed.global_model)
        prefixes = self.model.domain_layer_names()
        return {"lambda": torch.stack([views[f"{p}.scale"].detach().clone() for p in prefixes]).cpu(),
                **{f"adjacency.{p}": views[f"{p}.adjacency"].detach().clone().cpu() for p in prefixes},
                "global_model": self.fed.global_model.detach().clone().cpu()}
