"""CFL, Clustered Federated Learning (Sattler, Müller and Samek, "Clustered Federated Learning:
Model-Agnostic Distributed Multitask Optimization Under Privacy Constraints", IEEE TNNLS 32(8), 2021;
arXiv 1910.01991) — the authors' notebook (github.com/felisat/clustered-federated-learning)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.federation import Federation
from gflkit.graphs.adjacency import cosine_similarity_matrix

MIN_SPLIT_SIZE = 3  # the authors split a cluster only when it has more than two members (``len(idc) > 2``)


@dataclass(frozen=True)
class CFLParams:
    r"""Hyper-parameters of CFL (defaults: the authors' notebook, ``clustered_federated_learning.ipynb``):

    * ``eps_1`` = 0.4: a cluster is near a stationary point of its joint objective when the norm of its
      mean update is below :math:`\varepsilon_1` (``EPS_1``), ≥ 0;
    * ``eps_2`` = 1.6: ... and it is split only if some member's update norm exceeds :math:`\varepsilon_2`
      (``EPS_2``), ≥ 0;
    * ``min_rounds`` = 20: no split before round ``min_rounds + 1`` (the notebook's ``c_round > 20``), an
      integer ≥ 0.

    Both thresholds are absolute norms of model updates: they depend on the model, the learning rate
    and the local epochs (the notebook's: a small ConvNet on EMNIST, SGD lr 0.1, momentum 0.9, 1 epoch).
    """

    eps_1: float = 0.4
    eps_2: float = 1.6
    min_rounds: int = 20

    def __post_init__(self) -> None:
        check_split_options("cfl", self.eps_1, self.eps_2, self.min_rounds)


def check_split_options(method: str, eps_1: float, eps_2: float, min_rounds: int) -> None:
    """ValueError unless both thresholds are >= 0 (not NaN) and ``min_rounds`` is an integer >= 0."""
    for name, value in (("eps_1", eps_1), ("eps_2", eps_2)):
        if not value >= 0:
            raise ValueError(f"{method} {name} must be >= 0, got {value}")
    if not (isinstance(min_rounds, int) and min_rounds >= 0):
        raise ValueError(f"{method} min_rounds must be an integer >= 0, got {min_rounds!r}")


def update_norms(updates: Tensor) -> tuple[float, float]:
    r"""``(mean_norm, max_norm)`` of a cluster's updates: :math:`\lVert\frac1n\sum_i \Delta W_i\rVert` and
    :math:`\max_i \lVert \Delta W_i\rVert` (rows of ``updates``)."""
    return float(updates.mean(dim=0).norm()), float(updates.norm(dim=1).max())


def should_split(updates: Tensor, eps_1: float, eps_2: float) -> bool:
    r"""The split criterion: the cluster is near a stationary point of its joint objective
    (:math:`\lVert \text{mean update}\rVert < \varepsilon_1`) while some client is far from one of its own
    (:math:`\max_i \lVert \Delta W_i\rVert > \varepsilon_2`)."""
    mean_norm, max_norm = update_norms(updates)
    return mean_norm < eps_1 and max_norm > eps_2


def complete_linkage_bipartition(similarity: Tensor) -> Tensor:
    r"""Split ``n ≥ 2`` items into two groups by complete-linkage agglomerative clustering on :math:`-S`.

    Starting from singletons, the two clusters with the smallest complete-linkage distance
    :math:`\max_{i \in a, j \in b} (-S_{ij})` are merged until two remain (the authors'
    ``AgglomerativeClustering(affinity="precomputed", linkage="complete").fit(-S)``). Ties go to the
    first pair in row-major order. Returns a boolean mask that is ``True`` on the group *not*
    containing item 0, so the result does not depend on how the two groups are labelled.
    """
    n = similarity.shape[0]
    if n < 2:
        raise ValueError(f"a bipartition needs at least 2 items, got {n}")
    distance = (-similarity).detach().to("cpu", torch.float64).clone()
    distance.fill_diagonal_(math.inf)
    label = torch.arange(n)
    alive = torch.ones(n, dtype=torch.bool)
    for _ in range(n - 2):
        masked = distance.masked_fill(~(alive[:, None] & alive[None, :]), math.inf)
        a, b = sorted(divmod(int(masked.argmin()), n))
        merged = torch.maximum(distance[a], distance[b])
        distance[a], distance[:, a] = merged, merged
        distance[a, a] = math.inf
        alive[b] = False
        label[label == b] = a
    return (label != label[0]).to(similarity.device)


class CFL(Algorithm):
    r"""Clustered FL by recursive bipartitioning of clusters whose clients' updates disagree.

    The server keeps cluster models :math:`\theta_c` (one at the start: the common initial model) and
    each client's cluster :math:`c(k)`. In every round each sampled client trains from its cluster's
    model and uploads :math:`w_k`; the server forms the updates :math:`\Delta W_k = w_k - \theta_{c(k)}`.
    After round ``min_rounds``, every cluster :math:`c` with at least three sampled members for which

    .. math:: \Big\lVert \frac{1}{|c|}\sum_{k \in c} \Delta W_k \Big\rVert < \varepsilon_1
              \quad\text{and}\quad \max_{k \in c} \lVert \Delta W_k\rVert > \varepsilon_2

    is split in two by complete-linkage clustering of the pairwise cosine similarities
    :math:`\alpha_{ij} = \frac{\langle \Delta W_i, \Delta W_j\rangle}{\lVert\Delta W_i\rVert\lVert\Delta W_j\rVert}`
    (:func:`complete_linkage_bipartition`; the group holding the cluster's first client keeps its
    index, the other becomes a new cluster starting from a copy of :math:`\theta_c`). Then every
    cluster moves by the mean update of its sampled members,

    .. math:: \theta_c \leftarrow \theta_c + \frac{1}{|c \cap S|}\sum_{k \in c \cap S} \Delta W_k ,

    and a client is evaluated with its cluster's model. Norms and similarities are taken over the
    trainable parameters (the notebook's ``named_parameters``); the mean update moves the whole vector.

    Every round is recorded (:meth:`artifacts`): ``clusters_per_round``, the number of clusters after
    the round's split, and ``update_norms``, the two sides of the split criterion in that round (the
    smallest norm of a cluster's mean update over the clusters, the largest client update norm), so a
    table can show whether and when the method clustered, and where its thresholds sit.

    Choices and deviations: the mean is unweighted and there is no extra check of the cross-cluster
    similarity, as in the authors' notebook (the paper weights by data size and also asks the split to
    separate the clusters by a margin :math:`\gamma_{max}`); the notebook's clients use their own SGD
    (momentum 0.9, learning rate decayed by 0.99 each round), here local training is the shared loop;
    the notebook records a split's groups by their positions inside the cluster (right only for the
    first split), here by client id. Under partial participation only the sampled members count, and
    unsampled members of a split cluster stay in the original cluster.
    """

    name = "cfl"
    varying_state = ("cluster_models", "clusters_per_round", "update_norms")
    batchable = True
    Params = CFLParams

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.cluster_models: Tensor | None = None
        self.assignments: Tensor | None = None

    def setup(self, fed: Federation) -> None:
        fed.global_model = None
        self.cluster_models = fed.initial.clone()[None, :]
        self.assignments = torch.zeros(fed.num_clients, dtype=torch.long, device=fed.device)
        self.clusters_per_round: list[int] = []
        self.update_norms: list[tuple[float, float]] = []

    def configure(self, fed: Federation, client: int) -> Tensor:
        return self.cluster_models[self.assignments[client]]

    def split_clusters(self, clients: Tensor, deltas: Tensor) -> None:
        """Bipartition every cluster of the sampled ``clients`` whose updates ``deltas`` meet the criterion."""
        similarity = cosine_similarity_matrix(deltas)
        chosen = self.assignments[clients]
        for cluster in chosen.unique().tolist():
            members = (chosen == cluster).nonzero().squeeze(1)
            if len(members) < MIN_SPLIT_SIZE or not should_split(deltas[members], self.params.eps_1, self.params.eps_2):
                continue
            second = complete_linkage_bipartition(similarity[members][:, members])
            self.open_cluster(cluster, clients[members[second]])

    def open_cluster(self, cluster: int, movers: Tensor) -> None:
        """Split off the clients ``movers`` of ``cluster`` into a new cluster starting from a copy of its model."""
        self.cluster_models = torch.cat([self.cluster_models, self.cluster_models[cluster][None, :]])
        self.assignments[movers] = len(self.cluster_models) - 1

    def mean_update(self, deltas: Tensor, sizes: Tensor) -> Tensor:
        """How a cluster moves given its sampled members' updates (rows) and training sizes: the plain mean."""
        return deltas.mean(dim=0)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        fed.models[clients] = updates
        deltas = updates - self.cluster_models[self.assignments[clients]]
        trainable = deltas[:, fed.layout.parameter_mask(fed.device)]
        self.record_norms(clients, trainable)
        if round > self.params.min_rounds:
            self.split_clusters(clients, trainable)
        self.clusters_per_round.append(len(self.cluster_models))
        chosen = self.assignments[clients]
        for cluster in chosen.unique().tolist():
            members = chosen == cluster
            self.cluster_models[cluster] += self.mean_update(deltas[members], fed.num_train[clients[members]])

    def record_norms(self, clients: Tensor, deltas: Tensor) -> None:
        """Append this round's criterion values: min over clusters of the mean-update norm, max update norm."""
        chosen = self.assignments[clients]
        means = [update_norms(deltas[chosen == cluster])[0] for cluster in chosen.unique().tolist()]
        self.update_norms.append((min(means), float(deltas.norm(dim=1).max())))

    def evaluation_models(self, fed: Federation) -> Tensor:
        return self.cluster_models[self.assignments]

    def state_dict(self) -> dict[str, Any]:
        return {"cluster_models": self.cluster_models, "assignments": self.assignments,
                "clusters_per_round": self.clusters_per_round, "update_norms": self.update_norms}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.cluster_models = state["cluster_models"]
        self.assignments = state["assignments"]
        self.clusters_per_round = state["clusters_per_round"]
        self.update_norms = state["update_norms"]

    def artifacts(self) -> dict[str, Tensor]:
        return {"assignments": self.assignments, "clusters_per_round": torch.tensor(self.clusters_per_round),
                "update_norms": torch.tensor(self.update_norms, dtype=torch.float64).reshape(-1, 2)}
