import math

import pytest
import torch
from torch_geometric.data import Data

from gflkit.algorithms import build_algorithm
from gflkit.algorithms import fedsage
from gflkit.algorithms.neighgen import generated_neighbours, greedy_feature_loss, hide_nodes, impair, mend, neighgen_loss
from gflkit.checkpoint import Checkpoint
from gflkit.engine import Schedule, run_rounds
from gflkit.state import FlatModule

from conftest import make_federation
from graph_fixtures import make_graph_federation

FAST = {"local_gen_epochs": 5, "gen_rounds": 2, "gen_epochs": 1, "gen_lr": 0.01}  # a short NeighGen phase for the tiny federations


def both_directions(pairs):
    pairs = torch.tensor(pairs).t()
    return torch.cat([pairs, pairs.flip(0)], dim=1)


def test_hiding_counts_each_kept_nodes_missing_neighbours_and_collects_their_features():
    #   1 - 0 - 3 - 4 - 5, plus 0 - 2 - 1; hide 2 and 3
    edge_index = both_directions([(0, 1), (0, 2), (0, 3), (1, 2), (3, 4), (4, 5)])
    x = torch.arange(6.0)[:, None] * torch.tensor([[1.0, -1.0]])
    hidden = torch.tensor([False, False, True, True, False, False])
    impaired = impair(x, edge_index, hidden, num_pred=1)
    assert impaired.kept.tolist() == [0, 1, 4, 5]
    assert impaired.missing.tolist() == [2, 1, 1, 0], "node 0 lost 2 and 3, node 1 lost 2, node 4 lost 3"
    assert torch.equal(impaired.graph.x, x[[0, 1, 4, 5]])
    assert sorted(map(tuple, impaired.graph.edge_index.t().tolist())) == [(0, 1), (1, 0), (2, 3), (3, 2)]
    assert torch.equal(impaired.missing_features[:, 0], x[[2, 2, 3, 0]] * torch.tensor([[1.0], [1.0], [1.0], [0.0]]))
    two = impair(x, edge_index, hidden, num_pred=2)
    assert torch.equal(two.missing_features[0], x[[2, 3]]), "the first P hidden neighbours, ascending id"
    assert torch.equal(two.missing_features[1], torch.stack([x[2], torch.zeros(2)])), "zero-padded"
    assert int(hide_nodes(7, 0.5, torch.Generator().manual_seed(0)).sum()) == 3


def test_greedy_loss_matches_each_generated_neighbour_with_its_nearest_missing_one():
    true = torch.tensor([[[0.0, 0.0], [4.0, 4.0]], [[9.0, 9.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]]])
    missing = torch.tensor([2, 1, 0])
    generated = torch.tensor([[[1.0, 1.0], [3.0, 3.0]], [[8.0, 8.0], [7.0, 7.0]], [[5.0, 5.0], [5.0, 5.0]]],
                             requires_grad=True)
    counts = torch.tensor([2.5, 7.0, 2.0])  # floor: 2, capped 2 (node 1 has only one true neighbour), 2 (none missing)
    loss = greedy_feature_loss(generated, counts, true, missing)
    # node 0: 1 (to [0, 0]) + 1 (to [4, 4]); node 1: 1 + 4, both against [9, 9]; node 2 has nothing missing
    assert math.isclose(float(loss.detach()), (1 + 1 + 1 + 4) / 6, rel_tol=1e-6)
    loss.backward()
    assert torch.isfinite(generated.grad).all() and bool((generated.grad[2] == 0).all())
    assert float(greedy_feature_loss(generated, torch.tensor([0.9, 0.0, 3.0]), true, missing).detach()) == 0.0


def test_mending_adds_the_predicted_number_of_neighbours_capped_at_num_pred():
    graph = Data(x=torch.zeros(4, 2), edge_index=both_directions([(0, 1), (2, 3)]))
    features = torch.arange(24.0).view(4, 3, 2)
    anchors, new_features = generated_neighbours(torch.tensor([0.0, 2.7, 9.0, 1.0]), features)
    assert anchors.tolist() == [1, 1, 2, 2, 2, 3]
    assert torch.equal(new_features, torch.cat([features[1, :2], features[2], features[3, :1]]))
    mended = mend(graph, anchors, new_features)
    assert mended.num_nodes == 10 and torch.equal(mended.x[:4], graph.x) and torch.equal(mended.x[4:], new_features)
    added = mended.edge_index[:, graph.edge_index.size(1):]
    assert sorted(map(tuple, added.t().tolist())) == sorted(
        [(a, 4 + i) for i, a in enumerate(anchors.tolist())] + [(4 + i, a) for i, a in enumerate(anchors.tolist())])
    assert torch.equal(mended.edge_index[:, :graph.edge_index.size(1)], graph.edge_index)


