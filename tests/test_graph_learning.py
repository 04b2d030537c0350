import math
import warnings

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from gflkit.graphs import graph_learning
from gflkit.graphs.graph_learning import (EdgeSpace, _scaled_newton_system, _solve_scaled, certified_zeros, degree_barrier,
                                          graph_duality_gap, learn_graph, prox_degree_barrier)


def test_edge_space_round_trips_between_vector_and_symmetric_matrix():
    space = EdgeSpace(4)
    edges = torch.arange(1.0, 7.0)
    matrix = space.matrix(edges)
    assert torch.equal(matrix, matrix.T) and torch.equal(matrix.diagonal(), torch.zeros(4))
    assert torch.equal(space.upper(matrix), edges)
    assert torch.equal(space.degrees(edges), matrix.sum(1))


def test_edge_space_needs_two_nodes():
    with pytest.raises(ValueError, match="at least 2 nodes"):
        EdgeSpace(1)


def test_degree_barrier_is_infinite_for_an_isolated_node_or_a_negative_edge():
    space = EdgeSpace(3)
    assert degree_barrier(torch.tensor([1.0, 0.0, 0.0]), space, 1.0, 1.0) == float("inf")
    assert degree_barrier(torch.tensor([1.0, -0.1, 1.0]), space, 1.0, 1.0) == float("inf")
    value = degree_barrier(torch.tensor([1.0, 2.0, 0.5]), space, beta=2.0, gamma=0.5)
    assert value == pytest.approx(-2.0 * np.log([3.0, 1.5, 2.5]).sum() + 0.5 * 3.5)


