"""SFL*'s graph constructor: shapes, the antisymmetric term, top-k sparsity, row normalisation, the target."""
import pytest
import torch
import torch.nn.functional as F

from gflkit.graphs.graph_constructor import GraphConstructor, distance_target, learn_client_graph


def test_the_constructor_links_each_pair_in_at_most_one_direction():
    torch.manual_seed(0)
    dense = GraphConstructor(12, dim=8, alpha=3.0)()
    assert dense.shape == (12, 12) and bool((dense >= 0).all()) and bool((dense <= 1).all())
    assert torch.equal(torch.diagonal(dense), torch.zeros(12)), "the antisymmetric term has a zero diagonal"
    assert bool(((dense > 0) & (dense.T > 0)).sum() == 0), "relu(tanh(α(M1M2ᵀ − M2M1ᵀ))): one direction per pair"


def test_learned_graph_keeps_k_per_row_and_is_row_stochastic():
    models = torch.randn(20, 30)
    graph = learn_client_graph(models, k=5, dim=8, steps=3)
    adjacency = graph.adjacency
    assert adjacency.shape == (20, 20)
    assert bool(((adjacency > 0).sum(1) <= 5).all())
    nonempty = adjacency.sum(1) > 0
    assert torch.allclose(adjacency.sum(1)[nonempty], torch.ones(int(nonempty.sum())))
    assert torch.equal(learn_client_graph(models, k=5, dim=8, steps=3).adjacency, adjacency), "seeded"
    assert not torch.equal(learn_client_graph(models, k=5, dim=8, steps=3, seed=1).adjacency, adjacency)
    assert learn_client_graph(models, k=50, dim=8, steps=1).adjacency.shape == (20, 20), "k is capped at K"


def test_targets_are_row_normalised_distances_or_proximities():
    models = torch.tensor([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    distances = torch.tensor([[0.0, 5.0, 10.0], [5.0, 0.0, 5.0], [10.0, 5.0, 0.0]])
    assert torch.allclose(distance_target(models, "distance"), F.normalize(distances, dim=1))
    proximity = (10.0 - distances).fill_diagonal_(0.0)  # the constructor's diagonal is 0, so is the target's
    assert torch.allclose(distance_target(models, "proximity"), F.normalize(proximity, dim=1))
    with pytest.raises(ValueError, match="target must be one of"):
        distance_target(models, "cosine")


def test_fitting_lowers_the_loss_and_reports_it():
    models = torch.randn(10, 6)
    graph = learn_client_graph(models, k=3, dim=8, steps=200, lr=0.5)
    first, last = graph.fit_loss
    assert last < first
    assert learn_client_graph(models, k=3, steps=0).fit_loss[0] == learn_client_graph(models, k=3, steps=0).fit_loss[1]
