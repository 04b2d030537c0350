r"""Learning a graph from smooth signals (Kalofolias 2016; JGESR Eq. 9) on the edge vector of ``K`` nodes.

A symmetric, non-negative, zero-diagonal graph :math:`W` is its vector of upper-triangular weights
:math:`w = \mathrm{upper}(W) \in \mathbb R^{K(K-1)/2}`; the degrees are :math:`W\mathbf 1 = Bw`.
The non-smooth part of the graph-learning objective is

.. math:: g(w) = -\beta\, \mathbf 1^\top \log(Bw) + \gamma\, \mathbf 1^\top w + \iota_{\ge 0}(w)

(the log barrier keeps every node connected, the :math:`\ell_1` term makes the graph sparse), and
:func:`prox_degree_barrier` evaluates its proximal operator exactly, which is all that JGESR's PDCA
(Algorithm 1) and the Two-step graph update need.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import torch
from torch import Tensor


@dataclass(frozen=True)
class EdgeSpace:
    """The ``K(K-1)/2`` node pairs ``(i < j)`` of a graph on ``num_nodes`` nodes, in row-major order."""

    num_nodes: int
    device: torch.device | str = "cpu"

    def __post_init__(self) -> None:
        if self.num_nodes < 2:
            raise ValueError(f"a graph to learn needs at least 2 nodes, got {self.num_nodes}")

    @cached_property
    def pairs(self) -> tuple[Tensor, Tensor]:
        """Row and column indices of the ``K(K-1)/2`` pairs (computed once; solvers ask every iteration)."""
        rows, cols = torch.triu_indices(self.num_nodes, self.num_nodes, offset=1, device=self.device)
        return rows, cols

    def upper(self, matrix: Tensor) -> Tensor:
        r""":math:`\mathrm{upper}(A)`, the strictly upper-triangular entries of ``matrix`` as a vector."""
        rows, cols = self.pairs
        return matrix[rows, cols]

    def matrix(self, edges: Tensor) -> Tensor:
        """The symmetric, zero-diagonal ``K × K`` matrix whose upper triangle is ``edges``."""
        rows, cols = self.pairs
        full = edges.new_zeros(self.num_nodes, self.num_nodes)
        full[rows, cols] = edges
        full[cols, rows] = edges
        return full

    def degrees(self, edges: Tensor) -> Tensor:
        r""":math:`Bw`: every node's summed edge weight."""
        rows, cols = self.pairs
        return edges.new_zeros(self.num_nodes).index_add_(0, rows, edges).index_add_(0, cols, edges)


def degree_barrier(edges: Tensor, space: EdgeSpace, beta: float, gamma: float) -> float:
    r""":math:`g(w) = -\beta \mathbf 1^\top\log(Bw) + \gamma \mathbf 1^\top w` (``inf`` where a node has degree 0)."""
    degrees = space.degrees(edges)
    if bool((edges < 0).any()) or bool((degrees <= 0).any()):
        return math.inf
    return float(-beta * degrees.log().sum() + gamma * edges.sum())


def _uniform_degree(shifted: Tensor, strength: float, num_nodes: int) -> float:
    """The degree solving the prox's optimality conditions for a complete graph whose edges all equal the
    mean of ``shifted``: a starting point that is positive whatever the data."""
    spread = (num_nodes - 1) * float(shifted.mean())
    return 0.5 * (spread + math.sqrt(spread**2 + 8.0 * strength * (num_nodes - 1)))


class BarrierProx(NamedTuple):
    r""":func:`prox_degree_barrier`'s result: the edge vector, the relative degree gap
    :math:`\max_i |\delta_i - (Bw)_i| / \delta_i` of the dual iterate it comes from (its certificate: 0 at
    the exact prox), and whether that gap met the tolerance."""

    edges: Tensor
    degree_gap: float
    converged: bool


