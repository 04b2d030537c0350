import math

import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.data import registered
from gflkit.engine import Schedule, run_rounds
from gflkit.experiment import RunConfig, build_federation, graph_clients, run
from gflkit.federation import GraphFederation
from gflkit.metrics import final_summary

from gflkit.training import TrainConfig
from gflkit.runtime import Runtime

from conftest import run_full_and_resumed
from graph_fixtures import make_graph_federation, write_planetoid


def test_a_local_epoch_is_one_full_batch_step_on_the_clients_graph():
    fed = make_graph_federation("link_prediction", epochs=5, reconstruction="sampled")
    steps = []
    fed.train(2, 1, fed.initial, loss_term=lambda step: steps.append(step) or None)
    assert len(steps) == 5, "local iterations = optimiser steps"
    graph, train_targets = fed.client_data(2, "train")
    assert all(step.x is graph for step in steps)
    positives = train_targets.size(1)
    assert all(step.y.size(1) == 2 * positives for step in steps), "fresh negatives, as many as positives"
    assert not torch.equal(steps[0].y, steps[1].y)
    dense = make_graph_federation("link_prediction", epochs=2)
    steps.clear()
    dense.train(2, 1, dense.initial, loss_term=lambda step: steps.append(step) or None)
    num_nodes = dense.client_data(2, "train")[0].num_nodes
    assert all(step.y.size(1) == 2 * positives + num_nodes for step in steps), "A_train + I, every step the same"


@pytest.mark.parametrize("readout_from", ["mu", "sample"])
def test_graph_training_is_deterministic_and_leaves_the_state_alone(readout_from):
    fed = make_graph_federation("node_classification")
    fed.flat.module.readout_from = readout_from
    before = fed.models.clone()
    a, b = (fed.train(1, round=3, start=fed.initial) for _ in range(2))
    assert torch.equal(a.vector, b.vector) and torch.equal(fed.models, before)
    other_round = fed.train(1, round=4, start=fed.initial).vector
    # the μ readout is deterministic: training is the same in every round; a readout of z depends on its noise
    assert torch.equal(a.vector, other_round) == (readout_from == "mu")


def adam_federation(state):
    fed = make_graph_federation("node_classification")
    fed.train_config = TrainConfig(epochs=2, lr=0.01, optimizer="adam", optimizer_state=state)
    return fed


@pytest.mark.parametrize("state", ["fresh", "persistent"])
def test_adam_state_is_kept_per_client_only_when_persistent(state):
    fed = adam_federation(state)
    first, second = (fed.train(1, round, fed.initial).vector for round in (1, 2))  # same start, deterministic loss
    if state == "fresh":
        assert torch.equal(first, second) and fed.trainer.optimizer_states == {}
    else:
        assert not torch.equal(first, second), "the second training continues Adam's moments"
        assert set(fed.trainer.optimizer_states) == {(1, 0)}
        assert [int(s["step"]) for s in fed.trainer.optimizer_states[(1, 0)]] == [4] * len(fed.flat.parameters)
        fed.train(0, 2, fed.initial)
        assert int(fed.trainer.optimizer_states[(0, 0)][0]["step"]) == 2, "each client has its own state"


