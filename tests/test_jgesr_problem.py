import math

import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from gflkit.graphs.graph_learning import degree_barrier, learn_graph
from gflkit.graphs.jgesr import (JGESRParams, JointProblem, pdca, proximal_step, restore, row_space_coordinates,
                                 two_step)


def clustered_rows(num_clients=8, dim=60, clusters=2, noise=0.3, seed=0):
    """Rows around ``clusters`` centres plus channel-like noise: ``(clean, noisy)`` in float64."""
    gen = torch.Generator().manual_seed(seed)
    centres = torch.randn(clusters, dim, generator=gen, dtype=torch.float64)
    clean = centres[torch.arange(num_clients) % clusters]
    return clean, clean + noise * torch.randn(num_clients, dim, generator=gen, dtype=torch.float64)


def problem_with(received, mask=None, **params):
    weights = torch.full((received.shape[0],), 1.0 / received.shape[0], dtype=torch.float64)
    return JointProblem(received, weights, mask, JGESRParams(**params))


def test_distances_are_half_squared_euclidean_so_the_coupling_is_the_laplacian_form():
    _, received = clustered_rows(num_clients=4, dim=5)
    problem = problem_with(received)
    edges = torch.rand(6, dtype=torch.float64)
    squared = torch.cdist(received, received).pow(2)
    assert torch.allclose(problem.distances(received), 0.5 * problem.space.upper(squared))
    laplacian = torch.diag(problem.space.matrix(edges).sum(1)) - problem.space.matrix(edges)
    assert float(2 * edges @ problem.distances(received)) == pytest.approx(float(torch.trace(received.T @ laplacian @ received)))


@pytest.mark.parametrize("masked", [False, True])
def test_gradients_of_f_and_h_match_autograd(masked):
    _, received = clustered_rows(num_clients=5, dim=7)
    mask = torch.rand(5, 7, generator=torch.Generator().manual_seed(3)) > 0.3 if masked else None
    problem = problem_with(received * (mask if masked else 1), mask, alpha=0.3, mu=1.7)
    models = (received + 0.1).requires_grad_(True)
    edges = torch.rand(10, dtype=torch.float64).requires_grad_(True)
    u = problem.distances(models)
    fidelity = 0.5 * 1.7 * (problem.weights[:, None] * problem.residual(models).pow(2)).sum()
    f = fidelity + 0.3 * (edges + u).pow(2).sum()
    h = 0.3 * (edges.pow(2).sum() + u.pow(2).sum())
    for value, ours in ((f, problem.smooth_gradient), (h, problem.concave_gradient)):
        expected = torch.autograd.grad(value, (models, edges), retain_graph=True)
        computed = ours(models.detach(), edges.detach())
        assert torch.allclose(computed[0], expected[0], atol=1e-10)
        assert torch.allclose(computed[1], expected[1], atol=1e-10)


def test_objective_is_f_plus_g_minus_h():
    _, received = clustered_rows()
    problem = problem_with(received)
    models, edges = received * 0.9, problem.initial_edges() + 0.1
    u = problem.distances(models)
    h = problem.params.alpha * float(edges.pow(2).sum() + u.pow(2).sum())
    g = degree_barrier(edges, problem.space, problem.params.beta, problem.params.gamma)
    assert problem.objective(models, edges) == pytest.approx(problem.smooth(models, edges) + g - h)