def _scaled_newton_system(multipliers: Tensor, ratio: Tensor, space: EdgeSpace) -> Tensor:
    r""":math:`I + S B\,\mathrm{diag}(r)B^\top S` with :math:`S = \mathrm{diag}(\lambda)`: the ``K × K`` Newton
    matrix :math:`\mathrm{diag}(\lambda)^{-2} + B\,\mathrm{diag}(r)B^\top` scaled to unit diagonal floor, so it
    stays well conditioned where the degrees differ by orders of magnitude."""
    coupling = space.matrix(ratio)
    coupling = coupling + torch.diag(coupling.sum(dim=1))
    eye = torch.eye(space.num_nodes, dtype=coupling.dtype, device=coupling.device)
    return eye + multipliers[:, None] * coupling * multipliers[None, :]


def _solve_scaled(system: Tensor, multipliers: Tensor, right: Tensor) -> Tensor:
    r"""``Δλ`` from the scaled system, :math:`\Delta\lambda = S\,(\text{system})^{-1} S\,\text{right}`; by
    Cholesky, with a growing multiple of the identity added if it fails (Levenberg–Marquardt)."""
    damping = 0.0
    eye = torch.eye(len(right), dtype=system.dtype, device=system.device)
    for _ in range(12):
        factor, info = torch.linalg.cholesky_ex(system + damping * eye)
        if int(info) == 0:
            solution = torch.cholesky_solve((multipliers * right)[:, None], factor)[:, 0]
            if bool(torch.isfinite(solution).all()):
                return multipliers * solution
        damping = max(10.0 * damping, 1e-14 * float(system.diagonal().max()))
    return multipliers * (multipliers * right) / float(system.diagonal().max())


def _step_to_boundary(values: Tensor, change: Tensor) -> float:
    """The largest step ``t <= 1`` keeping ``values + t·change`` positive, less 1 % of the way."""
    falling = change < 0
    return min(1.0, 0.99 * float((values[falling] / -change[falling]).min())) if bool(falling.any()) else 1.0


