import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.fedska import StructureServer, by_position, client_representations, feature_gradients
from gflkit.graphs.adjacency import sym_normalize
from gflkit.graphs.given import given_graph
from gflkit.checkpoint import Checkpoint
from gflkit.engine import Schedule, run_rounds
from gflkit.experiment import RunConfig
from gflkit.federation import Federation
from gflkit.training import LocalStep

from conftest import make_federation

SMALL = {"k": 2, "structure_epochs": 2, "encoder_epochs": 2}


def test_server_only_ever_receives_client_features_and_gradients(monkeypatch):
    fed = make_federation(num_clients=4)
    dim = fed.flat.module.feature_dim
    seen = []
    learn_graph, train_encoder = StructureServer.learn_graph, StructureServer.train_encoder

    def spy_learn_graph(self, features, generator):
        seen.append(("features", tuple(features.shape)))
        return learn_graph(self, features, generator)

    def spy_train_encoder(self, features, client_gradients):
        seen.append(("representations", tuple(features.shape)))

        def spied_round_trip(structure):
            gradients = client_gradients(structure)
            seen.append(("gradients", tuple(gradients.shape)))
            return gradients

        return train_encoder(self, features, spied_round_trip)

    monkeypatch.setattr(StructureServer, "learn_graph", spy_learn_graph)
    monkeypatch.setattr(StructureServer, "train_encoder", spy_train_encoder)
    algorithm = build_algorithm("fedska", **SMALL)
    run_rounds(fed, algorithm, Schedule(2), progress=False)
    positions = max(len(idx) for idx in fed.data.train_indices)
    shapes = {kind: {shape for k, shape in seen if k == kind} for kind, _ in seen}
    assert shapes == {"features": {(fed.num_clients, dim)}, "representations": {(positions, fed.num_clients, dim)},
                      "gradients": {(positions, fed.num_clients, dim)}}
    for value in vars(algorithm.server).values():
        assert not isinstance(value, Federation)
        if isinstance(value, torch.Tensor):
            assert value.shape[-1] != fed.data.x.flatten(1).shape[1] or value.shape[0] == fed.num_clients


def test_client_representations_are_the_training_samples_in_split_order():
    fed = make_federation()
    fed.flat.load(fed.initial)
    model = fed.flat.module.eval()
    with torch.no_grad():
        expected = model.features(fed.data.x[fed.data.train_indices[1]])
    assert torch.allclose(client_representations(fed, 1, fed.initial, batch_size=7), expected, atol=1e-6)


def test_by_position_repeats_a_shorter_client_cyclically():
    a, b = torch.arange(3.0)[:, None], 10 + torch.arange(2.0)[:, None]
    stacked = by_position([a, b])
    assert stacked.shape == (3, 2, 1)
    assert stacked[:, 0, 0].tolist() == [0, 1, 2] and stacked[:, 1, 0].tolist() == [10, 11, 10]


def test_feature_gradients_match_the_closed_form_of_each_clients_linear_head():
    fed = make_federation()
    fed.models = fed.initial + 0.1 * torch.randn(fed.num_clients, fed.dim)  # every client its own head
    fed.data.train_indices[1] = fed.data.train_indices[1][:-5]  # clients of unequal sizes are grouped by size
    sizes = [len(idx) for idx in fed.data.train_indices]
    structure = torch.rand(max(sizes), fed.num_clients, fed.flat.module.feature_dim)
    gradients = feature_gradients(fed, structure, sizes)
    for k, size in enumerate(sizes):
        fed.flat.load(fed.models[k])
        head = fed.flat.module.classifier
        labels, h = fed.data.y[fed.data.train_indices[k]], structure[:size, k]
        one_hot = torch.nn.functional.one_hot(labels, head.out_features).float()
        expected = (torch.softmax(head(h), 1) - one_hot) @ head.weight / size  # d/dh_i of mean_i CE(W h_i + b, y_i)
        assert torch.allclose(gradients[:size, k], expected.detach(), atol=1e-6)
        assert (gradients[size:, k] == 0).all()


