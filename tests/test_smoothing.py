import pytest
import torch

from gflkit.graphs.smoothing import graph_filter, laplacian



@pytest.fixture(autouse=True)
def float64_by_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)


def block_graph(sizes: list[int], weight: float = 1.0) -> torch.Tensor:
    """Disjoint complete graphs of the given sizes."""
    graph = torch.block_diag(*[torch.full((n, n), weight) for n in sizes])
    return graph - torch.diag(graph.diagonal())


def eq6_objective(models, received, adjacency, weights, alpha, mu, mask=None):
    observed = models if mask is None else models * mask
    fidelity = 0.5 * mu * (weights[:, None] * (observed - received).pow(2)).sum()
    return fidelity + alpha * torch.trace(models.T @ laplacian(adjacency) @ models)


def test_laplacian_rows_sum_to_zero_and_match_the_definition():
    adjacency = torch.tensor([[0.0, 2.0, 0.0], [2.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    expected = torch.tensor([[2.0, -2.0, 0.0], [-2.0, 3.0, -1.0], [0.0, -1.0, 1.0]])
    assert torch.equal(laplacian(adjacency), expected)


def test_graph_filter_matches_the_direct_solve_and_zeroes_the_gradient():
    gen = torch.Generator().manual_seed(0)
    received = torch.randn(5, 7, generator=gen)
    adjacency = torch.rand(5, 5, generator=gen)
    adjacency = (adjacency + adjacency.T) * (1 - torch.eye(5))
    weights = torch.tensor([0.1, 0.3, 0.2, 0.25, 0.15])
    alpha, mu = 0.7, 1.3
    restored = graph_filter(received, adjacency, weights, alpha, mu)
    direct = torch.linalg.inv(torch.diag(weights) + 2 * alpha / mu * laplacian(adjacency)) @ torch.diag(weights) @ received
    assert torch.allclose(restored, direct, atol=1e-12)
    models = restored.clone().requires_grad_(True)
    eq6_objective(models, received, adjacency, weights, alpha, mu).backward()
    assert models.grad.abs().max() < 1e-10


def test_with_large_alpha_a_block_graph_aggregates_to_cluster_means():
    gen = torch.Generator().manual_seed(1)
    received = torch.randn(6, 4, generator=gen)
    restored = graph_filter(received, block_graph([2, 4]), torch.full((6,), 1 / 6), alpha=1e8, mu=1.0)
    expected = torch.cat([received[:2].mean(0).expand(2, 4), received[2:].mean(0).expand(4, 4)])
    assert torch.allclose(restored, expected, atol=1e-6)


def test_masked_filter_solves_the_masked_problem_and_beats_zero_filling():
    gen = torch.Generator().manual_seed(2)
    clean = torch.cat([torch.randn(1, 300, generator=gen).expand(4, 300), torch.randn(1, 300, generator=gen).expand(4, 300)])
    clean = clean + 0.05 * torch.randn(8, 300, generator=gen)
    mask = torch.rand(8, 300, generator=gen) > 0.1
    received = clean * mask
    adjacency, weights = block_graph([4, 4]), torch.full((8,), 1 / 8)
    restored = graph_filter(received, adjacency, weights, alpha=0.5, mu=1.0, mask=mask)
    models = restored.clone().requires_grad_(True)
    eq6_objective(models, received, adjacency, weights, 0.5, 1.0, mask.double()).backward()
    assert models.grad.abs().max() < 1e-8
    lost = ~mask
    assert (restored - clean)[lost].norm() < 0.2 * clean[lost].norm()  # zero filling's error is clean[lost]


def test_graph_filter_rejects_non_positive_weights():
    with pytest.raises(ValueError, match="alpha > 0 and mu > 0"):
        graph_filter(torch.zeros(2, 3), torch.zeros(2, 2), torch.ones(2), alpha=0.0, mu=1.0)
