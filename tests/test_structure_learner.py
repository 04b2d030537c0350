import pytest
import torch

from gflkit.graphs.adjacency import cosine_similarity_matrix, knn_sparsify, sym_normalize, symmetrize
from gflkit.graphs.gcn import DenseGCN, DenseGraphConv
from gflkit.graphs.structure_learner import MetricGenerator, StructureLearner, corrupt, denoising_loss


def test_dense_graph_conv_is_s_times_linear():
    conv = DenseGraphConv(3, 2)
    x, s = torch.randn(4, 3), torch.rand(4, 4)
    assert torch.allclose(conv(x, s), s @ (x @ conv.linear.weight.T + conv.linear.bias))
    with pytest.raises(ValueError, match="at least one layer"):
        DenseGCN(3, 4, 3, layers=0)


def test_identity_initialised_generator_gives_the_knn_cosine_graph():
    torch.manual_seed(0)
    h = torch.rand(10, 6)  # client features are post-ReLU representations: non-negative
    graph = MetricGenerator(6, k=3)(h)
    expected = sym_normalize(symmetrize(torch.relu(knn_sparsify(cosine_similarity_matrix(h), 3))))
    assert torch.allclose(graph, expected, atol=1e-6)
    assert torch.allclose(graph, graph.T)


def test_denoising_loss_counts_only_masked_entries():
    features = torch.zeros(3, 4)
    reconstructed = torch.full((3, 4), 100.0)
    mask = torch.zeros(3, 4, dtype=torch.bool)
    mask[0, 1] = True
    reconstructed[0, 1] = 2.0
    assert denoising_loss(features, reconstructed, mask).item() == pytest.approx(4.0)


def test_corruption_touches_about_ratio_of_entries_and_only_those():
    features = torch.ones(100, 50)
    gen = torch.Generator().manual_seed(0)
    noisy, mask = corrupt(features, 0.1, "normal", gen)
    assert 0.07 < mask.float().mean() < 0.13
    assert torch.equal(noisy[~mask], features[~mask]) and not torch.equal(noisy[mask], features[mask])
    zeroed, mask = corrupt(features, 0.1, "mask", gen)
    assert (zeroed[mask] == 0).all() and (zeroed[~mask] == 1).all()


def test_fit_lowers_the_denoising_loss_on_clustered_features():
    torch.manual_seed(0)
    centres = torch.randn(3, 8) * 3
    features = centres.repeat_interleave(6, dim=0) + 0.1 * torch.randn(18, 8)
    learner = StructureLearner(8, k=5, ratio=0.2)
    graph, losses = learner.fit(features, 150, torch.Generator().manual_seed(1))
    assert sum(losses[-20:]) / 20 < 0.5 * sum(losses[:20]) / 20
    same_cluster = torch.block_diag(*[torch.ones(6, 6)] * 3).bool()
    assert graph[same_cluster].sum() > 0.9 * graph.sum(), "the learned graph links clients of the same cluster"


@pytest.mark.parametrize("kwargs, message", [({"ratio": 0.0}, "ratio r must lie in"), ({"ratio": 1.5}, "ratio r"),
                                             ({"noise": "salt"}, "noise must be one of")])
def test_bad_learner_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StructureLearner(4, k=2, **kwargs)