def prox_degree_barrier(
    anchor: Tensor,
    space: EdgeSpace,
    beta: float,
    gamma: float,
    rho: float,
    linear: Tensor | None = None,
    start_degrees: Tensor | None = None,
    tol: float = 1e-9,
    max_iter: int = 100,
) -> BarrierProx:
    r"""The barrier's proximal operator with an optional linear cost ``linear`` (:math:`\ell`, default 0):

    .. math:: \arg\min_{w \ge 0}\; \frac{\rho}{2}\lVert w - a\rVert^2 + (\gamma\mathbf 1 + \ell)^\top w
              - \beta \mathbf 1^\top \log(Bw) \;=\; \mathrm{prox}_{g/\rho}(a - \ell/\rho),

    ``a`` = ``anchor``. Passing ``linear`` instead of the shifted point keeps the digits a small
    :math:`\rho` would cancel.

    Dualising the degrees :math:`\delta = Bw` with multipliers :math:`\lambda \in \mathbb R^K_{>0}` gives every
    edge in closed form and the optimal degrees as :math:`\delta_i = \beta / \lambda_i`, with
    :math:`c = \gamma\mathbf 1 + \ell`:

    .. math:: w_{ij}(\lambda) = \max\Big(0,\; a_{ij} + \frac{\lambda_i + \lambda_j - c_{ij}}{\rho}\Big),
              \qquad \max_{\lambda > 0}\; q(\lambda) = \beta \mathbf 1^\top \log \lambda
              + \frac{\rho}{2}\lVert w - a\rVert^2 + c^\top w - \lambda^\top B w ,

    with :math:`\nabla q = \beta/\lambda - Bw(\lambda)`. The ``K``-dimensional concave dual is maximised
    by Newton's method with an Armijo line search; its negative Hessian :math:`\beta\,\mathrm{diag}(\lambda)^{-2} +
    B_A B_A^\top/\rho` over the active edges :math:`A` is solved in a scaled, safeguarded form
    (:func:`_solve_scaled`: numerically singular once :math:`\beta/\lambda^2 \ll 1/\rho` on a bipartite
    active set), instead of the ``K(K-1)/2``-dimensional primal, until the relative degree gap :math:`\max_i|\lambda_i\nabla q_i|/\beta`
    is below ``tol`` or no ascent is left at float64 precision. It never raises on valid input: the
    result carries the gap reached, and ``converged`` says whether it met ``tol`` (a gap of 1e-6 means
    the degrees are right to six digits). ``start_degrees`` warm-starts it. Works in float64; returns
    ``w`` in the dtype of ``anchor``.
    """
    if not (beta > 0 and gamma >= 0 and rho > 0) or not all(map(math.isfinite, (beta, gamma, rho))):
        raise ValueError(f"the degree barrier needs finite beta > 0, gamma >= 0, rho > 0; got {beta}, {gamma}, {rho}")
    rows, cols = space.pairs
    target = anchor.double()
    cost = gamma + (0.0 if linear is None else linear.double())
    cost = cost.expand_as(target) if isinstance(cost, Tensor) else torch.full_like(target, cost)

    def edges_at(multipliers: Tensor) -> Tensor:
        return (target + (multipliers[rows] + multipliers[cols] - cost) / rho).clamp(min=0.0)

    def dual(multipliers: Tensor) -> tuple[float, Tensor, Tensor]:
        edges = edges_at(multipliers)
        value = (beta * multipliers.log().sum() + 0.5 * rho * (edges - target).pow(2).sum()
                 + cost @ edges - multipliers @ space.degrees(edges))
        return float(value), beta / multipliers - space.degrees(edges), edges

    def degree_gap(multipliers: Tensor, gradient: Tensor) -> float:
        return float((gradient * multipliers).abs().max()) / beta

    if start_degrees is not None and bool((start_degrees > 0).all()) and bool(torch.isfinite(start_degrees).all()):
        multipliers = beta / start_degrees.double()
    else:
        degree = _uniform_degree(target - cost / rho, beta / rho, space.num_nodes)
        multipliers = torch.full((space.num_nodes,), beta / degree, dtype=torch.float64, device=anchor.device)
    value, gradient, edges = dual(multipliers)
    gap = degree_gap(multipliers, gradient)
    best = (gap, edges)
    for _ in range(max_iter):
        if gap <= tol:
            break
        system = _scaled_newton_system(multipliers, (edges > 0).double() / (rho * beta), space)
        step = _solve_scaled(system, multipliers, gradient / beta)
        slope = float(gradient @ step)
        size = _step_to_boundary(multipliers, step)
        # Once the predicted ascent is below float64's resolution of q, an Armijo test can no longer tell
        # better from worse: a smaller degree gap decides instead.
        resolved = slope > 1e-13 * (1.0 + abs(value))
        while size > 1e-14:
            candidate = multipliers + size * step
            candidate_value, candidate_gradient, candidate_edges = dual(candidate)
            candidate_gap = degree_gap(candidate, candidate_gradient)
            if (candidate_value >= value + 1e-4 * size * slope) if resolved else candidate_gap < gap:
                break
            size *= 0.5
        else:
            break  # no ascent left at float64 precision
        multipliers, value, gradient, edges, gap = candidate, candidate_value, candidate_gradient, candidate_edges, candidate_gap
        if gap < best[0]:
            best = (gap, edges)
    return BarrierProx(best[1].to(anchor.dtype), best[0], best[0] <= tol)


class LearnedGraph(NamedTuple):
    r""":func:`learn_graph`'s result: the edge vector, whether its duality gap met the tolerance, the Newton
    steps it took, and the certificate: :math:`(F(w) - F^*)/(K\beta)` is at most ``duality_gap``."""

    edges: Tensor
    converged: bool
    iterations: int
    duality_gap: float