def test_persistent_adam_state_survives_a_checkpoint(tmp_path):
    runs = run_full_and_resumed(lambda: adam_federation("persistent"), lambda: build_algorithm("fedavg"),
                                tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(runs.full, runs.resumed)


def test_clients_are_weighted_by_nodes_and_evaluated_on_their_test_targets():
    fed = make_graph_federation("link_prediction")
    assert fed.num_train.tolist() == [float(g.num_nodes) for g in fed.data.graphs]
    metrics = fed.evaluate(fed.initial)
    assert [m["num_samples"] for m in metrics] == [t.size(1) for t in fed.data.targets["test"]]
    assert all({"auc", "ap", "loss"} <= set(m) for m in metrics)
    assert fed.client_metrics(3, fed.initial, "test") == metrics[3]
    with pytest.raises(ValueError, match="unknown split 'dev'"):
        fed.client_data(0, "dev")


@pytest.fixture
def planetoid(tmp_path):
    spec, _ = write_planetoid(tmp_path, "cora")
    with registered(spec):
        yield tmp_path


GRAPH = dict(dataset="cora", num_clients=4, partition="louvain", model="vgae", rounds=2, local_epochs=2, lr=0.05,
             momentum=0.9)


@pytest.mark.parametrize("task, metrics", [("link_prediction", ("auc", "ap")), ("node_classification", ("accuracy",))])
@pytest.mark.parametrize("method", ["fedavg", "moon", "fedvgae"])
def test_runconfig_runs_subgraph_clients_end_to_end(planetoid, task, metrics, method):
    config = RunConfig(**GRAPH, task=task, method=method)
    records = run(config, Runtime(data_root=planetoid, device="cpu"), progress=False)
    assert len(records) == config.rounds * config.num_clients
    for metric in metrics:
        assert records[metric].map(math.isfinite).all()
        table = final_summary(records, value=metric)
        assert table["mean"].map(math.isfinite).all()


def test_graph_federation_matches_the_config(planetoid):
    config = RunConfig(**{**GRAPH, "partition": "metis"}, task="node_classification",
                       partition_options={"train_ratio": 0.5, "val_ratio": 0.25})
    fed = build_federation(config, Runtime(data_root=planetoid, device="cpu"))
    assert isinstance(fed, GraphFederation) and fed.num_clients == 4
    assert fed.num_train.sum() == 516, "every node belongs to one client"
    assert fed.flat.module.readout is not None
    clients = graph_clients(config, planetoid)
    assert all(c.links is None for c in clients), "node classification needs no link split"
    assert graph_clients(config, planetoid) is clients, "cut once per configuration"
    assert all(abs(int(c.data.train_mask.sum()) - 0.5 * c.data.num_nodes) <= 1 for c in clients)


def test_same_graph_config_and_seed_give_identical_records(planetoid):
    config = RunConfig(**GRAPH, task="link_prediction", method="fedvgae")
    first = run(config, Runtime(data_root=planetoid, device="cpu"), progress=False)
    pd.testing.assert_frame_equal(first, run(config, Runtime(data_root=planetoid, device="cpu"), progress=False))


@pytest.mark.parametrize("change, message", [
    ({"partition": "shards"}, r"unknown partition 'shards' for the graph dataset 'cora'; choose one of \['louvain', 'metis'\]"),
    ({"task": "classification"}, "unknown task 'classification' for the graph dataset 'cora'"),
    ({"dataset": "digits", "model": "mclr"}, "unknown partition 'louvain' for the sample dataset 'digits'"),
])
def test_graph_and_sample_options_are_not_mixed(change, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**{**GRAPH, "task": "link_prediction", **change})


def test_fedavg_learns_links_on_the_fixture_graph():
    fed = make_graph_federation("link_prediction", epochs=5)
    start = sum(m["auc"] for m in fed.evaluate(fed.initial)) / fed.num_clients
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(10, eval_every=10), progress=False)
    assert records["auc"].mean() > max(start, 80.0)


@pytest.mark.parametrize("method", ["fedavg", "fedvgae", "fedpub"])
def test_local_protocol_scores_each_subgraph_clients_trained_model(method, monkeypatch):
    fed = make_graph_federation("node_classification", epochs=2)
    algorithm = build_algorithm(method)
    trained = {}
    original = type(algorithm).trained_model

    def spy(self, fed, client, result):
        trained[client] = original(self, fed, client, result).clone()
        return trained[client]

    monkeypatch.setattr(type(algorithm), "trained_model", spy)
    records = run_rounds(fed, algorithm, Schedule(1, evaluate="local"), progress=False).set_index("client")
    for client, model in trained.items():
        assert records.loc[client, "accuracy"] == fed.client_metrics(client, model, "test")["accuracy"]
        if method == "fedvgae":  # the whole model the client kept, not the encoder-only upload
            assert torch.equal(model, fed.models[client])
    server = fed.evaluate(algorithm.evaluation_models(fed))
    assert records["accuracy_server"].tolist() == [m["accuracy"] for m in server]
