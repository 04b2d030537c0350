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

**Table 4's K-means clusters** (method ``fedcg_kmeans``, with the network's ``domains="assigned"``). The
paper applies K-means "to the parameters of the models trained separately on each client" and says no more.
Our reading (:meth:`FedCGKMeans.cluster_clients`): before the first round every training client trains the
network's domain-agnostic part alone (domain residuals off) from the common initial model for
``kmeans_epochs`` local epochs (10, our choice), and K-means (scikit-learn, ``n_init=10``) with D clusters
on the trained parameter vectors gives each training client one domain for all its images. In training the
domain residuals of a client's images are its cluster's and the student learns the client's cluster in
place of the teacher's pseudo-labels (Eq. 3); an unseen test client never trained, so it has no K-means
cluster: the student assigns its images, as in the classifier rows (Table 4's K-means rows use hard
test-time domains). Everything else — the GCN, Eq. 6, FedAvg — is the classifier rows'.

The paper gives no value of :math:`T`; ``teacher_every = 10`` (ten updates of the teacher in the CelebA
protocol's 100 rounds) is our choice. :math:`\beta` is the model's (0.5, the paper's). The student's
learning rate of 10⁻⁴ against the network's 10⁻³ is a loss weight (:class:`~gflkit.models.fedcg.FedCGNet`),
which equals a separate step size only for plain SGD, so momentum and Adam are refused. Clients are scored
with the global model (FedAvg's ``server`` protocol); the paper's metric is the accuracy over the union of
the unseen test clients' images (``RunConfig.held_out``, :func:`gflkit.metrics.held_out_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

import torch
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.federation import Federation, LocalResult
from gflkit.graphs.adjacency import inverse_distance_similarity, self_weighted
from gflkit.models.fedcg import FedCGNet
from gflkit.training import plain_sgd_obstacle

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


@dataclass(frozen=True)
class FedCGKMeansParams(FedCGParams):
    """FedCG's, and ``kmeans_epochs``: the local epochs of the separately trained models K-means clusters."""

    kmeans_epochs: int = 10

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.kmeans_epochs < 1:
            raise ValueError(f"fedcg_kmeans kmeans_epochs must be >= 1, got {self.kmeans_epochs}")


class FedCG(FedAvg):
    """FedAvg of a FedCG network with the teacher refresh and Eq. 6's adjacency on the server."""

    name = "fedcg"
    varying_state = ("client_domains",)
    Params = FedCGParams
    share = "all"
    #: whether the method sets each client's training domain (a network with ``domains="assigned"``)
    assigns_domains: ClassVar[bool] = False

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.model = fed.flat.module
        if not isinstance(self.model, FedCGNet):
            raise ValueError(f"method {self.name!r} trains a FedCG network: use model='fedcg' (got "
                             f"{type(self.model).__name__})")
        obstacle = plain_sgd_obstacle(fed.train_config)
        if obstacle:
            raise ValueError(f"{self.name} weights the student's loss to give it its own SGD step size, which holds for "
                             f"plain SGD at one rate only; got {obstacle}: use optimizer='sgd', momentum=0 and no "
                             "lr_schedule")
        if self.assigns_domains != (self.model.domains == "assigned"):
            raise ValueError(f"method {self.name!r} with a FedCG network of domains={self.model.domains!r}: the "
                             "network's domains='assigned' goes with a method that assigns each client its domain, "
                             "method='fedcg_kmeans' (Table 4's K-means clusters), and only with it")
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
        """The final λ of every domain layer, its adjacency and the global model (to re-run the student)."""
        views = self.fed.layout.split(self.fed.global_model)
        prefixes = self.model.domain_layer_names()
        return {"lambda": torch.stack([views[f"{p}.scale"].detach().clone() for p in prefixes]).cpu(),
                **{f"adjacency.{p}": views[f"{p}.adjacency"].detach().clone().cpu() for p in prefixes},
                "global_model": self.fed.global_model.detach().clone().cpu()}


class FedCGKMeans(FedCG):
    """FedCG whose training domains are K-means clusters of separately trained client models (Table 4's
    K-means rows; the reading is in the module docstring). Needs the network's ``domains="assigned"``."""

    name = "fedcg_kmeans"
    Params = FedCGKMeansParams
    assigns_domains = True

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        if len(fed.training_clients) < self.model.num_domains:
            raise ValueError(f"K-means cannot make {self.model.num_domains} clusters (num_domains) of "
                             f"{len(fed.training_clients)} training clients")
        self.client_domains: Tensor | None = None

    def cluster_clients(self, fed: Federation) -> Tensor:
        """Every training client trains the domain-agnostic network alone from the initial model for
        ``kmeans_epochs`` epochs, as round 0 (the engine's rounds start at 1, so its minibatch streams are
        its own); K-means with D clusters of the trained parameters. Returns each client's cluster (``-1``
        for held-out clients)."""
        from sklearn.cluster import KMeans

        clients = fed.training_clients
        config = replace(fed.train_config, epochs=self.params.kmeans_epochs)
        parameters = fed.layout.parameter_mask(fed.device)
        self.model.assigned_domain = None
        results = fed.train_clients(clients, 0, fed.initial.expand(len(clients), -1), config=config)
        trained = torch.stack([result.vector[parameters] for result in results]).double().cpu()
        clusters = KMeans(self.model.num_domains, n_init=10, random_state=fed.seed).fit_predict(trained.numpy())
        domains = torch.full((fed.num_clients,), -1, dtype=torch.long)
        domains[clients] = torch.from_numpy(clusters).long()
        return domains

    def round_updates(self, fed: Federation, clients: Tensor, round: int) -> list[LocalResult]:
        """FedAvg's client step, one client after the other, each in its cluster (clustering first)."""
        if self.client_domains is None:
            self.client_domains = self.cluster_clients(fed)
        results = []
        try:
            for k in clients.tolist():
                self.model.assigned_domain = int(self.client_domains[k])
                results += self.train_clients(fed, torch.tensor([k]), round)
        finally:
            self.model.assigned_domain = None
        return results

    def state_dict(self) -> dict[str, Any]:
        return {"client_domains": self.client_domains}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        domains = state["client_domains"]
        self.client_domains = None if domains is None else domains.cpu()

    def artifacts(self) -> dict[str, Tensor]:
        """FedCG's, and every client's cluster (``-1``: held out) once the clients are clustered."""
        clusters = {} if self.client_domains is None else {"client_domains": self.client_domains.clone()}
        return {**super().artifacts(), **clusters}
