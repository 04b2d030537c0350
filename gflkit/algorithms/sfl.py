"""SFL, Structured Federated Learning (Chen, Long, Wang and Jiang, "Personalized Federated Learning
With Graph" / "Structured Federated Aggregation for Personalizing On-device Intelligence", arXiv
2203.00829) — Algorithm 1 with a given client graph."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.algorithms.terms import squared_distance
from gflkit.federation import Federation
from gflkit.graphs.adjacency import row_normalize
from gflkit.graphs.given import GivenGraphOptions
from gflkit.training import LocalStep

STARTS = ("personal", "global", "graph")


@dataclass(frozen=True)
class SFLParams(GivenGraphOptions):
    """Hyper-parameters of SFL (published defaults from the authors' code, NOTES.md):

    * ``lam_graph`` = 0.3, ``lam_global`` = 0.3: weights of the pulls towards the graph-aggregated
      model :math:`u_k` and the global model :math:`w` (the code's ``0.3·reg1 + 0.3·reg2``), ≥ 0;
    * ``layers`` = 3: propagation hops of the server GCN (``--layers 3``), ≥ 1;
    * ``alpha`` = 1.0: mix of the propagated and the unpropagated models (``--serveralpha 1``), in [0, 1];
    * ``start``: what local training starts from — ``"personal"`` (the paper's Algorithm 1: the
      client's own :math:`v_k`), ``"global"`` (both authors' codes) or ``"graph"`` (:math:`u_k`);
    * graph options: see :class:`~gflkit.graphs.given.GivenGraphOptions`.
    """

    lam_graph: float = 0.3
    lam_global: float = 0.3
    layers: int = 3
    alpha: float = 1.0
    start: str = "personal"

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("lam_graph", "lam_global"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"sfl {name} must be >= 0, got {getattr(self, name)}")
        if not (isinstance(self.layers, int) and self.layers >= 1):
            raise ValueError(f"sfl layers must be an integer >= 1, got {self.layers!r}")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"sfl alpha must lie in [0, 1], got {self.alpha}")
        if self.start not in STARTS:
            raise ValueError(f"sfl start must be one of {list(STARTS)}, got {self.start!r}")


def graph_propagate(propagation: Tensor, models: Tensor, layers: int, alpha: float = 1.0) -> Tensor:
    r"""The server's structure-based aggregation: :math:`U = \alpha \hat A^{L} V + (1 - \alpha) V`.

    ``propagation`` is :math:`\hat A` (``K × K``), ``models`` the ``K × d`` matrix :math:`V`; the mix
    with the unpropagated models is applied once, after the :math:`L` hops (the authors' ``graph_dic``).
    """
    out = models
    for _ in range(layers):
        out = propagation @ out
    return alpha * out + (1.0 - alpha) * models


class SFL(Algorithm):
    r"""Structured FL over a given client graph.

    One round (Algorithm 1 of the paper, with :math:`\lambda = \mathbb{1}[t > 1]\,\lambda_0`):

    1. **Clients.** Every sampled client trains its personalised model :math:`v_k` (row ``k`` of
       ``fed.models``) on

       .. math:: f_k(v_k) + \frac{\lambda_u}{2}\lVert v_k - u_k\rVert_2^2 + \frac{\lambda_w}{2}\lVert v_k - w\rVert_2^2

       with the :math:`u_k` and :math:`w` of the previous round (no regulariser in the first round,
       where both are the initial model). It starts from ``start`` (the paper: its own :math:`v_k`).
    2. **Server, structure-based aggregation.** The GCN propagates the personalised models over the
       graph, :math:`U = \alpha \hat A^{L} V + (1 - \alpha) V` with :math:`\hat A = D^{-1}(A + I)` (the
       authors' row normalisation with self loops); rows of clients not sampled this round enter with
       their last :math:`v_k`.
    3. **Server, read-out.** The global model is the mean of the aggregated models,
       :math:`w = \frac1K \sum_k u_k`.

    Evaluation: under the ``"local"`` protocol a client is scored with its personalised model
    :math:`v_k` after local training (the paper's, and what the FedSKA authors' SFL evaluates); under
    ``"server"`` with the model the server holds for it, its aggregated :math:`u_k` (what the SFL
    authors' ``main.py`` validates: ``personalized_model[c]``).

    Choices where the paper and the code differ: the regulariser here is the paper's squared L2
    (Ditto's ½‖·‖², with the code's coefficients 0.3); both authors' codes apply ``0.3·‖·‖`` to
    *detached* copies of the weights, so their regulariser has no gradient. Both codes start local
    training from the global model; the paper trains :math:`v_k` from itself.
    FedSKA's Table 1 ran SFL with its learned graph (``agg="graph_v2"``, SFL*), which is not this
    given-graph variant.
    """

    name = "sfl"
    Params = SFLParams

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.adjacency: Tensor | None = None
        self.aggregated: Tensor | None = None

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.adjacency = self.params.build_graph(fed)
        self.aggregated = fed.models.clone()

    def propagation(self) -> Tensor:
        r""":math:`\hat A = D^{-1}(A + I)`."""
        return row_normalize(self.adjacency + torch.eye(len(self.adjacency), device=self.adjacency.device))

    def configure(self, fed: Federation, client: int) -> Tensor:
        if self.params.start == "global":
            return fed.global_model
        return (fed.models if self.params.start == "personal" else self.aggregated)[client]

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        if step.round <= 1:
            return None
        params = fed.flat.parameters
        to_graph = squared_distance(params, fed.flat.parameters_as_views(self.aggregated[step.client]))
        to_global = squared_distance(params, fed.flat.parameters_as_views(fed.global_model))
        return 0.5 * (self.params.lam_graph * to_graph + self.params.lam_global * to_global)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        fed.models[clients] = updates
        self.aggregated = graph_propagate(self.propagation(), fed.models, self.params.layers, self.params.alpha)
        fed.global_model = self.aggregated.mean(dim=0)

    def evaluation_models(self, fed: Federation) -> Tensor:
        return self.aggregated

    def state_dict(self) -> dict[str, Any]:
        return {"adjacency": self.adjacency, "aggregated": self.aggregated}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.adjacency = state["adjacency"]
        self.aggregated = state["aggregated"]

    def artifacts(self) -> dict[str, Tensor]:
        return {"adjacency": self.adjacency}