def duality_gap(edges: Tensor, multipliers: Tensor, cost: Tensor, space: EdgeSpace, beta: float) -> float:
    r"""The duality gap of Eq. (9) per node and relative to :math:`\beta`: an upper bound on
    :math:`(F(w) - F^*)/(K\beta)` for :math:`F(w) = c^\top w - \beta\mathbf 1^\top\log(Bw)`, :math:`w \ge 0`.

    The dual of the problem is :math:`\max\; D(\lambda) = \beta\mathbf 1^\top\log\lambda + K\beta(1 - \log\beta)`
    over :math:`\lambda > 0` with :math:`\lambda_i + \lambda_j \le c_{ij}` for every pair; ``multipliers`` are
    first scaled by :math:`\theta = \min(1, \min_{ij} c_{ij}/(\lambda_i + \lambda_j))` to be feasible, and the
    gap is :math:`(F(w) - D(\theta\lambda))/(K\beta)` (0 exactly at the optimum). ``inf`` when a node has no
    edge.
    """
    degrees = space.degrees(edges)
    if not bool((degrees > 0).all()) or not bool((multipliers > 0).all()):
        return math.inf
    rows, cols = space.pairs
    theta = min(1.0, float((cost / (multipliers[rows] + multipliers[cols])).min()))
    primal = float(cost @ edges) - beta * float(degrees.log().sum())
    dual = beta * float(multipliers.log().sum()) + space.num_nodes * beta * (1.0 + math.log(theta) - math.log(beta))
    return (primal - dual) / (space.num_nodes * beta)


def graph_duality_gap(edges: Tensor, cost: Tensor, space: EdgeSpace, beta: float) -> float:
    r""":func:`duality_gap` for edges alone, with the multipliers :math:`\lambda_i = \beta/(Bw)_i` of the
    optimality conditions: an independent check of any solver's output."""
    degrees = space.degrees(edges)
    return duality_gap(edges, beta / degrees, cost, space, beta) if bool((degrees > 0).all()) else math.inf


def certified_zeros(edges: Tensor, multipliers: Tensor, cost: Tensor, space: EdgeSpace, beta: float) -> Tensor:
    r"""The pairs whose weight is exactly 0 in every optimum of Eq. (9), certified by the duality gap (a
    gap-safe screening rule, as in Ndiaye et al., "Gap safe screening rules for sparsity enforcing
    penalties", JMLR 2017).

    With the feasible multipliers :math:`\tilde\lambda = \theta\lambda` of :func:`duality_gap` and their
    slacks :math:`\tilde s_{ij} = c_{ij} - \tilde\lambda_i - \tilde\lambda_j \ge 0`, the absolute gap
    :math:`G = F(w) - D(\tilde\lambda)` bounds the distance to the unique dual optimum :math:`\lambda^*`:
    :math:`D` is :math:`\beta\sum_i\log\lambda_i` plus a constant, strongly concave with modulus
    :math:`m = \beta/\max_i U_i^2` on the feasible set (where :math:`\lambda_i \le U_i = \min_j c_{ij}`),
    so :math:`\frac m2\lVert\tilde\lambda - \lambda^*\rVert^2 \le D(\lambda^*) - D(\tilde\lambda) \le G`
    and every :math:`|\tilde\lambda_i - \lambda^*_i| \le \delta = \sqrt{2G/m}`. A pair with
    :math:`\tilde s_{ij} > 2\delta` therefore has a slack :math:`s^*_{ij} > 0` at the dual optimum, and
    complementary slackness makes :math:`w^*_{ij} = 0` in every primal optimum. The gap is never taken below
    the rounding of the primal and dual values it is the difference of, so a gap that rounds to 0 screens
    nothing it cannot; a mask that would leave a node without an edge is refused. Returns that boolean mask
    (none when the gap is not finite)."""
    gap = duality_gap(edges, multipliers, cost, space, beta) * space.num_nodes * beta
    none = torch.zeros_like(cost, dtype=torch.bool)
    if not math.isfinite(gap):
        return none
    rows, cols = space.pairs
    # a gap computed as the difference of two large numbers is only known to their rounding: never below it
    primal = float(cost @ edges) - beta * float(space.degrees(edges).log().sum())
    gap = max(gap, 0.0) + 1e3 * torch.finfo(cost.dtype).eps * (abs(primal) + abs(primal - gap))
    theta = min(1.0, float((cost / (multipliers[rows] + multipliers[cols])).min()))
    feasible = theta * multipliers
    slack = cost - feasible[rows] - feasible[cols]
    bounds = cost.new_full((space.num_nodes,), math.inf).scatter_reduce(0, rows, cost, "amin").scatter_reduce(
        0, cols, cost, "amin")
    delta = math.sqrt(2.0 * gap * float(bounds.max()) ** 2 / beta)
    zero = slack > 2.0 * delta
    if not bool((space.degrees(torch.where(zero, 0.0, edges)) > 0).all()):
        return none  # a certificate that would isolate a node cannot be right: keep every weight
    return zero


