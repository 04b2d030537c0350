import numpy as np
import pytest
import torch
from scipy.optimize import minimize

from gflkit.graphs.graph_learning import EdgeSpace, degree_barrier, learn_graph, prox_degree_barrier


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
    ours = prox_degree_barrier(point, space, beta, gamma, rho)
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


def test_learned_graph_links_clients_within_planted_clusters():
    gen = torch.Generator().manual_seed(0)
    centres = torch.randn(2, 50, generator=gen, dtype=torch.float64)
    signals = centres[torch.tensor([0, 0, 0, 1, 1, 1])] + 0.05 * torch.randn(6, 50, generator=gen, dtype=torch.float64)
    space = EdgeSpace(6)
    gram = signals @ signals.T
    distances = space.upper(0.5 * (gram.diagonal()[:, None] + gram.diagonal()[None, :] - 2 * gram))
    graph = space.matrix(learn_graph(distances, space, alpha=0.05, beta=1.0, gamma=1.0, start=torch.ones(15, dtype=torch.float64)))
    within = torch.block_diag(torch.ones(3, 3), torch.ones(3, 3)).bool() & ~torch.eye(6, dtype=torch.bool)
    assert graph[within].min() > 10 * graph[~within & ~torch.eye(6, dtype=torch.bool)].max()
