r"""Joint graph estimation and signal restoration (JGESR, Eqs. 11–15) and its two solvers.

The server receives noisy, possibly incomplete model rows :math:`\tilde X` (``K × d``, mask :math:`M`)
and solves, over the restored models :math:`\Psi` and the inter-client graph's edge vector
:math:`w = \mathrm{upper}(W)`,

.. math:: \min_{\Psi, w \ge 0}\; F(\Psi, w) = \frac{\mu}{2}\lVert M \odot \Psi - \tilde X\rVert_Z^2
          + 2\alpha\, w^\top u(\Psi) - \beta\,\mathbf 1^\top \log(Bw) + \gamma\,\mathbf 1^\top w ,

with :math:`u(\Psi) = \mathrm{upper}(\mathcal D(\Psi))`, :math:`\mathcal D_{mn} = \frac12\lVert\psi_m -
\psi_n\rVert^2`, so that :math:`2\alpha w^\top u = \alpha\,\mathrm{tr}(W\mathcal D) = \alpha\,\mathrm{tr}
(\Psi^\top L \Psi)` — the identity the paper states below Eq. (9), which needs the :math:`\frac12`.
The biconvex coupling is split as in Eq. (13), :math:`2 w^\top u = \lVert w + u\rVert^2 - \lVert w\rVert^2 -
\lVert u\rVert^2`, giving :math:`F = f + g - h` (Eq. 15):

* :math:`f = \frac{\mu}{2}\lVert M\odot\Psi - \tilde X\rVert_Z^2 + \alpha\lVert w + u(\Psi)\rVert^2` (smooth),
* :math:`g = -\beta\mathbf 1^\top\log(Bw) + \gamma\mathbf 1^\top w + \iota_{\ge 0}(w)` (prox-friendly),
* :math:`h = \alpha(\lVert w\rVert^2 + \lVert u(\Psi)\rVert^2)` (convex, linearised).

:func:`pdca` is Algorithm 1; :func:`two_step` alternates exact minimisation over :math:`w` and
:math:`\Psi` (the paper's "Two-step" baseline, Dong et al. 2016). :func:`restore` is what a server calls.

Two facts make this fast for models with millions of parameters. Without lost entries every iterate
stays in the row space of :math:`\tilde X` and every term depends on :math:`\Psi` only through inner
products, so :func:`restore` solves the problem on the ``K × K`` coordinates of the rows in an
orthonormal basis (:math:`\tilde X = C Q^\top`, ``QR`` of :math:`\tilde X^\top`) and maps the result
back, :math:`\Psi = \Psi_C Q^\top` — the same iterates, at a cost independent of ``d``. With lost
entries it iterates on the full ``K × d`` matrix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import Tensor

from gflkit.graphs.adjacency import cosine_similarity_matrix
from gflkit.graphs.graph_learning import (EdgeSpace, degree_barrier, graph_duality_gap, learn_graph,
                                           prox_degree_barrier)
from gflkit.graphs.smoothing import graph_filter, laplacian

SOLVERS = ("pdca", "two_step")


@dataclass(frozen=True)
class JGESRParams:
    r"""Hyper-parameters of the joint problem and its solvers (defaults: JGESR Sec. 5.1).

    * ``alpha`` = 0.05: smoothness weight :math:`\alpha`, > 0;
    * ``beta`` = 1.0: weight :math:`\beta` of the degree log-barrier (no isolated clients), > 0;
    * ``gamma`` = 1.0: weight :math:`\gamma` of the edges' :math:`\ell_1` norm (sparsity), ≥ 0;
    * ``mu`` = 1.0: fidelity weight :math:`\mu` (also the clients' proximal weight, Eq. 3), > 0;
    * ``rho`` = 1.0: PDCA's proximal parameter :math:`\rho`, > 0, fixed as in Algorithm 1; doubled only by
      the safeguard when a step would raise :math:`F` (counted in :attr:`Restoration.safeguard_steps`);
    * ``eps`` = 1e-3: stop when :math:`\lVert \Psi^{(t+1)} - \Psi^{(t)}\rVert_F < \varepsilon`, > 0;
    * ``max_iter`` = 1000: at most this many iterations (the paper gives none), ≥ 1;
    * ``extrapolate`` = False: Algorithm 1 as printed (fixed :math:`\rho`, no extrapolation). ``True`` runs
      pDCAe, our earlier deviation kept as the named method ``pdca_e`` (see :func:`pdca`): extrapolated
      steps and backtracking on :math:`\rho` against :math:`f`'s quadratic upper bound, which — with
      :math:`h`'s quartic curvature — drives :math:`\rho` to 2–8 on trained models. Same problem and fixed
      points, but the stopping rule fires at a different iterate, so the two compute different graphs.
    """

    alpha: float = 0.05
    beta: float = 1.0
    gamma: float = 1.0
    mu: float = 1.0
    rho: float = 1.0
    eps: float = 1e-3
    max_iter: int = 1000
    extrapolate: bool = False

    def __post_init__(self) -> None:
        for name in ("alpha", "beta", "mu", "rho", "eps"):
            if not getattr(self, name) > 0:
                raise ValueError(f"jgesr {name} must be > 0, got {getattr(self, name)}")
        if not self.gamma >= 0:
            raise ValueError(f"jgesr gamma must be >= 0, got {self.gamma}")
        if not (isinstance(self.max_iter, int) and self.max_iter >= 1):
            raise ValueError(f"jgesr max_iter must be an integer >= 1, got {self.max_iter!r}")


@dataclass
class Restoration:
    """A solver's result: restored rows, learned graph, and the objective after every iteration."""

    models: Tensor
    graph: Tensor
    objective: list[float] = field(default_factory=list)
    converged: bool = False
    rho: float = math.nan
    graph_converged: bool = True  # every inner graph solve (Two-step's Eq. 9, PDCA's proxes) met its tolerance
    #: how far the final graph is from the best one for the final models — the duality gap of Eq. (9) at
    #: the restored Ψ, per client and relative to β (0 at stationarity in w; PDCA's rule only looks at Ψ)
    graph_gap: float = math.nan
    safeguard_steps: int = 0  # PDCA steps whose ρ the safeguard doubled because F would have risen
    distances: Tensor | None = None  # u of the received rows, ½‖x̃_m − x̃_n‖² per pair (set by restore)

    @property
    def iterations(self) -> int:
        """Number of iterations run."""
        return len(self.objective) - 1


class JointProblem:
    r"""The terms of :math:`F = f + g - h` for received rows ``received`` (``K × d``), client weights
    ``weights`` (:math:`\zeta`, summing to 1), an optional boolean ``mask`` of received entries, and
    ``params``. Everything is computed in float64."""

    def __init__(self, received: Tensor, weights: Tensor, mask: Tensor | None, params: JGESRParams):
        self.received = received.double()
        self.weights = weights.double()
        self.mask = None if mask is None else mask.double()
        self.params = params
        self.space = EdgeSpace(received.shape[0], received.device)
        self._latest: dict[str, tuple[Tensor, Any]] = {}

    def _memo(self, name: str, models: Tensor, compute: Callable[[Tensor], Any]) -> Any:
        """``compute(models)``, kept for the latest iterate: a solver step asks for the residual, the
        fidelity and the distances of the same iterate several times, and with ``d`` large these
        ``K × d`` passes are the step's cost (iterates are new tensors, never modified in place)."""
        latest = self._latest.get(name)
        if latest is None or latest[0] is not models:
            latest = self._latest[name] = (models, compute(models))
        return latest[1]

    def residual(self, models: Tensor) -> Tensor:
        r""":math:`M \odot \Psi - \tilde X`."""
        return self._memo("residual", models,
                          lambda m: (m if self.mask is None else m * self.mask) - self.received)

    def distances(self, models: Tensor) -> Tensor:
        r""":math:`u(\Psi) = \mathrm{upper}(\mathcal D(\Psi))`, :math:`\mathcal D_{mn} = \frac12\lVert\psi_m - \psi_n\rVert^2`."""

        def compute(m: Tensor) -> Tensor:
            gram = m @ m.T
            squared = gram.diagonal()
            return (0.5 * (squared[:, None] + squared[None, :] - 2.0 * gram)).clamp(min=0.0)[self.space.pairs]

        return self._memo("distances", models, compute)

    def fidelity(self, models: Tensor) -> float:
        r""":math:`\frac{\mu}{2}\lVert M\odot\Psi - \tilde X\rVert_Z^2`."""
        return self._memo("fidelity", models, lambda m: float(
            0.5 * self.params.mu * (self.weights[:, None] * self.residual(m).pow(2)).sum()))

    def smooth(self, models: Tensor, edges: Tensor) -> float:
        r""":math:`f(\Psi, w)`."""
        return self.fidelity(models) + self.params.alpha * float((edges + self.distances(models)).pow(2).sum())

    def objective(self, models: Tensor, edges: Tensor) -> float:
        r""":math:`F(\Psi, w)` (``inf`` where a client has no edge)."""
        coupling = 2.0 * self.params.alpha * float(edges @ self.distances(models))
        return self.fidelity(models) + coupling + degree_barrier(edges, self.space, self.params.beta, self.params.gamma)

    def laplacian_times(self, edges: Tensor, models: Tensor) -> Tensor:
        r""":math:`L(w)\,\Psi` for the graph with edge vector ``edges``."""
        return laplacian(self.space.matrix(edges)) @ models

    def fidelity_gradient(self, models: Tensor) -> Tensor:
        r""":math:`\mu\, Z\, M \odot (M \odot \Psi - \tilde X)`."""
        gradient = self.params.mu * self.weights[:, None] * self.residual(models)
        return gradient if self.mask is None else gradient * self.mask

    def smooth_gradient(self, models: Tensor, edges: Tensor) -> tuple[Tensor, Tensor]:
        r""":math:`\nabla f = (\mu Z M\odot(M\odot\Psi - \tilde X) + 2\alpha L(w + u)\Psi,\; 2\alpha(w + u))`."""
        coupled = edges + self.distances(models)
        alpha = self.params.alpha
        return self.fidelity_gradient(models) + 2.0 * alpha * self.laplacian_times(coupled, models), 2.0 * alpha * coupled

    def concave_gradient(self, models: Tensor, edges: Tensor) -> tuple[Tensor, Tensor]:
        r""":math:`\nabla h = (2\alpha L(u)\Psi,\; 2\alpha w)`."""
        alpha = self.params.alpha
        return 2.0 * alpha * self.laplacian_times(self.distances(models), models), 2.0 * alpha * edges

    def graph_gap(self, models: Tensor, edges: Tensor) -> float:
        r"""How far ``edges`` is from :math:`\arg\min_w F(\Psi, w)`: the duality gap of Eq. (9) with
        :math:`c = 2\alpha u(\Psi) + \gamma`, per client and relative to :math:`\beta`
        (:func:`~gflkit.graphs.graph_learning.graph_duality_gap`)."""
        cost = 2.0 * self.params.alpha * self.distances(models) + self.params.gamma
        return graph_duality_gap(edges, cost, self.space, self.params.beta)

    def initial_edges(self) -> Tensor:
        r""":math:`w^{(0)}`: the cosine similarities of the received rows (Sec. 5.1), negatives set to 0."""
        return self.space.upper(cosine_similarity_matrix(self.received)).clamp(min=0.0)


def proximal_step(
    problem: JointProblem, models: Tensor, edges: Tensor, linearised: tuple[Tensor, Tensor], rho: float,
    upper_bound: bool = False,
) -> tuple[Tensor, Tensor, float, bool]:
    r"""The proximal DC step from :math:`Y = (\Psi, w)` = ``(models, edges)``: ``(Ψ⁺, w⁺, ρ, prox converged)``.

    With :math:`s` = ``linearised``, a gradient of :math:`h`, :math:`\Theta^+ = \mathrm{prox}_{g/\rho}(Y -
    (\nabla f(Y) - s)/\rho)` (Algorithm 1, line 3 of the inner loop); ``g`` acts on ``w`` only, so
    :math:`\Psi^+` is a plain gradient step. With ``upper_bound`` (pDCAe), :math:`\rho` is doubled until
    :math:`f(\Theta^+) \le f(Y) + \langle\nabla f(Y), \Theta^+ - Y\rangle + \frac{\rho}{2}\lVert\Theta^+ -
    Y\rVert^2`, the bound that makes :math:`F` non-increasing when :math:`s = \nabla h(Y)`.
    """
    grad_models, grad_edges = problem.smooth_gradient(models, edges)
    direction_models, direction_edges = grad_models - linearised[0], grad_edges - linearised[1]
    base = problem.smooth(models, edges) if upper_bound else math.nan
    degrees = problem.space.degrees(edges.clamp(min=0.0))
    params = problem.params
    while True:
        new_models = models - direction_models / rho
        prox = prox_degree_barrier(edges, problem.space, params.beta, params.gamma, rho, linear=direction_edges,
                                   start_degrees=degrees)
        if not upper_bound:
            return new_models, prox.edges, rho, prox.converged
        step_models, step_edges = new_models - models, prox.edges - edges
        bound = (base + float((grad_models * step_models).sum() + grad_edges @ step_edges)
                 + 0.5 * rho * float(step_models.pow(2).sum() + step_edges.pow(2).sum()))
        if problem.smooth(new_models, prox.edges) <= bound + 1e-12 * (1.0 + abs(bound)):
            return new_models, prox.edges, rho, prox.converged
        rho *= 2.0


def _rises(value: float, previous: float) -> bool:
    """Whether ``value`` is above ``previous`` by more than float64 rounding of the objective."""
    return value > previous + 1e-12 * (1.0 + abs(previous))


def pdca(problem: JointProblem, models: Tensor, edges: Tensor) -> Restoration:
    r"""Algorithm 1's server part: PDCA from :math:`\Theta = (\Psi^{(0)}, w^{(0)})`,
    :math:`\Theta \leftarrow \mathrm{prox}_{g/\rho}(\Theta - (\nabla f(\Theta) - \nabla h(\Theta))/\rho)` with
    :math:`\rho` fixed, until :math:`\lVert\Psi^{(t+1)} - \Psi^{(t)}\rVert_F < \varepsilon` or ``max_iter``
    iterations.

    The paper takes :math:`\rho \ge \mathrm{Lip}(\nabla f)`, which :math:`f`'s quartic term in
    :math:`\Psi` does not have globally; as a safeguard, a step that would raise :math:`F` is retried with
    :math:`\rho` doubled (kept for the remaining iterations) and counted in ``safeguard_steps`` — 0 means
    the run was Algorithm 1 exactly. With ``params.extrapolate`` it runs pDCAe instead (Wen, Chen and
    Pong, Comput. Optim. Appl. 69, 2018), our earlier deviation: the step starts from :math:`Y =
    \Theta^{(t)} + \frac{\tau_{t-1} - 1}{\tau_t}(\Theta^{(t)} - \Theta^{(t-1)})` with FISTA's :math:`\tau_t`,
    :math:`\rho` backtracks on :math:`f`'s upper bound (:func:`proximal_step`), and a step that would raise
    :math:`F` is replaced by the plain one with the momentum restarted. On the result, ``graph_gap``
    says how far :math:`w` is from the best graph for the final :math:`\Psi`.
    """
    params, rho = problem.params, problem.params.rho
    history = [problem.objective(models, edges)]
    previous_models, previous_edges, momentum = models, edges, 1.0
    converged, proxes_converged, safeguard_steps = False, True, 0
    for _ in range(params.max_iter):
        linearised = problem.concave_gradient(models, edges)
        next_momentum = 0.5 * (1.0 + math.sqrt(1.0 + 4.0 * momentum**2))
        weight = (momentum - 1.0) / next_momentum if params.extrapolate else 0.0
        accepted = False
        if weight > 0:
            start = (models + weight * (models - previous_models), edges + weight * (edges - previous_edges))
            new_models, new_edges, rho, prox_ok = proximal_step(problem, *start, linearised, rho, upper_bound=True)
            value = problem.objective(new_models, new_edges)
            accepted = not _rises(value, history[-1])
            if not accepted:  # the extrapolated step would raise F: restart the momentum
                next_momentum = 1.0
        while not accepted:  # Algorithm 1's step
            new_models, new_edges, rho, prox_ok = proximal_step(problem, models, edges, linearised, rho,
                                                                upper_bound=params.extrapolate)
            value = problem.objective(new_models, new_edges)
            accepted = not _rises(value, history[-1]) or rho >= 2.0**50 * params.rho  # else a step of ~0
            if not accepted:
                rho, safeguard_steps = 2.0 * rho, safeguard_steps + 1
        proxes_converged = proxes_converged and prox_ok
        history.append(value)
        moved = float((new_models - models).norm())
        previous_models, previous_edges, momentum = models, edges, next_momentum
        models, edges = new_models, new_edges
        if moved < params.eps:
            converged = True
            break
    return Restoration(models, problem.space.matrix(edges), history, converged, rho, proxes_converged,
                       problem.graph_gap(models, edges), safeguard_steps)


def two_step(problem: JointProblem, models: Tensor, edges: Tensor) -> Restoration:
    r"""The Two-step baseline: alternate :math:`w \leftarrow \arg\min_w F(\Psi, w)` (graph learning, Eq. 9)
    and :math:`\Psi \leftarrow \arg\min_\Psi F(\Psi, w)` (graph filtering, Eq. 6) until
    :math:`\lVert\Delta\Psi\rVert_F < \varepsilon` or ``max_iter`` alternations."""
    params = problem.params
    history = [problem.objective(models, edges)]
    converged, graph_converged = False, True
    for _ in range(params.max_iter):
        learned = learn_graph(problem.distances(models), problem.space, params.alpha, params.beta, params.gamma,
                              start=edges)
        edges, graph_converged = learned.edges, graph_converged and learned.converged
        new_models = graph_filter(problem.received, problem.space.matrix(edges), problem.weights, params.alpha,
                                  params.mu, None if problem.mask is None else problem.mask.bool())
        history.append(problem.objective(new_models, edges))
        moved = float((new_models - models).norm())
        models = new_models
        if moved < params.eps:
            converged = True
            break
    return Restoration(models, problem.space.matrix(edges), history, converged, params.rho, graph_converged,
                       problem.graph_gap(models, edges))


def row_space_coordinates(rows: Tensor) -> tuple[Tensor, Tensor]:
    r"""``(C, Q)`` with :math:`\text{rows} = C Q^\top`, :math:`Q` (``d × K``) orthonormal columns, ``C`` ``K × K``."""
    basis, triangle = torch.linalg.qr(rows.T)
    return triangle.T, basis


def restore(
    received: Tensor, weights: Tensor, mask: Tensor | None = None, params: JGESRParams = JGESRParams(),
    solver: str = "pdca",
) -> Restoration:
    r"""Restore the received rows and learn the inter-client graph (what JGESR's server does each round).

    Starts from :math:`\Psi^{(0)} = \tilde X` and :math:`w^{(0)}` the received rows' cosine similarities;
    ``weights`` are :math:`\zeta_k` (normalised here). Without a ``mask`` (or with nothing lost) the
    problem is solved in the rows' ``K``-dimensional coordinates (see the module docstring). Returns
    the restored rows in the dtype and on the device of ``received``.
    """
    if solver not in SOLVERS:
        raise ValueError(f"unknown JGESR solver {solver!r}; choose one of {list(SOLVERS)}")
    weights = weights.double() / weights.double().sum()
    if mask is not None and bool(mask.all()):
        mask = None
    reduce = mask is None and received.shape[1] > received.shape[0]
    coordinates, basis = row_space_coordinates(received.double()) if reduce else (received.double(), None)
    problem = JointProblem(coordinates, weights, mask, params)
    edges = problem.initial_edges()
    result = (pdca if solver == "pdca" else two_step)(problem, coordinates.clone(), edges)
    result.distances = problem.distances(problem.received)
    result.models = (result.models @ basis.T if reduce else result.models).to(received.dtype)
    result.graph = result.graph.to(received.dtype)
    return result


__all__ = ["JGESRParams", "JointProblem", "Restoration", "SOLVERS", "pdca", "proximal_step", "restore", "two_step"]