def _check_graph_problem(distances: Tensor, alpha: float, beta: float, gamma: float) -> Tensor:
    r"""The edge costs :math:`c = 2\alpha u + \gamma` of a valid problem, or a ValueError naming what is wrong."""
    if not (alpha >= 0 and beta > 0 and gamma >= 0) or not all(map(math.isfinite, (alpha, beta, gamma))):
        raise ValueError(f"learn_graph needs finite alpha >= 0, beta > 0, gamma >= 0; got {alpha}, {beta}, {gamma}")
    distances = distances.double()
    if not bool(torch.isfinite(distances).all()):
        raise ValueError("learn_graph: the distances contain NaN or inf; check the signals they come from")
    if bool((distances < 0).any()):
        raise ValueError(f"learn_graph: distances must be >= 0, got a minimum of {float(distances.min()):.3g}")
    cost = 2.0 * alpha * distances + gamma
    if not bool((cost > 0).all()):
        raise ValueError("learn_graph: a pair has 2*alpha*distance + gamma = 0 (identical signals with gamma = 0), "
                         "so its edge would grow without bound; use gamma > 0")
    return cost


def _feasible_multipliers(start: Tensor | None, cost: Tensor, space: EdgeSpace) -> Tensor:
    r"""Strictly feasible dual multipliers (:math:`\lambda_i + \lambda_j < c_{ij}`) to start from: those of the
    start graph's degrees, :math:`\lambda_i = 1/(Bw)_i`, where every node has an edge, else a constant;
    scaled down to lie halfway to the nearest constraint when they violate one."""
    rows, cols = space.pairs
    degrees = None if start is None else space.degrees(start.double().clamp(min=0.0))
    if degrees is not None and bool((degrees > 0).all()) and bool(torch.isfinite(degrees).all()):
        multipliers = 1.0 / degrees
    else:
        multipliers = torch.full((space.num_nodes,), 1.0, dtype=torch.float64, device=cost.device)
    theta = float((cost / (multipliers[rows] + multipliers[cols])).min())
    return multipliers * min(1.0, 0.5 * theta)


def _residuals(multipliers: Tensor, slack: Tensor, edges: Tensor, cost: Tensor, space: EdgeSpace,
               target: float) -> tuple[Tensor, Tensor, Tensor]:
    r"""The optimality conditions on the central path at :math:`\mu` = ``target``: :math:`Bw - 1/\lambda`,
    :math:`w \odot s - \mu`, :math:`s + \lambda_i + \lambda_j - c`."""
    rows, cols = space.pairs
    return (space.degrees(edges) - 1.0 / multipliers, edges * slack - target,
            slack + multipliers[rows] + multipliers[cols] - cost)