def test_initial_graph_is_the_non_negative_cosine_similarity():
    received = torch.tensor([[1.0, 0.0], [1.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)
    edges = problem_with(received).initial_edges()
    assert torch.allclose(edges, torch.tensor([1 / math.sqrt(2), 0.0, 0.0], dtype=torch.float64))


@pytest.mark.parametrize("extrapolate", [True, False])
def test_pdca_objective_is_non_increasing_and_the_graph_is_valid(extrapolate):
    _, received = clustered_rows()
    problem = problem_with(received, extrapolate=extrapolate, max_iter=300)
    result = pdca(problem, received.clone(), problem.initial_edges())
    objective = torch.tensor(result.objective)
    assert result.iterations >= 2
    assert bool((objective[1:] <= objective[:-1] + 1e-9 * objective[:-1].abs()).all())
    assert objective[-1] < objective[0]
    graph = result.graph
    assert torch.equal(graph, graph.T) and bool((graph >= 0).all()) and bool((graph.diagonal() == 0).all())
    assert bool((graph.sum(1) > 0).all())  # the log barrier leaves no client isolated


def independent_prox(point, space, beta, gamma):
    """prox_{g/1}(point) by scipy's L-BFGS-B on the primal (an independent reference)."""
    B = np.stack([space.degrees(torch.eye(len(point), dtype=torch.float64)[i]).numpy() for i in range(len(point))], 1)
    v = point.numpy()
    objective = lambda w: 0.5 * np.sum((w - v) ** 2) + gamma * w.sum() - beta * np.log(B @ w).sum()
    gradient = lambda w: (w - v) + gamma - beta * B.T @ (1.0 / (B @ w))
    result = minimize(objective, np.full(len(v), 1.0), jac=gradient, bounds=[(1e-12, None)] * len(v),
                      method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 10_000})
    return torch.from_numpy(result.x)


def test_printed_pdca_follows_algorithm_1_step_by_step():
    _, received = clustered_rows(num_clients=4, dim=3, noise=0.5)
    problem = problem_with(received, max_iter=3)
    models, edges = received.clone(), problem.initial_edges()
    alpha, mu, weights = problem.params.alpha, problem.params.mu, problem.weights[:, None]
    for _ in range(3):  # Θ ← prox_{g/ρ}(Θ − (∇f − ∇h)/ρ) with ρ = 1, written out from Eq. (15)
        graph = problem.space.matrix(edges)
        laplacian = torch.diag(graph.sum(1)) - graph
        distances = problem.space.upper(0.5 * torch.cdist(models, models).pow(2))
        models, edges = (models - mu * weights * (models - received) - 2 * alpha * laplacian @ models,
                         independent_prox(edges - 2 * alpha * distances, problem.space, 1.0, 1.0))
    result = pdca(problem, received.clone(), problem.initial_edges())
    assert result.iterations == 3 and result.rho == 1.0 and result.safeguard_steps == 0
    assert torch.allclose(result.models, models, atol=1e-7)
    assert torch.allclose(problem.space.upper(result.graph), edges, atol=1e-5)


def test_the_safeguard_fires_only_where_the_printed_step_raises_the_objective():
    _, received = clustered_rows(num_clients=6, dim=5, noise=0.5)
    steep = problem_with(received, alpha=2.0, max_iter=300)
    start = steep.initial_edges()
    literal = proximal_step(steep, received, start, steep.concave_gradient(received, start), rho=1.0)
    assert steep.objective(*literal[:2]) > steep.objective(received, start)  # ρ = 1 would raise F here
    guarded = pdca(steep, received.clone(), start)
    objective = torch.tensor(guarded.objective)
    assert guarded.safeguard_steps > 0 and guarded.rho > 1.0
    assert bool((objective[1:] <= objective[:-1] + 1e-9 * objective[:-1].abs()).all())
    gentle = problem_with(received, max_iter=300)
    assert pdca(gentle, received.clone(), gentle.initial_edges()).safeguard_steps == 0


def test_pdca_e_is_a_different_iteration_with_the_same_descent():
    _, received = clustered_rows(noise=0.5)
    printed = pdca(problem_with(received, max_iter=100), received.clone(), problem_with(received).initial_edges())
    extrapolated = pdca(problem_with(received, extrapolate=True, max_iter=100), received.clone(),
                        problem_with(received).initial_edges())
    assert printed.rho == 1.0 and extrapolated.rho > 1.0  # pDCAe backtracks on f's upper bound
    assert not torch.allclose(printed.models, extrapolated.models)
    for result in (printed, extrapolated):
        objective = torch.tensor(result.objective)
        assert bool((objective[1:] <= objective[:-1] + 1e-9 * objective[:-1].abs()).all())


def test_the_result_says_how_far_the_graph_is_from_stationary():
    _, received = clustered_rows()
    problem = problem_with(received, max_iter=2)  # stopped early: w is not yet the best graph for Ψ
    result = pdca(problem, received.clone(), problem.initial_edges())
    best = learn_graph(problem.distances(result.models), problem.space, problem.params.alpha, problem.params.beta,
                       problem.params.gamma)
    edges = problem.space.upper(result.graph)
    excess = (problem.objective(result.models, edges) - problem.objective(result.models, best.edges))
    assert 1e-6 < excess <= result.graph_gap * problem.space.num_nodes * problem.params.beta
    assert problem.graph_gap(result.models, best.edges) < 1e-8


def test_two_step_objective_is_non_increasing():
    _, received = clustered_rows()
    problem = problem_with(received)
    result = two_step(problem, received.clone(), problem.initial_edges())
    objective = torch.tensor(result.objective)
    assert result.converged
    assert bool((objective[1:] <= objective[:-1] + 1e-9 * objective[:-1].abs()).all())


@pytest.mark.parametrize("solver", ["pdca", "two_step"])
def test_solving_in_row_space_coordinates_equals_solving_on_the_full_rows(solver):
    _, received = clustered_rows(num_clients=6, dim=40)
    params = JGESRParams(max_iter=50)
    reduced = restore(received, torch.ones(6, dtype=torch.float64), params=params, solver=solver)
    problem = problem_with(received, max_iter=50)
    full = (pdca if solver == "pdca" else two_step)(problem, received.clone(), problem.initial_edges())
    assert torch.allclose(reduced.models, full.models, atol=1e-8)
    assert torch.allclose(reduced.graph, full.graph, atol=1e-8)


def test_row_space_coordinates_reconstruct_the_rows():
    _, rows = clustered_rows(num_clients=4, dim=9)
    coordinates, basis = row_space_coordinates(rows)
    assert torch.allclose(coordinates @ basis.T, rows) and torch.allclose(basis.T @ basis, torch.eye(4, dtype=torch.float64))


@pytest.mark.parametrize("solver", ["pdca", "two_step"])
def test_restoration_with_lost_entries_beats_zero_filling(solver):
    # The scale of model vectors in a federation: clusters a few units apart, noise well below that.
    clean, noisy = clustered_rows(num_clients=8, dim=200, noise=0.005)
    clean, noisy = 0.1 * clean, 0.1 * noisy
    mask = torch.rand(8, 200, generator=torch.Generator().manual_seed(5)) > 0.1
    result = restore(noisy * mask, torch.ones(8, dtype=torch.float64), mask, JGESRParams(alpha=1.0), solver)
    assert result.converged
    lost = ~mask
    assert (result.models - clean)[lost].norm() < 0.5 * clean[lost].norm()  # zero filling's error is clean[lost]


def test_restore_keeps_dtype_and_rejects_an_unknown_solver():
    received = torch.randn(3, 4)
    assert restore(received, torch.ones(3), params=JGESRParams(max_iter=3)).models.dtype == torch.float32
    with pytest.raises(ValueError, match="unknown JGESR solver 'admm'"):
        restore(received, torch.ones(3), solver="admm")


@pytest.mark.parametrize("options, message", [
    ({"alpha": 0.0}, "alpha must be > 0"),
    ({"gamma": -1.0}, "gamma must be >= 0"),
    ({"eps": -1e-3}, "eps must be > 0"),
    ({"max_iter": 0}, "max_iter must be an integer >= 1"),
])
def test_bad_parameters_fail_with_a_clear_message(options, message):
    with pytest.raises(ValueError, match=message):
        JGESRParams(**options)