def test_structure_loss_is_eq10_per_sample_by_hand():
    # Eq. 10: λ · mean_i (1 − cos(h_c^i, h_g^i)), sample i of the batch paired with its own structure feature
    fed = make_federation()
    algorithm = build_algorithm("fedska", **SMALL, weight=0.5)
    algorithm.setup(fed)
    algorithm.structure = [torch.zeros(len(idx), 2) for idx in fed.data.train_indices]
    algorithm.structure[1][3] = torch.tensor([1.0, 0.0])
    algorithm.structure[1][5] = torch.tensor([0.0, 2.0])
    features = torch.tensor([[1.0, 1.0], [3.0, 0.0]])  # cos with (0, 2) = 1/√2, with (1, 0) = 1
    step = LocalStep(1, 2, fed.flat.module, None, None, features, None, positions=torch.tensor([5, 3]),
                     context=algorithm.local_context(fed, 1))
    expected = 0.5 * ((1 - 2 ** -0.5) + (1 - 1.0)) / 2
    assert algorithm.local_loss(fed, step).item() == pytest.approx(expected)


def test_structure_term_enters_local_training_from_round_two():
    fed = make_federation()
    algorithm = build_algorithm("fedska", **SMALL)
    algorithm.setup(fed)
    assert algorithm.structure is None
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    assert [tuple(rows.shape) for rows in algorithm.structure] == [
        (len(idx), fed.flat.module.feature_dim) for idx in fed.data.train_indices]
    adjacency = algorithm.server.adjacency
    assert torch.allclose(adjacency, adjacency.T, atol=1e-6) and (adjacency >= 0).all()
    with_term = algorithm.client_update(fed, 0, 2).vector
    plain = build_algorithm("fedska", **{**SMALL, "weight": 0.0})
    plain.setup(fed)
    plain.structure = algorithm.structure
    assert not torch.allclose(with_term, plain.client_update(fed, 0, 2).vector)


def test_given_graph_mode_uses_the_label_sharing_graph_without_learning():
    fed = make_federation()
    algorithm = build_algorithm("fedska", **SMALL, graph="given")
    run_rounds(fed, algorithm, Schedule(2), progress=False)
    assert algorithm.server.denoising_losses == [], "no structure learning with a given graph"
    expected = sym_normalize(given_graph(fed) + torch.eye(fed.num_clients))
    assert torch.allclose(algorithm.server.adjacency, expected)


@pytest.mark.parametrize("init_graph", ["given", "features"])
def test_bootstrapping_mixes_the_chosen_initial_graph(init_graph):
    fed = make_federation()
    algorithm = build_algorithm("fedska", **SMALL, init_graph=init_graph)
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    given = sym_normalize(given_graph(fed) + torch.eye(fed.num_clients))
    tau = algorithm.params.tau
    learned = (algorithm.server.adjacency - tau * algorithm.server.initial_graph) / (1 - tau)
    assert torch.allclose(algorithm.server.initial_graph, given) == (init_graph == "given")
    assert torch.allclose(learned, learned.T, atol=1e-5) and (learned > -1e-6).all()  # S: the post-processed graph


def test_resume_reproduces_fedska_exactly(tmp_path):
    straight = run_rounds(make_federation(), build_algorithm("fedska", **SMALL), Schedule(4), progress=False)
    ckpt = Checkpoint(tmp_path / "c.pt")
    run_rounds(make_federation(), build_algorithm("fedska", **SMALL), Schedule(2, checkpoint_every=2), ckpt, progress=False)
    resumed = run_rounds(make_federation(), build_algorithm("fedska", **SMALL), Schedule(4, checkpoint_every=2), ckpt,
                         progress=False)
    pd.testing.assert_frame_equal(straight, resumed)


@pytest.mark.parametrize("options, message", [
    ({"k": 100}, "k=100 must be smaller than the number of clients"),
    ({"ratio": 0.0}, "ratio r must lie in"),
    ({"ratio": 1.5}, "ratio r must lie in"),
    ({"noise": "salt"}, "noise must be one of"),
    ({"graph": "random"}, "graph must be one of"),
    ({"init_graph": "identity"}, "init_graph must be one of"),
])
def test_bad_fedska_parameters_fail_with_clear_messages(options, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(dataset="digits", num_clients=20, method="fedska", method_options=options)


def test_unknown_dataset_fails_clearly():
    with pytest.raises(ValueError, match="unknown dataset 'mnist-m'"):
        RunConfig(dataset="mnist-m", num_clients=20, method="fedska", method_options={"k": 5})
