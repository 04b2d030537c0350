r"""JGESR: robust graph-based aggregation by joint graph estimation and signal restoration (Algorithm 1 of
"Joint Graph Estimation and Signal Restoration for Robust Federated Learning", arXiv 2505.11648).

Every round, client :math:`k` starts from its restored model :math:`\psi_k` and minimises

.. math:: f_k(x) + \frac{\mu}{2}\lVert x - \psi_k\rVert_2^2 \qquad \text{(Eq. 3)},

then uploads :math:`x_k` through the channel (noise, lost entries: :mod:`gflkit.channel`). The server
solves the joint problem of Eq. (11) on what it received — an inter-client graph :math:`W` and restored
models :math:`\Psi` that are smooth on it — and sends :math:`\psi_k` back to client ``k``
(:func:`gflkit.graphs.jgesr.restore`). Clients are evaluated with their restored models.

:class:`JGESR` solves the problem with the proximal DC algorithm (the paper's "PDCA");
:class:`TwoStep` alternates graph learning (Eq. 9) and graph filtering (Eq. 6) (the paper's "Two-step").
Defaults (Sec. 5.1): :math:`\alpha = 0.05`, :math:`\mu = \beta = \gamma = \rho = 1`, :math:`\varepsilon = 10^{-3}`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.federation import Federation
from gflkit.graphs.jgesr import JGESRParams, Restoration, restore
from gflkit.training import Proximal


class JGESR(Algorithm):
    r"""JGESR with PDCA on the server (see the module docstring).

    ``mu`` is both the clients' proximal weight (Eq. 3) and the server's fidelity weight (Eq. 11), as
    in the paper. Rows of clients not sampled in a round enter the server's problem with their last
    received value and mask. After each round :meth:`artifacts` holds the learned graph and the
    objective per solver iteration.
    """

    name = "pdca"
    varying_state = ("received", "mask", "graph", "objective", "rounds", "degrees")
    batchable = True
    solver = "pdca"
    Params = JGESRParams

    #: what :meth:`aggregate` records per round (see :meth:`artifacts`)
    DIAGNOSTICS = ("converged", "graph_converged", "graph_gap", "iterations", "safeguard_steps", "rho",
                   "distance_min", "distance_max", "edges")

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.received: Tensor | None = None
        self.mask: Tensor | None = None
        self.graph: Tensor | None = None
        self.objective: Tensor = torch.zeros(0)
        self.weights: Tensor | None = None
        self.rounds: dict[str, list[float]] = {name: [] for name in self.DIAGNOSTICS}
        self.degrees: list[Tensor] = []

    def check(self, num_clients: int) -> None:
        if num_clients < 2:
            raise ValueError(f"{self.name} learns a graph between clients and needs at least 2, got {num_clients}")

    def setup(self, fed: Federation) -> None:
        fed.global_model = None
        self.received = fed.models.clone()
        self.weights = fed.num_train
        self.mask = None
        self.graph = torch.zeros(fed.num_clients, fed.num_clients, device=fed.device)

    def configure(self, fed: Federation, client: int) -> Tensor:
        return fed.models[client]

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        return {"anchor": fed.models[client]}

    def proximal(self, fed: Federation) -> Proximal:
        return Proximal(self.params.mu, "anchor")

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        self.received[clients] = updates
        if fed.upload_mask is not None:
            if self.mask is None:
                self.mask = torch.ones_like(self.received, dtype=torch.bool)
            self.mask[clients] = fed.upload_mask
        result = restore(self.received, fed.num_train, self.mask, self.params, self.solver)
        fed.models.copy_(result.models)
        self.graph = result.graph
        self.objective = torch.tensor(result.objective)
        self.record(result)

    def record(self, result: Restoration) -> None:
        r"""Keep the round's solver diagnostics: whether it met ε, whether every inner graph solve met its
        tolerance, the final graph's duality gap, iterations, safeguard steps and final ρ (PDCA), the
        range of the received rows' distances :math:`\frac12\lVert x_m - x_n\rVert^2` (with :math:`d`,
        what sets the scale of :math:`\alpha\mathcal D` against :math:`\gamma`), the number of edges of the
        learned graph (its pairs with a weight that is not exactly 0) and the learned degrees."""
        distances = result.distances
        values = {"converged": result.converged, "graph_converged": result.graph_converged,
                  "graph_gap": result.graph_gap, "iterations": result.iterations,
                  "safeguard_steps": result.safeguard_steps, "rho": result.rho,
                  "distance_min": float(distances.min()), "distance_max": float(distances.max()),
                  "edges": int((torch.triu(result.graph, diagonal=1) != 0).sum())}
        for name in self.DIAGNOSTICS:
            self.rounds[name].append(float(values[name]))
        self.degrees.append(result.graph.sum(dim=1).float().cpu())

    def state_dict(self) -> dict[str, Any]:
        return {"received": self.received, "mask": self.mask, "graph": self.graph, "objective": self.objective,
                "rounds": {name: list(values) for name, values in self.rounds.items()}, "degrees": list(self.degrees)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.received, self.mask, self.graph = state["received"], state["mask"], state["graph"]
        self.objective = state["objective"]
        self.rounds = {name: list(state["rounds"][name]) for name in self.DIAGNOSTICS}
        self.degrees = list(state["degrees"])

    def artifacts(self) -> dict[str, Tensor]:
        """The last round's graph and objective per solver iteration; per round the diagnostics of
        :meth:`record` (``converged`` and ``graph_converged`` as booleans), the learned ``degrees``
        (rounds × K) and the models' ``dimension``; and the last round's server problem — the ``received``
        rows, their ``mask`` (None: nothing lost) and the clients' ``weights`` — so that solvers can be
        compared on the same matrix (:func:`gflkit.graphs.jgesr.restore`)."""
        per_round = {name: torch.tensor(values, dtype=torch.bool if name.endswith("converged") else torch.float64)
                     for name, values in self.rounds.items()}
        degrees = torch.stack(self.degrees) if self.degrees else torch.zeros(0)
        return {"adjacency": self.graph, "objective": self.objective, **per_round, "degrees": degrees,
                "dimension": torch.tensor(self.received.shape[1]), "received": self.received, "mask": self.mask,
                "weights": self.weights}


@dataclass(frozen=True)
class ExtrapolatedParams(JGESRParams):
    """:class:`~gflkit.graphs.jgesr.JGESRParams` with pDCAe's extrapolation on by default."""

    extrapolate: bool = True


class JGESRExtrapolated(JGESR):
    r"""``pdca_e``: JGESR's problem solved by PDCA with extrapolation and backtracking on :math:`f`'s upper
    bound (pDCAe) — a documented deviation from Algorithm 1, which gflkit ran as "PDCA" before it
    followed the printed algorithm; kept as its own row where the notebook compares solvers."""

    name = "pdca_e"
    Params = ExtrapolatedParams


class TwoStep(JGESR):
    r"""The paper's "Two-step" baseline: JGESR's problem solved by alternating exact minimisation over the
    graph (Kalofolias graph learning, Eq. 9) and the models (graph filter, Eq. 6), Dong et al. (2016)."""

    name = "two_step"
    solver = "two_step"


__all__ = ["ExtrapolatedParams", "JGESR", "JGESRExtrapolated", "TwoStep"]
