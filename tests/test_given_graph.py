import pytest
import torch

from gflkit.data.partition import label_counts
from gflkit.graphs import GivenGraphOptions, given_graph, label_sharing_graph, top_label_mask

from conftest import make_federation

# client 0: labels {0, 1} (0 most frequent); 1: {1, 2} (1 most); 2: {3}; 3: {0, 3} (3 most)
COUNTS = torch.tensor([[5, 3, 0, 0], [0, 4, 1, 0], [0, 0, 0, 7], [1, 0, 0, 9]])


def edges(adjacency):
    return {(i, j) for i, j in adjacency.nonzero().tolist() if i < j}


def test_clients_sharing_any_present_label_are_linked():
    graph = label_sharing_graph(COUNTS)
    assert edges(graph) == {(0, 1), (0, 3), (2, 3)}
    assert graph.dtype == torch.float32 and set(graph.unique().tolist()) == {0.0, 1.0}


def test_only_each_clients_top_labels_count():
    assert edges(label_sharing_graph(COUNTS, top_labels=1)) == {(2, 3)}
    assert edges(label_sharing_graph(COUNTS, top_labels=2)) == edges(label_sharing_graph(COUNTS))
    # ties go to the smaller label; absent labels never count, however large top_labels is
    assert top_label_mask(torch.tensor([[2, 2, 0]]), 1).tolist() == [[True, False, False]]
    assert top_label_mask(torch.tensor([[2, 0, 0]]), 3).tolist() == [[True, False, False]]


def test_graph_is_symmetric_with_zero_diagonal_and_subsampling_keeps_a_subset():
    counts = torch.randint(0, 3, (30, 5), generator=torch.Generator().manual_seed(0))
    full = label_sharing_graph(counts)
    for fraction in (0.0, 0.3, 1.0):
        graph = label_sharing_graph(counts, keep_fraction=fraction, seed=4)
        assert torch.equal(graph, graph.T)
        assert torch.all(graph.diagonal() == 0)
        assert torch.all(graph <= full)
    assert label_sharing_graph(counts, keep_fraction=0.0).sum() == 0
    assert torch.equal(label_sharing_graph(counts, keep_fraction=1.0, seed=9), full)
    half = label_sharing_graph(counts, keep_fraction=0.5, seed=4)
    assert 0.3 < half.sum() / full.sum() < 0.7


def test_subsampling_is_determined_by_the_seed():
    counts = torch.ones(20, 2)
    a, b = (label_sharing_graph(counts, keep_fraction=0.5, seed=1) for _ in range(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, label_sharing_graph(counts, keep_fraction=0.5, seed=2))


def test_given_graph_of_a_federation_uses_its_clients_train_labels():
    fed = make_federation()
    counts = label_counts(fed.data.y, fed.data.train_indices, 3)
    assert torch.equal(given_graph(fed), label_sharing_graph(counts, top_labels=5, seed=fed.seed))
    assert torch.equal(GivenGraphOptions(graph_top_labels=1).build_graph(fed),
                       label_sharing_graph(counts, top_labels=1, seed=fed.seed))


def test_dataset_graph_is_the_federations_client_graph_symmetrised_without_self_loops():
    fed = make_federation()
    fed.client_graph = torch.tensor([[1.0, 0.5, 0.0, 0.0], [0.0, 1.0, 0.2, 0.0],
                                     [0.0, 0.7, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    expected = torch.tensor([[0.0, 0.5, 0.0, 0.0], [0.5, 0.0, 0.7, 0.0],
                             [0.0, 0.7, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    assert torch.equal(given_graph(fed, kind="dataset"), expected)
    assert torch.equal(GivenGraphOptions(graph="dataset").build_graph(fed), expected)


def test_dataset_graph_without_one_names_the_alternative():
    with pytest.raises(ValueError, match="graph='label_sharing' otherwise"):
        given_graph(make_federation(), kind="dataset")


@pytest.mark.parametrize("call, message", [
    (lambda: label_sharing_graph(COUNTS, keep_fraction=1.5), "keep_fraction must lie in"),
    (lambda: label_sharing_graph(COUNTS, top_labels=0), "top_labels must be >= 1"),
    (lambda: label_sharing_graph(torch.ones(3)), "K × C matrix"),
    (lambda: given_graph(make_federation(), kind="learned"), "unknown given graph 'learned'"),
    (lambda: GivenGraphOptions(graph="learned"), "graph must be one of"),
    (lambda: GivenGraphOptions(graph_top_labels=0), "graph_top_labels must be >= 1"),
    (lambda: GivenGraphOptions(graph_keep_fraction=-0.1), r"graph_keep_fraction must lie in \[0, 1\]"),
])
def test_invalid_arguments_are_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()