def _scaled(residuals: tuple[Tensor, Tensor, Tensor], multipliers: Tensor, cost: Tensor,
            target: float) -> tuple[Tensor, Tensor, Tensor]:
    """The residuals relative to their terms' sizes: how far from centred the point is."""
    degree, pair, dual = residuals
    return multipliers * degree, pair / target, dual / cost


def _merit(residuals: tuple[Tensor, Tensor, Tensor], multipliers: Tensor, cost: Tensor, target: float) -> float:
    """The sum of squares of the scaled residuals: what a Newton step's backtracking must lower."""
    return sum(float(r.pow(2).sum()) for r in _scaled(residuals, multipliers, cost, target))


def _newton_step(multipliers: Tensor, slack: Tensor, edges: Tensor, cost: Tensor, space: EdgeSpace, target: float,
                 residuals: tuple[Tensor, Tensor, Tensor]) -> tuple[Tensor, Tensor, Tensor]:
    r"""One primal–dual Newton step on :func:`_residuals`, eliminated to the ``K × K`` system
    :math:`(\mathrm{diag}(\lambda)^{-2} + B\,\mathrm{diag}(w/s)B^\top)\Delta\lambda = -r_1 - B\big((w\odot r_3 -
    r_2)/s\big)`, then :math:`\Delta s = -r_3 - \Delta\lambda_i - \Delta\lambda_j`, :math:`\Delta w = -(r_2 +
    w\odot\Delta s)/s`; the step keeps every variable positive and is halved until the scaled residuals
    shrink (up to 30 times)."""
    rows, cols = space.pairs
    degree, pair, dual = residuals
    system = _scaled_newton_system(multipliers, edges / slack, space)
    change_multipliers = _solve_scaled(system, multipliers, -degree - space.degrees((edges * dual - pair) / slack))
    change_slack = -dual - change_multipliers[rows] - change_multipliers[cols]
    change_edges = -(pair + edges * change_slack) / slack
    size = min(_step_to_boundary(value, change) for value, change in
               ((multipliers, change_multipliers), (slack, change_slack), (edges, change_edges)))
    merit = _merit(residuals, multipliers, cost, target)
    for _ in range(30):
        candidate = (multipliers + size * change_multipliers, slack + size * change_slack, edges + size * change_edges)
        if _merit(_residuals(*candidate, cost, space, target), candidate[0], cost, target) < merit:
            break
        size *= 0.5
    return candidate


