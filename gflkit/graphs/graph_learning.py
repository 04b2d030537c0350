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
        """Row and column indices of the ``K(K-1)/2`` pairs (computed once: solvers ask every iteration)."""
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


def prox_degree_barrier(
    point: Tensor,
    space: EdgeSpace,
    beta: float,
    gamma: float,
    rho: float,
    start_degrees: Tensor | None = None,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> Tensor:
    r""":math:`\mathrm{prox}_{g/\rho}(v) = \arg\min_{w \ge 0} \frac{\rho}{2}\lVert w - v\rVert^2 + \gamma\mathbf 1^\top w
    - \beta \mathbf 1^\top \log(Bw)`, exactly.

    Dualising the degrees :math:`\delta = Bw` with multipliers :math:`\lambda \in \mathbb R^K_{>0}` gives every
    edge in closed form and the optimal degrees as :math:`\delta_i = \beta / \lambda_i`:

    .. math:: w_{ij}(\lambda) = \max\Big(0,\; v_{ij} - \frac{\gamma}{\rho} + \frac{\lambda_i + \lambda_j}{\rho}\Big),
              \qquad \max_{\lambda > 0}\; q(\lambda) = \beta \mathbf 1^\top \log \lambda
              + \frac{\rho}{2}\lVert w - v\rVert^2 + \gamma \mathbf 1^\top w - \lambda^\top B w ,

    with :math:`\nabla q = \beta/\lambda - Bw(\lambda)`. The ``K``-dimensional concave dual is maximised
    by Newton's method with an Armijo line search (its negative Hessian
    :math:`\beta\,\mathrm{diag}(\lambda)^{-2} + B_A B_A^\top/\rho` over the active edges :math:`A` is
    positive definite), instead of the ``K(K-1)/2``-dimensional primal. ``start_degrees`` warm-starts
    it. Works in float64; returns ``w`` in the dtype of ``point``.
    """
    if not (beta > 0 and gamma >= 0 and rho > 0):
        raise ValueError(f"the degree barrier needs beta > 0, gamma >= 0, rho > 0; got {beta}, {gamma}, {rho}")
    rows, cols = space.pairs
    target = point.double()
    shifted = target - gamma / rho

    def edges_at(multipliers: Tensor) -> Tensor:
        return (shifted + (multipliers[rows] + multipliers[cols]) / rho).clamp(min=0.0)

    def dual(multipliers: Tensor) -> tuple[float, Tensor]:
        edges = edges_at(multipliers)
        value = (beta * multipliers.log().sum() + 0.5 * rho * (edges - target).pow(2).sum()
                 + gamma * edges.sum() - multipliers @ space.degrees(edges))
        return float(value), beta / multipliers - space.degrees(edges)

    if start_degrees is not None and bool((start_degrees > 0).all()):
        multipliers = beta / start_degrees.double()
    else:
        degree = _uniform_degree(shifted, beta / rho, space.num_nodes)
        multipliers = torch.full((space.num_nodes,), beta / degree, dtype=torch.float64, device=point.device)
    value, gradient = dual(multipliers)
    for _ in range(max_iter):
        if float((gradient * multipliers).abs().max()) <= tol * beta:  # |δ - Bw| relative to δ = β/λ
            break
        coupling = space.matrix((edges_at(multipliers) > 0).double())
        curvature = torch.diag(beta / multipliers**2 + coupling.sum(dim=1) / rho) + coupling / rho
        step = torch.linalg.solve(curvature, gradient)
        slope, size = float(gradient @ step), 1.0
        # Once the predicted ascent is below float64's resolution of q, Newton is in its quadratic
        # phase and the full step is taken: an Armijo test could no longer tell better from worse.
        exact_enough = slope <= 1e-13 * (1.0 + abs(value))
        while size > 1e-14:
            candidate = multipliers + size * step
            if bool((candidate > 0).all()):
                candidate_value, candidate_gradient = dual(candidate)
                if exact_enough or candidate_value >= value + 1e-4 * size * slope:
                    break
            size *= 0.5
        else:
            break  # no ascent left at float64 precision
        multipliers, value, gradient = candidate, candidate_value, candidate_gradient
    if float((gradient * multipliers).abs().max()) > 1e-6 * beta:
        raise RuntimeError(f"prox of the degree barrier did not converge (relative degree gap "
                           f"{float((gradient * multipliers).abs().max()) / beta:.3g})")
    return edges_at(multipliers).to(point.dtype)


class LearnedGraph(NamedTuple):
    """:func:`learn_graph`'s result: the edge vector, whether the solver met its tolerance, and the
    proximal iterations it took."""

    edges: Tensor
    converged: bool
    iterations: int


def learn_graph(
    distances: Tensor,
    space: EdgeSpace,
    alpha: float,
    beta: float,
    gamma: float,
    start: Tensor,
    rho: float = 1.0,
    tol: float = 1e-9,
    max_iter: int = 200,
    shrink: float = 0.1,
    rho_floor: float = 1e-6,
) -> LearnedGraph:
    r"""Graph learning, Eq. (9): :math:`\arg\min_{w \ge 0} F(w) = 2\alpha\, w^\top u - \beta \mathbf 1^\top\log(Bw)
    + \gamma \mathbf 1^\top w`.

    ``distances`` is :math:`u = \mathrm{upper}(\mathcal D(X))` with :math:`\mathcal D_{mn} = \frac12\lVert
    x_m - x_n\rVert^2`, so that :math:`2\alpha w^\top u = \alpha\,\mathrm{tr}(W\mathcal D) = \alpha\,
    \mathrm{tr}(X^\top L X)`. Solved by the proximal-point method with exact proximal steps,

    .. math:: w^{t+1} = \mathrm{prox}_{g/\rho_t}\big(w^t - 2\alpha u / \rho_t\big)
              = \arg\min_w F(w) + \tfrac{\rho_t}{2}\lVert w - w^t\rVert^2 ,

    from ``start``, with the proximal weight shrinking geometrically, :math:`\rho_t = \max(\rho\,
    \text{shrink}^t, \rho\,\text{rho\_floor})`: the smaller :math:`\rho_t`, the closer one step comes to the
    minimiser (the smooth part is linear, so any :math:`\rho > 0` is a valid step; with a fixed
    :math:`\rho = 1` a 207-node problem still moved after 20,000 steps, with the continuation it converges
    in about ten). It stops once :math:`\rho_t` sits at its floor and the edge vector moves less than
    ``tol`` (relative); the result says whether that happened within ``max_iter`` steps, and a warning
    names the remedy when it did not.
    """
    if not 0 < shrink <= 1 or not 0 < rho_floor <= 1:
        raise ValueError(f"learn_graph needs 0 < shrink <= 1 and 0 < rho_floor <= 1, got {shrink}, {rho_floor}")
    edges, step, moved = start.double(), rho, math.inf
    for iteration in range(1, max_iter + 1):
        updated = prox_degree_barrier(edges - 2.0 * alpha * distances.double() / step, space, beta, gamma, step,
                                      start_degrees=space.degrees(edges))
        moved = float((updated - edges).norm()) / (1.0 + float(updated.norm()))
        edges = updated
        at_floor = step <= rho * rho_floor
        if at_floor and moved <= tol:
            return LearnedGraph(edges.to(distances.dtype), True, iteration)
        step = max(step * shrink, rho * rho_floor)
    warnings.warn(f"graph learning stopped after max_iter={max_iter} proximal steps without converging (last relative "
                  f"move {moved:.3g} > tol={tol:g}); raise max_iter or loosen tol", RuntimeWarning, stacklevel=2)
    return LearnedGraph(edges.to(distances.dtype), False, max_iter)


__all__ = ["EdgeSpace", "LearnedGraph", "degree_barrier", "learn_graph", "prox_degree_barrier"]
