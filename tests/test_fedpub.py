import math

import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.base import weighted_mean
from gflkit.algorithms.fedpub import masked_weights, personalised_aggregate, random_partition_graph, similarity_weights
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation, run_full_and_resumed
from graph_fixtures import make_graph_federation


def test_similarity_weights_on_a_hand_computed_case():
    embeddings = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 3.0]])
    similarity, weights = similarity_weights(embeddings, tau=10.0)
    c = 1 / math.sqrt(2)
    assert torch.allclose(similarity, torch.tensor([[1.0, 0.0, c], [0.0, 1.0, c], [c, c, 1.0]]), atol=1e-6)
    row0 = torch.exp(10 * torch.tensor([1.0, 0.0, c]))
    assert torch.allclose(weights[0], row0 / row0.sum(), atol=1e-6)
    assert torch.allclose(weights.sum(dim=1), torch.ones(3))
    _, equal = similarity_weights(torch.tensor([[1.0, 2.0]]).repeat(4, 1), tau=10.0)
    assert torch.allclose(equal, torch.full((4, 4), 0.25))
    _, uniform = similarity_weights(embeddings, tau=0.0)
    assert torch.allclose(uniform, torch.full((3, 3), 1 / 3))


def test_personalised_aggregate_is_each_clients_weighted_mean_and_the_global_model_is_size_weighted():
    fed = make_graph_federation()
    algorithm = build_algorithm("fedpub")
    algorithm.setup(fed)
    clients = torch.tensor([0, 2, 3])
    algorithm.embeddings[clients] = torch.randn(3, algorithm.embeddings.size(1))
    updates = torch.randn(3, fed.dim)
    algorithm.aggregate(fed, clients, updates, 1)
    _, alpha = similarity_weights(algorithm.embeddings[clients], 10.0)
    for row, client in enumerate(clients):
        assert torch.allclose(algorithm.personal[client], weighted_mean(updates, alpha[row]), atol=1e-5)
    assert torch.allclose(algorithm.personal[clients], personalised_aggregate(updates, alpha))
    assert torch.equal(algorithm.personal[1], fed.initial), "a client outside the round keeps its model"
    assert torch.allclose(fed.global_model, weighted_mean(updates, fed.num_train[clients]), atol=1e-6)
    assert algorithm.received.tolist() == [True, False, True, True]
    assert torch.equal(algorithm.configure(fed, 2), algorithm.personal[2])
    assert torch.equal(algorithm.configure(fed, 1), fed.global_model)
    weights = algorithm.artifacts()["weights"]
    assert torch.allclose(weights[clients][:, clients], alpha) and weights[1].isnan().all()

    sized = build_algorithm("fedpub", size_weighted=True)
    sized.setup(fed)
    sized.embeddings[clients] = algorithm.embeddings[clients]
    sized.aggregate(fed, clients, updates, 1)
    expected = alpha * fed.num_train[clients][None]
    assert torch.allclose(sized.personal[0], weighted_mean(updates, expected[0]), atol=1e-5)


def test_the_mask_multiplies_the_weights_in_the_forward_pass_and_is_trained_with_them():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("fedpub")
    algorithm.setup(fed)
    names = [entry.name for entry in algorithm.entries]
    assert names == ["vgae.encoder.conv1.lin.weight", "vgae.encoder.conv_mu.lin.weight",
                     "vgae.encoder.conv_logstd.lin.weight", "readout.weight", "classifier.weight"], "weights, no biases"
    module, graph = fed.flat.module.eval(), fed.data.graphs[0]
    mask = torch.rand(algorithm.masks.size(1))
    mask[mask < 0.3] = 0.0
    parameters = list(fed.flat.parameters)
    with torch.no_grad(), masked_weights(module, algorithm.entries, mask):
        inside = module(graph)
    assert all(a is b for a, b in zip(fed.flat.parameters, parameters)), "the same parameters afterwards"
    fed.flat.load(algorithm.masked(fed.initial, mask))
    assert torch.allclose(inside, module(graph), atol=1e-5)

    result = algorithm.client_update(fed, 0, 1)
    assert not torch.equal(algorithm.masks[0], torch.ones_like(algorithm.masks[0])), "the mask was trained"
    assert torch.equal(algorithm.masks[1], torch.ones_like(algorithm.masks[1]))
    assert torch.equal(fed.models[0], result.vector), "the client keeps θ_i and uploads it"
    assert torch.equal(algorithm.evaluation_models(fed)[0], algorithm.masked(result.vector, algorithm.masks[0]))