def learn_graph(
    distances: Tensor,
    space: EdgeSpace,
    alpha: float,
    beta: float,
    gamma: float,
    start: Tensor | None = None,
    tol: float = 1e-12,
    max_iter: int = 200,
    shrink: float = 0.1,
) -> LearnedGraph:
    r"""Graph learning, Eq. (9): :math:`\arg\min_{w \ge 0} F(w) = 2\alpha\, w^\top u - \beta \mathbf 1^\top\log(Bw)
    + \gamma \mathbf 1^\top w`.

    ``distances`` is :math:`u = \mathrm{upper}(\mathcal D(X))` with :math:`\mathcal D_{mn} = \frac12\lVert
    x_m - x_n\rVert^2`, so that :math:`2\alpha w^\top u = \alpha\,\mathrm{tr}(W\mathcal D) = \alpha\,
    \mathrm{tr}(X^\top L X)`. With :math:`c = 2\alpha u + \gamma` (all positive: else a ValueError), the
    problem's dual (:func:`duality_gap`) has only ``K`` variables,

    .. math:: \max_{\lambda > 0}\; \beta\,\mathbf 1^\top\log\lambda \quad\text{s.t.}\quad
              \lambda_i + \lambda_j \le c_{ij}\ \ (i < j),

    and the edges are its constraints' multipliers. It is solved by a primal–dual path-following
    interior-point method on the central path's conditions (:func:`_residuals`)

    .. math:: Bw = 1/\lambda, \qquad w \odot s = \mu, \qquad s = c - \lambda_i - \lambda_j,
              \qquad w, s, \lambda > 0,

    whose solution has a duality gap of :math:`\mu` per pair: Newton steps (:func:`_newton_step`, a
    ``K × K`` system) until the point is centred, then :math:`\mu \leftarrow` ``shrink`` :math:`\cdot\,\mu`.
    Keeping :math:`w` and the slacks :math:`s` as variables (not :math:`w = \mu/s` from :math:`\lambda`)
    keeps their digits when :math:`s \ll c`. Everything is computed in the units :math:`\beta = 1`,
    :math:`\bar c = 1` (:math:`w^*(\beta, c) = \frac{\beta}{\bar c} w^*(1, c/\bar c)`), so the tolerance is
    relative whatever the scale of the signals, :math:`\alpha`, :math:`\beta` or :math:`\gamma`.

    **Exact zeros.** An interior-point method keeps every weight strictly positive; the optimum of Eq. (9) is
    sparse. After the last step every pair that :func:`certified_zeros` proves to be 0 in every optimum is
    set to 0 — a gap-safe screening rule, not a threshold: a weight is zeroed only where the duality gap
    certifies it, so the objective moves by at most the removed weights' tiny share (below the solver's
    tolerance) and no real edge can be cut.

    ``start`` (an edge vector, optional) warm-starts the multipliers. It stops once the certified gap
    :math:`(F(w) - F^*)/(K\beta)` is below ``tol`` or after ``max_iter`` Newton steps; it never raises
    on valid input: the result carries the gap, ``converged`` says whether it met ``tol``, and a warning
    names the remedy when it did not.
    """
    if not 0 < shrink < 1:
        raise ValueError(f"learn_graph needs 0 < shrink < 1, got {shrink}")
    cost = _check_graph_problem(distances, alpha, beta, gamma)
    scale = float(cost.mean())
    cost = cost / scale
    rows, cols = space.pairs
    multipliers = _feasible_multipliers(None if start is None else start * (scale / beta), cost, space)
    slack = cost - multipliers[rows] - multipliers[cols]
    target = space.num_nodes / len(cost)  # μ where the central path's gap is β per node
    edges = target / slack
    best, steps = (math.inf, edges, multipliers), 0
    while True:
        gap = duality_gap(edges, multipliers, cost, space, 1.0)
        if gap < best[0]:
            best = (gap, edges, multipliers)
        if gap <= tol or steps >= max_iter:
            break
        residuals = _residuals(multipliers, slack, edges, cost, space, target)
        if max(float(r.abs().max()) for r in _scaled(residuals, multipliers, cost, target)) <= 0.25:
            target *= shrink  # centred: follow the path
            residuals = _residuals(multipliers, slack, edges, cost, space, target)
        multipliers, slack, edges = _newton_step(multipliers, slack, edges, cost, space, target, residuals)
        steps += 1
    gap, edges, multipliers = best
    edges = torch.where(certified_zeros(edges, multipliers, cost, space, 1.0), 0.0, edges)
    gap = max(gap, duality_gap(edges, multipliers, cost, space, 1.0))  # the certificate of the edges returned
    converged = gap <= tol
    if not converged:
        warnings.warn(f"graph learning stopped after {steps} of max_iter={max_iter} Newton steps with a relative "
                      f"duality gap of {gap:.3g} > tol={tol:g}; the graph is usable but not certified optimal: raise "
                      f"max_iter or loosen tol", RuntimeWarning, stacklevel=2)
    return LearnedGraph((edges * (beta / scale)).to(distances.dtype), converged, steps, gap)


__all__ = ["BarrierProx", "EdgeSpace", "LearnedGraph", "certified_zeros", "degree_barrier", "duality_gap",
           "graph_duality_gap", "learn_graph", "prox_degree_barrier"]
