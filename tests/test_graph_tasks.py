import math

import pytest
import torch
import torch.nn.functional as F

from gflkit.data.subgraphs import make_subgraph_clients
from gflkit.metrics import average_precision, roc_auc
from gflkit.tasks import LinkPredictionTask, NodeClassificationTask, build_task

from graph_fixtures import block_graph


@pytest.fixture(scope="module")
def clients():
    return make_subgraph_clients(block_graph(), 4, "louvain", seed=0)


def test_auc_and_ap_match_hand_computation_and_are_nan_for_one_class():
    scores, labels = torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1])
    assert roc_auc(scores, labels) == pytest.approx(75.0)  # 3 of the 4 (positive, negative) pairs ordered
    assert average_precision(scores, labels) == pytest.approx(100 * (0.5 * 1.0 + 0.5 * 2 / 3))
    assert math.isnan(roc_auc(scores, torch.ones(4, dtype=torch.long)))
    with pytest.raises(ValueError, match="matching 1-D"):
        roc_auc(scores, labels[:3])


def test_node_targets_keep_the_split_labels_and_the_loss_ignores_the_rest(clients):
    task, client = NodeClassificationTask(), clients[0]
    for split in ("train", "val", "test"):
        targets = task.targets(client, split)
        mask = client.data[f"{split}_mask"]
        assert torch.equal(targets[mask], client.data.y[mask]) and bool((targets[~mask] == -1).all())
        assert task.count(targets) == int(mask.sum())
    logits, targets = torch.randn(client.data.num_nodes, 3), task.targets(client, "train")
    mask = client.data.train_mask
    assert torch.allclose(task.loss(logits, targets), F.cross_entropy(logits[mask], client.data.y[mask]))
    assert task.evaluate(logits, targets)["count"] == int(mask.sum())
    assert task.loss(logits, torch.full_like(targets, -1)) == 0
    assert torch.equal(task.inputs(client).edge_index, client.data.edge_index)


def test_link_targets_label_held_out_edges_and_non_edges(clients):
    task, client = LinkPredictionTask(), clients[1]
    links = client.links
    test = task.targets(client, "test")
    assert test.shape == (3, 2 * links.test_pos.size(1))
    assert torch.equal(test[:2, test[2] == 1], links.test_pos) and torch.equal(test[:2, test[2] == 0], links.test_neg)
    assert torch.equal(task.targets(client, "train")[:2], links.train_pos)
    assert torch.equal(task.inputs(client).edge_index, links.train_edge_index), "message passing: training edges only"
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        task.targets(client, "dev")


def test_training_targets_add_as_many_fresh_non_edges_per_step(clients):
    task, client = LinkPredictionTask(reconstruction="sampled"), clients[2]
    train, n = task.targets(client, "train"), client.data.num_nodes
    drawn = task.training_targets(train, n, torch.Generator().manual_seed(1))
    again = task.training_targets(train, n, torch.Generator().manual_seed(1))
    other = task.training_targets(train, n, torch.Generator().manual_seed(2))
    assert torch.equal(drawn, again) and not torch.equal(drawn, other)
    negatives = drawn[:2, drawn[2] == 0]
    assert negatives.size(1) == train.size(1)
    edges = {tuple(e) for e in train[:2].t().tolist()}
    assert not any((min(u, v), max(u, v)) in edges or u == v for u, v in negatives.t().tolist())


def test_link_loss_and_metrics_match_hand_computation():
    task = LinkPredictionTask(reconstruction="sampled")
    z = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
    targets = torch.tensor([[0, 0], [1, 2], [1, 0]])  # (0, 1) an edge (score 2), (0, 2) a non-edge (score 0)
    expected = -math.log(torch.sigmoid(torch.tensor(2.0))) - math.log(1 - 0.5)
    assert task.loss(z, targets).item() == pytest.approx(expected, rel=1e-6)
    metrics = task.finalize(task.evaluate(z, targets))
    assert metrics["auc"] == 100.0 and metrics["ap"] == 100.0
    assert metrics["loss"] == pytest.approx(expected / 2, rel=1e-6)
    positives_only = targets[:, :1]
    assert task.loss(z, positives_only).item() == pytest.approx(-math.log(torch.sigmoid(torch.tensor(2.0))), rel=1e-6)


def test_dense_loss_is_kipfs_weighted_bce_over_the_whole_adjacency_matrix():
    task = LinkPredictionTask()
    n, z = 5, torch.randn(7, 3, generator=torch.Generator().manual_seed(0))  # 2 extra (generated) nodes ignored
    train = torch.tensor([[0, 1, 3], [1, 2, 4], [1, 1, 1]])
    pairs = task.training_targets(train, n, torch.Generator())
    assert pairs.size(1) == 2 * 3 + n and bool((pairs[2] == 1).all())
    labels = torch.eye(n)
    labels[train[0], train[1]] = labels[train[1], train[0]] = 1.0
    edges = 6  # directed training edges, self-pairs excluded (Kipf's adj.sum())
    pos_weight, norm = (n * n - edges) / edges, n * n / (2 * (n * n - edges))
    p = torch.sigmoid(z[:n] @ z[:n].t())
    direct = -(pos_weight * labels * p.log() + (1 - labels) * (1 - p).log()).mean() * norm
    assert task.loss(z, pairs).item() == pytest.approx(direct.item(), rel=1e-5)
    assert task.loss(z, pairs[:, :0]).item() == 0.0


def test_dense_and_sampled_losses_differ_and_bad_reconstruction_is_rejected(clients):
    client = clients[2]
    train, n = LinkPredictionTask().targets(client, "train"), client.data.num_nodes
    z = torch.randn(n, 4, generator=torch.Generator().manual_seed(1))
    losses = [task.loss(z, task.training_targets(train, n, torch.Generator().manual_seed(0)))
              for task in (LinkPredictionTask("link_prediction", "dense"), LinkPredictionTask(reconstruction="sampled"))]
    assert losses[0].item() != pytest.approx(losses[1].item())
    with pytest.raises(ValueError, match="unknown reconstruction 'full'.*dense"):
        LinkPredictionTask(reconstruction="full")
    with pytest.raises(ValueError, match="reconstruction"):
        build_task("link_prediction", reconstruction="full")


def test_graph_tasks_are_registered():
    assert isinstance(build_task("link_prediction"), LinkPredictionTask)
    assert build_task("node_classification").score == "accuracy" and LinkPredictionTask.score == "auc"