@pytest.mark.parametrize("seed", range(5))
def test_prox_of_the_degree_barrier_matches_a_generic_solver(seed):
    space, beta, gamma, rho = EdgeSpace(5), 1.0, 0.5, 2.0
    point = torch.randn(10, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    ours = prox_degree_barrier(point, space, beta, gamma, rho).edges
    B = np.stack([space.degrees(torch.eye(10, dtype=torch.float64)[i]).numpy() for i in range(10)], axis=1)
    v = point.numpy()

    def objective(w):
        return 0.5 * rho * np.sum((w - v) ** 2) + gamma * w.sum() - beta * np.log(B @ w).sum()

    def gradient(w):
        return rho * (w - v) + gamma - beta * B.T @ (1.0 / (B @ w))

    reference = minimize(objective, np.full(10, 1.0), jac=gradient, bounds=[(0, None)] * 10, method="L-BFGS-B",
                         options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    assert objective(ours.numpy()) <= reference.fun + 1e-9
    assert np.allclose(ours.numpy(), reference.x, atol=1e-4)
    assert bool((ours >= 0).all())


def test_prox_rejects_bad_weights():
    with pytest.raises(ValueError, match="beta > 0"):
        prox_degree_barrier(torch.zeros(3), EdgeSpace(3), beta=0.0, gamma=1.0, rho=1.0)


@pytest.mark.parametrize("rho", [1.0, 1e-4])
def test_prox_with_a_linear_cost_matches_the_two_node_closed_form(rho):
    # argmin ρ/2 (w − a)² + c w − 2β log w  ⇒  ρw² + (c − ρa) w − 2β = 0
    anchor, cost, beta = torch.tensor([0.3], dtype=torch.float64), 5.0, 2.0
    prox = prox_degree_barrier(anchor, EdgeSpace(2), beta, gamma=1.0, rho=rho, linear=torch.tensor([cost - 1.0]))
    b = cost - rho * float(anchor)
    expected = (-b + math.sqrt(b * b + 8 * rho * beta)) / (2 * rho)
    assert prox.converged and prox.degree_gap < 1e-9
    assert float(prox.edges) == pytest.approx(expected, rel=1e-9)


def test_a_numerically_singular_newton_system_still_gives_an_ascent_direction():
    # two nodes on one edge with 1/ρ ≫ β/λ²: the scaled Newton matrix is [[1 + t, t], [t, 1 + t]] with
    # t = 1e20, singular in float64, so Cholesky fails and the damped / gradient fallback answers
    multipliers = torch.tensor([1.0, 1.0], dtype=torch.float64)
    system = _scaled_newton_system(multipliers, torch.tensor([1e20], dtype=torch.float64), EdgeSpace(2))
    assert int(torch.linalg.cholesky_ex(system).info) != 0
    gradient = torch.tensor([1.0, -0.5], dtype=torch.float64)
    step = _solve_scaled(system, multipliers, gradient)
    assert bool(torch.isfinite(step).all()) and float(gradient @ step) > 0


def test_learned_graph_links_clients_within_planted_clusters():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(2, 50, generator=gen, dtype=torch.float64)
    signals = centres[torch.tensor([0, 0, 0, 1, 1, 1])] + 0.05 * torch.randn(6, 50, generator=gen, dtype=torch.float64)
    space = EdgeSpace(6)
    gram = signals @ signals.T
    distances = space.upper(0.5 * (gram.diagonal()[:, None] + gram.diagonal()[None, :] - 2 * gram))
    graph = space.matrix(learn_graph(distances, space, alpha=0.05, beta=1.0, gamma=1.0, start=torch.ones(15, dtype=torch.float64)).edges)
    within = torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool() & ~torch.eye(6, dtype=torch.bool)
    assert graph[within].min() > 10 * graph[~within & ~torch.eye(6, dtype=torch.bool)].max()


def smooth_signal_problem(num_nodes: int = 207, seed: int = 0):
    """Distances of signals smooth over random positions in the unit square (a random-geometric-graph
    world), the setting graph learning is made for."""
    gen = torch.Generator().manual_seed(seed)
    positions = torch.rand(num_nodes, 2, generator=gen, dtype=torch.float64)
    signals = torch.cat([torch.sin(3 * positions), torch.cos(5 * positions)], 1)
    signals = signals + 0.05 * torch.randn(num_nodes, 4, generator=gen, dtype=torch.float64)
    space = EdgeSpace(num_nodes)
    return space, space.upper(0.5 * torch.cdist(signals, signals).pow(2))


def lbfgs_graph(distances, space, alpha, beta, gamma):
    """An independent solver: scipy's L-BFGS-B with bounds w >= 0 on Eq. (9), the logarithm extended below
    1e-3 by its second-order Taylor polynomial (convex and C1; the minimiser has degrees far above it)."""
    rows, cols = (t.numpy() for t in space.pairs)
    u, n, eps = distances.numpy(), space.num_nodes, 1e-3

    def objective(w):
        degrees = np.bincount(rows, w, n) + np.bincount(cols, w, n)
        low = degrees < eps
        log = np.where(low, np.log(eps) + (degrees - eps) / eps - 0.5 * ((degrees - eps) / eps) ** 2,
                       np.log(np.maximum(degrees, eps)))
        dlog = np.where(low, 1 / eps - (degrees - eps) / eps**2, 1 / np.maximum(degrees, eps))
        value = 2 * alpha * w @ u - beta * log.sum() + gamma * w.sum()
        return value, 2 * alpha * u + gamma - beta * (dlog[rows] + dlog[cols])

    result = minimize(objective, np.full(len(u), 0.1), jac=True, method="L-BFGS-B",
                                     bounds=[(0, None)] * len(u),
                                     options={"maxiter": 20000, "ftol": 0, "gtol": 1e-10, "maxcor": 50})
    return torch.from_numpy(result.x)


def test_default_graph_learning_converges_on_a_few_hundred_nodes_to_the_independent_optimum():
    space, distances = smooth_signal_problem()
    alpha, beta, gamma = 0.05, 1.0, 1.0
    objective = lambda w: float(2 * alpha * w @ distances) + degree_barrier(w, space, beta, gamma)
    learned = learn_graph(distances, space, alpha, beta, gamma, start=torch.full_like(distances, 0.1))
    assert learned.converged and learned.duality_gap <= 1e-12 and learned.iterations < 100
    reference = lbfgs_graph(distances, space, alpha, beta, gamma)
    # at least as good as the independent solver, and within its accuracy of it
    assert objective(learned.edges) <= objective(reference) + 1e-9
    assert objective(reference) - objective(learned.edges) < 1e-4 * abs(objective(reference))
    # and optimal by itself: the KKT conditions of the convex problem hold
    degrees = space.degrees(learned.edges)
    rows, cols = space.pairs
    gradient = 2 * alpha * distances + gamma - beta * (1 / degrees[rows] + 1 / degrees[cols])
    active = learned.edges > 1e-9
    assert gradient[active].abs().max() < 1e-6 and gradient[~active].min() > -1e-6
    # (the edge vectors themselves need not agree: a linear term plus a log barrier on the degrees is not
    # strictly convex in w, and near-optimal graphs can differ on a few edges)


def test_a_too_small_budget_says_it_did_not_converge_and_returns_a_usable_graph():
    space, distances = smooth_signal_problem(num_nodes=40)
    with pytest.warns(RuntimeWarning, match="duality gap.*raise max_iter"):
        learned = learn_graph(distances, space, 0.05, 1.0, 1.0, start=torch.full_like(distances, 0.1), max_iter=2)
    assert not learned.converged and learned.iterations == 2 and learned.duality_gap > 1e-12
    assert bool((learned.edges >= 0).all()) and bool((space.degrees(learned.edges) > 0).all())


@pytest.mark.parametrize("alpha", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("beta", [1e-3, 1.0, 1e3])
@pytest.mark.parametrize("gamma", [0.0, 1e-3, 10.0])
@pytest.mark.parametrize("u", [1e-3, 1.0, 1e3])
def test_two_nodes_match_the_closed_form(alpha, beta, gamma, u):
    # one edge, both degrees w: min (2αu + γ) w − 2β log w  ⇒  w* = 2β / (2αu + γ)
    learned = learn_graph(torch.tensor([u], dtype=torch.float64), EdgeSpace(2), alpha, beta, gamma,
                          start=torch.ones(1, dtype=torch.float64))
    assert learned.converged
    assert float(learned.edges) == pytest.approx(2 * beta / (2 * alpha * u + gamma), rel=1e-8)


def random_graph_problem(seed: int, max_nodes: int = 120):
    """A problem of the kinds that broke the earlier solver: 5–``max_nodes`` nodes, signals at scales
    1e-3–1e3, α, β, γ over six decades, duplicated rows or a far point."""
    gen = torch.Generator().manual_seed(seed)
    log_uniform = lambda: 10 ** float(torch.empty(1).uniform_(-3, 3, generator=gen))
    num_nodes = int(torch.randint(5, max_nodes + 1, (1,), generator=gen))
    signals = log_uniform() * torch.randn(num_nodes, int(torch.randint(2, 60, (1,), generator=gen)), generator=gen,
                                          dtype=torch.float64)
    if seed % 4 == 1:
        signals[: num_nodes // 3] = signals[0]
    if seed % 4 == 2:
        signals[-1] += 1e3 * signals.abs().max()
    space = EdgeSpace(num_nodes)
    return space, space.upper(0.5 * torch.cdist(signals, signals).pow(2)), log_uniform(), log_uniform(), log_uniform()


def test_seeded_fuzz_never_raises_and_certifies_its_graphs():
    converged = 0
    for seed in range(200):
        space, distances, alpha, beta, gamma = random_graph_problem(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            learned = learn_graph(distances, space, alpha, beta, gamma, start=torch.ones_like(distances))
        assert bool(torch.isfinite(learned.edges).all()) and bool((learned.edges >= 0).all()), seed
        converged += learned.converged
        cost = 2 * alpha * distances + gamma
        assert graph_duality_gap(learned.edges, cost, space, beta) < 1e-6, seed  # an independent certificate
        if learned.converged and space.num_nodes <= 12:
            objective = lambda w: float(cost @ w) - beta * float(space.degrees(w).log().sum())
            reference = lbfgs_graph(distances, space, alpha, beta, gamma)
            assert objective(learned.edges) <= objective(reference) + 1e-9 * abs(objective(reference)), seed
    assert converged >= 0.95 * 200


@pytest.mark.parametrize("distances, options, message", [
    (torch.tensor([1.0, -0.5, 2.0]), {}, "distances must be >= 0"),
    (torch.tensor([1.0, float("nan"), 2.0]), {}, "NaN or inf"),
    (torch.tensor([1.0, 1.0, 2.0]), {"beta": 0.0}, "beta > 0"),
    (torch.tensor([0.0, 1.0, 2.0]), {"gamma": 0.0}, "use gamma > 0"),
])
def test_invalid_problems_fail_at_once(distances, options, message):
    arguments = {"alpha": 1.0, "beta": 1.0, "gamma": 1.0, **options}
    with pytest.raises(ValueError, match=message):
        learn_graph(distances.double(), EdgeSpace(3), **arguments)


def unscreened(monkeypatch, *args, **kwargs):
    """What learn_graph returned before the gap-safe screening: every weight of the interior point kept."""
    with monkeypatch.context() as patch:
        patch.setattr(graph_learning, "certified_zeros", lambda edges, *rest: torch.zeros_like(edges, dtype=torch.bool))
        return learn_graph(*args, **kwargs).edges


def test_learned_graphs_are_exactly_sparse_and_keep_their_objective(monkeypatch):
    # 207 nodes, signals smooth over random positions: the optimum has a few hundred edges of 21,321 pairs
    space, distances = smooth_signal_problem()
    alpha, beta, gamma = 0.05, 1.0, 1.0
    options = dict(start=torch.full_like(distances, 0.1))
    edges = learn_graph(distances, space, alpha, beta, gamma, **options).edges
    dense = unscreened(monkeypatch, distances, space, alpha, beta, gamma, **options)
    assert bool((dense > 0).all()), "the interior point alone is strictly positive everywhere"
    zeroed = edges == 0
    assert int((~zeroed).sum()) < 0.02 * len(edges)
    assert float(dense[zeroed].max()) < 1e-9 * float(dense.max()), "only numerical dust is removed"
    assert torch.equal(edges[~zeroed], dense[~zeroed])
    objective = lambda w: float(2 * alpha * w @ distances) + degree_barrier(w, space, beta, gamma)
    assert abs(objective(edges) - objective(dense)) <= 1e-9 * abs(objective(dense))


def test_exact_zeros_recover_a_planted_graph_without_false_edges():
    # Gaussian signals whose precision is a planted random-geometric graph's Laplacian (+0.01 I)
    gen = torch.Generator().manual_seed(0)
    positions = torch.rand(30, 2, generator=gen, dtype=torch.float64)
    planted = ((torch.cdist(positions, positions) < 0.3) & ~torch.eye(30, dtype=torch.bool)).double()
    laplacian = torch.diag(planted.sum(1)) - planted
    signals = torch.linalg.cholesky(torch.linalg.inv(laplacian + 0.01 * torch.eye(30, dtype=torch.float64))) @ \
        torch.randn(30, 3000, generator=gen, dtype=torch.float64)
    space = EdgeSpace(30)
    learned = learn_graph(space.upper(0.5 * torch.cdist(signals, signals).pow(2)) / 3000, space, 1.0, 1.0, 0.1,
                          start=torch.ones(435, dtype=torch.float64))  # 30 · 29 / 2 pairs
    found, true = learned.edges > 0, space.upper(planted) > 0
    assert learned.converged and 10 <= int(found.sum()) < 0.2 * len(found)
    assert bool(true[found].all()), "every edge that is not exactly 0 is a planted edge"


def test_screening_never_zeroes_an_edge_of_the_independent_optimum():
    checked = zeros = 0
    for seed in range(40):  # small problems, where L-BFGS-B can reach the optimum to many digits
        space, distances, alpha, beta, gamma = random_graph_problem(seed, max_nodes=12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            learned = learn_graph(distances, space, alpha, beta, gamma, start=torch.ones_like(distances))
        reference = lbfgs_graph(distances, space, alpha, beta, gamma)
        cost = 2 * alpha * distances + gamma
        objective = lambda w: float(cost @ w) - beta * float(space.degrees(w).clamp(min=1e-300).log().sum())
        if not (learned.converged and abs(objective(reference) - objective(learned.edges))
                <= 1e-8 * abs(objective(learned.edges))):
            continue  # the reference did not reach the optimum: it cannot judge
        checked += 1
        zeroed = learned.edges == 0
        zeros += int(zeroed.sum())
        if bool(zeroed.any()):
            assert float(reference[zeroed].max()) < 1e-4 * float(reference.max()), seed
    assert checked >= 10 and zeros >= 100  # (20 problems and 575 zeros when written)


def test_certified_zeros_needs_a_finite_gap():
    space = EdgeSpace(3)
    edges = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)  # node 2 isolated: infinite gap
    mask = certified_zeros(edges, torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), space, 1.0)
    assert not bool(mask.any())


def test_the_prox_returns_exact_zeros_where_its_optimum_has_them():
    # far-apart pairs (large cost) get no edge in the prox of the degree barrier: PDCA's graph step is sparse
    space, distances = smooth_signal_problem(num_nodes=60)
    result = prox_degree_barrier(torch.zeros_like(distances), space, beta=1.0, gamma=1.0, rho=1.0,
                                 linear=0.5 * distances)
    assert result.converged and int((result.edges == 0).sum()) > 0.5 * len(distances)
    assert bool((space.degrees(result.edges) > 0).all())


def test_a_gap_that_rounds_to_zero_never_empties_the_graph():
    # tol = 0 drives the solver to a gap at the rounding of F and D (0 or −1e-16): screening must still keep
    # every node connected and the returned certificate must be the screened graph's
    for nodes in (30, 40):
        space, distances = smooth_signal_problem(num_nodes=nodes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            learned = learn_graph(distances, space, 0.05, 1.0, 1.0, start=torch.full_like(distances, 0.1), tol=0.0)
        assert bool((space.degrees(learned.edges) > 0).all()) and int((learned.edges > 0).sum()) >= nodes // 2
        assert graph_duality_gap(learned.edges, 0.1 * distances + 1.0, space, 1.0) < 1e-8