@pytest.mark.parametrize("task, metric", [("link_prediction", "auc"), ("node_classification", "accuracy")])
def test_fedpub_trains_personalised_models_with_finite_metrics(task, metric):
    fed = make_graph_federation(task)
    algorithm = build_algorithm("fedpub")
    records = run_rounds(fed, algorithm, Schedule(4, eval_every=2), progress=False)
    assert sorted(records["round"].unique()) == [2, 4] and records[metric].notna().all()
    assert torch.isfinite(torch.tensor(records[metric].to_numpy())).all()
    assert not torch.equal(algorithm.personal[0], algorithm.personal[1]), "personalised aggregates"
    artifacts = algorithm.artifacts()
    assert artifacts["similarity"].shape == (4, 4) and torch.allclose(artifacts["similarity"].diagonal(), torch.ones(4))
    assert torch.allclose(artifacts["weights"].sum(dim=1), torch.ones(4))


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_graph_federation, lambda: build_algorithm("fedpub"), tmp_path / "checkpoint.pt",
                               rounds=4)
    assert run.resumed.equals(run.full)
    for name, value in run.full_algorithm.state_dict().items():
        other = run.resumed_algorithm.state_dict()[name]
        assert torch.equal(value, other) if isinstance(value, torch.Tensor) else value == other, name
def test_the_proxy_graph_is_disjoint_random_blocks_fixed_by_the_seed():
    graph = random_partition_graph(3, 10, 0.5, 4, torch.Generator().manual_seed(0))
    assert graph.x.shape == (30, 4) and graph.edge_index.size(1) > 0
    src, dst = graph.edge_index
    assert torch.equal(src // 10, dst // 10), "no edge across blocks"
    assert {(int(a), int(b)) for a, b in zip(src, dst)} == {(int(b), int(a)) for a, b in zip(src, dst)}
    again = random_partition_graph(3, 10, 0.5, 4, torch.Generator().manual_seed(0))
    assert torch.equal(graph.edge_index, again.edge_index) and torch.equal(graph.x, again.x)


def test_sample_clients_get_random_inputs_and_token_inputs_are_rejected():
    fed = make_federation()
    algorithm = build_algorithm("fedpub")
    algorithm.setup(fed)
    assert algorithm.proxy.shape == (500, 2, 4, 4)
    fed.data.x = fed.data.x.long()
    with pytest.raises(ValueError, match="fedpub feeds random inputs.*GraphFederation"):
        build_algorithm("fedpub").setup(fed)


@pytest.mark.parametrize("options, message", [({"tau": -1.0}, "tau must be >= 0"), ({"l1": -1e-3}, "l1 must be"),
                                              ({"proxy_p": 2.0}, "proxy_p must lie"), ({"n_proxy": 0}, "n_proxy"),
                                              ({"mask_init": "zeros"}, "mask_init must be one of")])
def test_bad_fedpub_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedpub", **options)


def test_xavier_masks_start_equal_across_clients_and_differ_from_ones():
    fed = make_graph_federation()
    algorithm = build_algorithm("fedpub", mask_init="xavier")
    algorithm.setup(fed)
    assert torch.equal(algorithm.masks[0], algorithm.masks[3])
    assert not torch.equal(algorithm.masks[0], torch.ones_like(algorithm.masks[0]))
