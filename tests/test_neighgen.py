import dataclasses
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Data
from torch_geometric.utils import to_dense_adj

from gflkit.algorithms import fedsage
from gflkit.algorithms.neighgen import Impaired, MeanGCN, NeighGen, cross_client_targets, neighgen_loss
from gflkit.state import FlatModule

from graph_fixtures import make_graph_federation


def path_graph(num_nodes=5, num_features=3, seed=0):
    source = torch.arange(num_nodes - 1)
    edges = torch.cat([torch.stack([source, source + 1]), torch.stack([source + 1, source])], dim=1)
    return Data(x=torch.randn(num_nodes, num_features, generator=torch.Generator().manual_seed(seed)), edge_index=edges)


def test_mean_gcn_is_the_row_normalised_propagation_of_the_authors():
    graph, layer = path_graph(), MeanGCN(3, 2)
    adjacency = to_dense_adj(graph.edge_index, max_num_nodes=5)[0] + torch.eye(5)
    expected = adjacency / adjacency.sum(1, keepdim=True) @ (graph.x @ layer.linear.weight.t()) + layer.linear.bias
    assert torch.allclose(layer(graph.x, graph.edge_index), expected, atol=1e-6)


def test_dgen_starts_alive_with_a_zero_bias():
    model = NeighGen(4, num_pred=2)
    assert float(model.dgen.bias.detach()) == 0.0 and model.classifier is None
    assert NeighGen(4, num_pred=2, num_classes=3).classifier is not None


def test_cross_client_targets_are_neighbours_of_nodes_of_the_other_clients():
    graphs = [path_graph(seed=k) for k in range(3)]
    graphs.append(Data(x=torch.randn(2, 3), edge_index=torch.empty(2, 0, dtype=torch.long)))  # no edge: no term
    targets = cross_client_targets(graphs, 1, num_nodes=4, num_pred=3, rng=torch.Generator().manual_seed(0))
    assert len(targets) == 2 and all(t.shape == (4, 3, 3) for t in targets)
    for target, graph in zip(targets, (graphs[0], graphs[2])):
        rows = {tuple(row) for row in graph.x[graph.edge_index[1]].tolist()}  # features of nodes that are neighbours
        assert all(tuple(feature) in rows for feature in target.reshape(-1, 3).tolist())
    again = cross_client_targets(graphs, 1, 4, 3, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(targets, again))


def impaired_path(labels):
    graph = path_graph(6, 3)
    return Impaired(graph, torch.arange(6), torch.tensor([2, 1, 0, 3, 1, 2]), torch.randn(6, 2, 3), labels)


def test_the_classifier_term_needs_labels_and_reaches_fgen_through_the_generated_features():
    torch.manual_seed(3)  # a classifier whose output ReLU (the authors') is not all zero here
    model = NeighGen(3, num_pred=2, hidden=16, latent_dim=8, dropout=0.0, num_classes=2)
    with torch.no_grad():
        model.dgen.bias.fill_(3.0)  # every node gets its two generated neighbours
    noise = torch.zeros(6, 8)
    labelled = impaired_path(torch.tensor([0, 1, -1, 1, 0, -1]))
    without = neighgen_loss(model, labelled, noise, 1.0, 1.0, c=0.0)
    with_term = neighgen_loss(model, labelled, noise, 1.0, 1.0, c=1.0)
    counts, features = model(labelled.graph.x, labelled.graph.edge_index, noise)
    scores = model.classify_mended(labelled.graph, counts, features)
    known = labelled.labels >= 0
    expected = F.cross_entropy(scores[known], labelled.labels[known])
    assert with_term.item() == pytest.approx(without.item() + expected.item(), rel=1e-5)
    model.zero_grad()
    expected.backward()
    assert model.fgen[-2].weight.grad.abs().sum() > 0, "the classifier reads the generated features"
    unlabelled = dataclasses.replace(labelled, labels=None)
    assert neighgen_loss(model, unlabelled, noise, 1.0, 1.0, c=1.0).item() == without.item()


def test_the_federated_phase_trains_only_fgen():
    fed = make_graph_federation("node_classification")
    short, long = (fedsage.FedSageParams(local_gen_epochs=5, gen_rounds=rounds, gen_lr=0.01) for rounds in (1, 3))
    impaired = fedsage.impair_clients(fed, short)
    after_one, after_three = (fedsage.train_neighgen(fed, impaired, params) for params in (short, long))
    fgen = FlatModule(fedsage.init_neighgen(fed, short)).layout.mask(lambda entry: entry.name.startswith("fgen."))
    changed = (after_one != after_three).any(0)
    assert bool(changed[fgen].any()) and not bool(changed[~fgen].any())
    assert not torch.equal(after_three[0], after_three[1]), "each client trains its own NeighGen"


def test_local_phase_trains_the_whole_neighgen_with_the_classifier():
    fed = make_graph_federation("node_classification")
    params = fedsage.FedSageParams(local_gen_epochs=2, gen_rounds=1, gen_lr=0.01)
    flat = FlatModule(fedsage.init_neighgen(fed, params))
    assert flat.module.classifier is not None
    rows = fedsage.train_neighgen(fed, fedsage.impair_clients(fed, params), params)
    classifier = flat.layout.mask(lambda entry: entry.name.startswith("classifier."))
    assert bool((rows[:, classifier] != flat.vector[classifier]).any())
    link_fed = make_graph_federation("link_prediction")
    assert fedsage.init_neighgen(link_fed, params).classifier is None, "no labels: no classifier term"


REAL_ROOT = os.environ.get("GFLKIT_DATA")


@pytest.mark.integration
def test_fedsage_plus_generates_neighbours_on_polblogs():
    from gflkit.experiment import build_graph_federation
    from gflkit.papers.fedvgae import PROFILES

    if not REAL_ROOT or not (Path(REAL_ROOT) / "polblogs" / "raw" / "polblogs.npz").is_file():
        pytest.skip("real PolBlogs not found: set GFLKIT_DATA to the shared datasets folder")
    config = PROFILES["ci"].config(method="fedsage", dataset="polblogs", num_clients=3)
    fed = build_graph_federation(config, REAL_ROOT, device="cpu")
    params = fedsage.FedSageParams(**{**config.method_options, "gen_rounds": 2})
    rows = fedsage.train_neighgen(fed, fedsage.impair_clients(fed, params), params)
    generated = [anchors.numel() for anchors, _ in fedsage.generate(fed, rows, params)]
    assert sum(generated) > 0, f"no neighbour generated on PolBlogs (per client: {generated})"
