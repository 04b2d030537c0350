"""pFedGraph (Ye, Ni, Wu, Chen and Wang, "Personalized Federated Learning with Inferred Collaboration
Graphs", ICML 2023) — the cosine variant of the authors' code (github.com/MediaBrain-SJTU/pFedGraph,
``pfedgraph_cosine.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.algorithms.terms import cosine_similarity
from gflkit.communication import Communication
from gflkit.federation import Federation
from gflkit.graphs.adjacency import cosine_similarity_matrix
from gflkit.training import LocalStep

SIMILARITY_CAP = 0.9  # the authors' code treats cosine similarities above 0.9 as 1
REGULARIZERS = ("aggregate", "neighbours")


@dataclass(frozen=True)
class PFedGraphParams:
    r"""Hyper-parameters of pFedGraph (defaults: the authors' ``run_cifar10.sh`` and argparse defaults):

    * ``alpha`` = 0.8: weight :math:`\alpha` of the pull of each row of the collaboration graph towards
      the clients' data shares (``--alpha 0.8``), > 0;
    * ``lam`` = 0.01: weight :math:`\lambda` of the cosine-similarity regulariser (``--lam 0.01``), ≥ 0;
    * ``regularizer``: ``"aggregate"`` (default) :math:`-\lambda\cos(w, \tilde w_k)`, the similarity to
      the personalised aggregate — our reading of the paper's regulariser between the local and the
      aggregated model; ``"neighbours"`` :math:`-\lambda\sum_j a_{kj}\cos(w, w_j)`, the authors' code's
      form (its ``dot(c, w) / ‖w‖`` with :math:`c = \sum_j a_{kj} w_j / \lVert w_j\rVert` is exactly this
      weighted sum of per-neighbour cosines), with the pulling sign.

    The model difference is measured on all parameters (``--difference_measure "all"``, the first of
    the authors' runs; their ``"fc"`` variant is not implemented).
    """

    alpha: float = 0.8
    lam: float = 0.01
    regularizer: str = "aggregate"

    def __post_init__(self) -> None:
        if self.regularizer not in REGULARIZERS:
            raise ValueError(f"pfedgraph regularizer must be one of {list(REGULARIZERS)}, got {self.regularizer!r}")
        if not self.alpha > 0:
            raise ValueError(f"pfedgraph alpha must be > 0, got {self.alpha}")
        if not self.lam >= 0:
            raise ValueError(f"pfedgraph lam must be >= 0, got {self.lam}")


def project_rows_to_simplex(values: Tensor) -> Tensor:
    r"""Euclidean projection of every row of ``values`` onto the probability simplex.

    Row ``v`` becomes :math:`\arg\min_{a \ge 0,\ \mathbf 1^\top a = 1} \lVert a - v\rVert^2 =
    \max(v - \theta, 0)`, with :math:`\theta = (\sum_{j \le \rho} u_j - 1)/\rho` where :math:`u` is
    ``v`` sorted in decreasing order and :math:`\rho` the largest :math:`j` with
    :math:`u_j - (\sum_{i \le j} u_i - 1)/j > 0` (Held, Wolfe and Crowder 1974; Duchi et al. 2008).
    """
    ranked = values.sort(dim=1, descending=True).values
    excess = ranked.cumsum(dim=1) - 1.0
    ranks = torch.arange(1, values.shape[1] + 1, device=values.device, dtype=values.dtype)
    support = ranked - excess / ranks > 0
    rho = (support * ranks).argmax(dim=1, keepdim=True)  # the last position of the support
    theta = excess.gather(1, rho) / (rho + 1).to(values.dtype)
    return (values - theta).clamp(min=0.0)


def update_similarity(updates: Tensor) -> Tensor:
    r"""Pairwise cosine similarities of the clients' cumulative updates, entries above
    :data:`SIMILARITY_CAP` set to 1 (the authors' ``diff < -0.9 → -1``)."""
    similarity = cosine_similarity_matrix(updates)
    return torch.where(similarity > SIMILARITY_CAP, torch.ones_like(similarity), similarity)


def collaboration_weights(similarity: Tensor, sizes: Tensor, alpha: float) -> Tensor:
    r"""pFedGraph's graph inference: row :math:`a_k` of the collaboration graph solves the QP

    .. math:: \min_{a \ge 0,\ \mathbf 1^\top a = 1}\; \alpha \lVert a - p\rVert_2^2 - \sum_j a_j\, s_{kj}
              \;=\; \min_{a \in \Delta} \alpha \Big\lVert a - \big(p + \tfrac{s_k}{2\alpha}\big)\Big\rVert_2^2
              + \text{const},

    with :math:`p_j = n_j / \sum_i n_i` the clients' data shares and :math:`s_{kj}` the similarity
    (the authors' ``cp.quad_form(x, αI) + (d - 2αp)ᵀx`` with :math:`d = -s`). Completing the square
    makes it a Euclidean projection onto the simplex, solved exactly for all rows at once.
    """
    shares = sizes / sizes.sum()
    return project_rows_to_simplex(shares[None, :] + similarity / (2.0 * alpha))


def initial_graph(num_clients: int, device: torch.device | str | None = None) -> Tensor:
    """The authors' initial collaboration graph: uniform weights over the other clients, none on itself."""
    if num_clients == 1:
        return torch.ones(1, 1, device=device)
    return (1.0 - torch.eye(num_clients, device=device)) / (num_clients - 1)


class PFedGraph(Algorithm):
    r"""Personalised aggregation over an inferred collaboration graph.

    One round:

    1. **Clients.** Every sampled client trains from its personalised model :math:`\tilde w_k` (the
       aggregate it received last round; the initial model at first) on

       .. math:: \min_w\; f_k(w) - \lambda \cos(w, \tilde w_k), \qquad
                 \cos(w, \tilde w_k) = \frac{\langle w, \tilde w_k\rangle}{\lVert w\rVert \lVert \tilde w_k\rVert}

       (no regulariser in the first round, when no aggregate exists) and uploads the result :math:`w_k`.
    2. **Server, graph inference.** With the cumulative updates :math:`\Delta w_k = w_k - w^0` (from the
       common initial model) and their cosine similarities :math:`s_{kj}` (:func:`update_similarity`),
       each sampled client's row of the graph is the QP solution of :func:`collaboration_weights`
       over the sampled clients (its other entries are zero).
    3. **Server, aggregation.** Client ``k`` receives :math:`\tilde w_k = \sum_j a_{kj} w_j`, i.e.
       :math:`\tilde W_S = A_{SS} W_S`.

    Every client is evaluated with its personalised model :math:`\tilde w_k`; similarities use the
    trainable parameters, aggregation the whole vector.

    Deviations from the authors' code: the QP is solved exactly (projection onto the simplex) instead
    of with cvxpy. Their local term is ``+ lam * dot(c, w) / ‖w‖`` with
    :math:`c = \sum_j a_{kj} w_j / \lVert w_j\rVert`, i.e. :math:`+\lambda \sum_j a_{kj}\cos(w, w_j)`, a sum of
    per-neighbour cosines with a positive sign, which *lowers* the similarity to the neighbours; here the
    pulling sign (the graph objective's distance is :math:`-\cos`), on the aggregate by default or on the
    neighbours with ``regularizer="neighbours"``. Their clients train a fixed number of iterations with SGD momentum 0.9
    and weight decay 1e-5, and they report each client's best accuracy (by validation) before or after
    local training; here local training is the shared loop and the aggregate is evaluated.
    """

    name = "pfedgraph"
    adds_local_loss = True
    batchable = True
    Params = PFedGraphParams

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.graph: Tensor | None = None

    def setup(self, fed: Federation) -> None:
        fed.global_model = None
        self.graph = initial_graph(fed.num_clients, fed.device)
        self.neighbour_sum = torch.zeros_like(fed.models)  # c_k = Σ_j a_kj w_j / ‖w_j‖ ("neighbours" form)

    def configure(self, fed: Federation, client: int) -> Tensor:
        return fed.models[client]

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        anchors = {"aggregate": fed.models, "neighbours": self.neighbour_sum}[self.params.regularizer]
        return {"anchor": anchors[client]}

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        if step.round <= 1 or self.params.lam == 0:
            return None
        anchor = fed.flat.parameters_as_views(step.context["anchor"])
        if self.params.regularizer == "aggregate":
            return -self.params.lam * cosine_similarity(step.params, anchor)
        # Σ_j a_kj cos(w, w_j) = ⟨w, c_k⟩ / ‖w‖ = ‖c_k‖ cos(w, c_k)
        scale = torch.stack([a.pow(2).sum() for a in anchor]).sum().sqrt()
        return -self.params.lam * scale * cosine_similarity(step.params, anchor)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        mask = fed.layout.parameter_mask(fed.device)
        similarity = update_similarity(updates[:, mask] - fed.initial[mask])
        weights = collaboration_weights(similarity, fed.num_train[clients], self.params.alpha)
        self.graph[clients] = 0.0
        self.graph[clients[:, None], clients[None, :]] = weights
        fed.models[clients] = weights @ updates
        if self.params.regularizer == "neighbours":
            norms = updates[:, mask].norm(dim=1, keepdim=True).clamp(min=1e-12)
            self.neighbour_sum[clients] = weights @ (updates / norms)

    def communication(self, fed: Federation) -> Communication:
        r"""The trained :math:`w_k` up; down the aggregate :math:`\tilde w_k` (start and anchor), and with
        ``regularizer="neighbours"`` (λ > 0) also :math:`c_k = \sum_j a_{kj} w_j / \lVert w_j\rVert`."""
        neighbours = self.params.regularizer == "neighbours" and self.params.lam > 0
        return Communication(fed.dim, (2 if neighbours else 1) * fed.dim)

    def evaluation_models(self, fed: Federation) -> Tensor:
        return fed.models

    def state_dict(self) -> dict[str, Any]:
        return {"graph": self.graph, "neighbour_sum": self.neighbour_sum}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.graph, self.neighbour_sum = state["graph"], state["neighbour_sum"]

    def artifacts(self) -> dict[str, Tensor]:
        return {"graph": self.graph}