@pytest.mark.parametrize("task", ["node_classification", "link_prediction"])
def test_generated_nodes_are_never_targets(task):
    fed = make_graph_federation(task)
    before = {split: [t.clone() for t in fed.data.targets[split]] for split in fed.data.SPLITS}
    metrics = fed.evaluate(fed.initial)
    algorithm = build_algorithm("fedsage", **FAST)
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    generated = algorithm.artifacts()["generated_neighbours"]
    assert int(generated.sum()) > 0
    for k in range(fed.num_clients):
        n = fed.data.num_nodes[k]
        assert fed.data.graphs[k].num_nodes == n + int(generated[k])
        for split in fed.data.SPLITS:
            targets = fed.data.targets[split][k]
            if task == "node_classification":
                assert torch.equal(targets[:n], before[split][k]) and bool((targets[n:] == -1).all())
            else:
                assert torch.equal(targets, before[split][k])
        _, train_targets, _ = next(fed.batches(k, "train", torch.Generator().manual_seed(k)))
        assert int(train_targets[:2].max() if task == "link_prediction" else (train_targets >= 0).nonzero().max()) < n
    assert [m["num_samples"] for m in fed.evaluate(fed.initial)] == [m["num_samples"] for m in metrics]


@pytest.mark.parametrize("task", ["link_prediction", "node_classification"])
def test_plain_fedsage_is_fedavg(task):
    runs = {}
    for name, options in [("fedavg", {}), ("fedsage", {"plus": False})]:
        fed = make_graph_federation(task)
        runs[name] = (run_rounds(fed, build_algorithm(name, **options), Schedule(3), progress=False), fed)
    assert runs["fedsage"][0].equals(runs["fedavg"][0])
    assert torch.equal(runs["fedsage"][1].global_model, runs["fedavg"][1].global_model)


@pytest.mark.parametrize("task, metric", [("link_prediction", "auc"), ("node_classification", "accuracy")])
def test_fedsage_plus_runs_end_to_end_with_finite_metrics(task, metric):
    fed = make_graph_federation(task)
    records = run_rounds(fed, build_algorithm("fedsage", **FAST), Schedule(4, eval_every=2), progress=False)
    assert sorted(records["round"].unique()) == [2, 4]
    assert records[metric].map(math.isfinite).all() and records["loss"].map(math.isfinite).all()
    assert torch.isfinite(fed.global_model).all()


def test_federated_neighgen_learns_the_missing_counts():
    fed = make_graph_federation("node_classification")
    params = fedsage.FedSageParams(gen_rounds=10, gen_lr=0.01)
    impaired = fedsage.impair_clients(fed, params)
    noise = torch.zeros(impaired[0].graph.num_nodes, params.latent_dim)

    model = fedsage.init_neighgen(fed, params).eval()
    flat = FlatModule(model)

    def count_loss(row):
        flat.load(row)
        with torch.no_grad():
            return float(neighgen_loss(model, impaired[0], noise, 1.0, 0.0))

    initial = flat.vector.clone()
    trained = fedsage.train_neighgen(fed, impaired, params)
    assert trained.shape == (fed.num_clients, flat.layout.dim)
    assert count_loss(trained[0]) < count_loss(initial)


def test_resume_reproduces_the_uninterrupted_run_without_training_neighgen_again(tmp_path, monkeypatch):
    def run(rounds, checkpoint=None):
        return run_rounds(make_graph_federation("node_classification"), build_algorithm("fedsage", **FAST),
                          Schedule(rounds, checkpoint_every=2), checkpoint, progress=False)

    full = run(4)
    checkpoint = Checkpoint(tmp_path / "checkpoint.pt")
    run(2, checkpoint)

    def no_second_phase(*args):
        raise AssertionError("NeighGen trained again on resume")

    monkeypatch.setattr(fedsage, "train_neighgen", no_second_phase)
    resumed = run(4, checkpoint)
    assert resumed.equals(full)


def test_fedsage_plus_needs_subgraph_clients_and_a_fresh_federation():
    with pytest.raises(ValueError, match="subgraph clients"):
        build_algorithm("fedsage").setup(make_federation())
    build_algorithm("fedsage", plus=False).setup(make_federation())
    fed = make_graph_federation("node_classification")
    run_rounds(fed, build_algorithm("fedsage", **FAST), Schedule(1), progress=False)
    with pytest.raises(ValueError, match="already"):
        build_algorithm("fedsage").setup(fed)


@pytest.mark.parametrize("options, message", [({"hidden_portion": 1.0}, "hidden_portion"),
                                              ({"num_pred": 0}, "num_pred"), ({"gen_lr": 0.0}, "gen_lr"),
                                              ({"b": -1.0}, "a, b, c >= 0")])
def test_bad_fedsage_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedsage", **options)
