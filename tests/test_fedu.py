import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.fedu import laplacian_step
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs import given_graph

from conftest import make_federation, run_full_and_resumed

PATH4 = torch.tensor([[0.0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])


def test_laplacian_step_on_a_path_graph_matches_hand_computation():
    weights = PATH4[:3, :3]  # path 0 - 1 - 2, L = [[1, -1, 0], [-1, 2, -1], [0, -1, 1]]
    models = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 8.0]])
    expected = torch.tensor([[1.2, 0.2], [3.0, 2.4], [4.8, 7.4]])
    assert torch.allclose(laplacian_step(models, weights, 0.1), expected)
    # self loops cancel: W - s (D - A) W is unchanged by adding I to A
    assert torch.allclose(laplacian_step(models, weights + torch.eye(3), 0.1), expected)


def test_server_step_updates_sampled_rows_from_sampled_neighbours_with_row_normalised_weights():
    fed = make_federation()
    algorithm = build_algorithm("fedu", lam=2.0, normalize="row")  # step eta * lam = 0.1 * 2
    algorithm.setup(fed)
    algorithm.adjacency = PATH4
    before = fed.models.clone()
    u = torch.tensor([[1.0] * fed.dim, [4.0] * fed.dim])
    algorithm.aggregate(fed, torch.tensor([0, 1]), u, 1)
    # D^{-1}(A + I): a_01 = 1/2, a_10 = 1/3 (client 2 is a neighbour of 1 but was not sampled)
    assert torch.allclose(fed.models[0], u[0] - 0.2 * 0.5 * (u[0] - u[1]))
    assert torch.allclose(fed.models[1], u[1] - 0.2 / 3 * (u[1] - u[0]))
    assert torch.equal(fed.models[2:], before[2:])


def test_symmetric_weights_by_default_as_the_fedska_authors_normalise():
    fed = make_federation()
    algorithm = build_algorithm("fedu", lam=2.0)
    algorithm.setup(fed)
    algorithm.adjacency = PATH4
    u = torch.tensor([[1.0] * fed.dim, [4.0] * fed.dim])
    algorithm.aggregate(fed, torch.tensor([0, 1]), u, 1)
    # D^{-1/2}(A + I)D^{-1/2} on the path: degrees 2, 3, so a_01 = a_10 = 1/√6
    a = 6 ** -0.5
    assert torch.allclose(fed.models[0], u[0] - 0.2 * a * (u[0] - u[1]))
    assert torch.allclose(fed.models[1], u[1] - 0.2 * a * (u[1] - u[0]))
    with pytest.raises(ValueError, match="normalize must be one of"):
        build_algorithm("fedu", normalize="none")


def test_eta_overrides_the_local_learning_rate():
    fed = make_federation()
    algorithm = build_algorithm("fedu", lam=1.0, eta=0.5, normalize="row")
    algorithm.setup(fed)
    algorithm.adjacency = PATH4
    u = torch.tensor([[0.0] * fed.dim, [6.0] * fed.dim])
    algorithm.aggregate(fed, torch.tensor([0, 1]), u, 1)
    assert torch.allclose(fed.models[0], torch.full((fed.dim,), 1.5))


def test_the_graph_is_the_given_graph_of_the_train_labels_and_lambda_zero_is_local_training():
    runs = {}
    for name, options in [("local", {}), ("fedu", {"lam": 0.0}), ("fedu_on", {"lam": 1.0})]:
        fed = make_federation()
        algorithm = build_algorithm(name.removesuffix("_on"), **options)
        run_rounds(fed, algorithm, Schedule(2), progress=False)
        runs[name] = (fed, algorithm)
    fed, algorithm = runs["fedu"]
    assert torch.equal(algorithm.adjacency, given_graph(fed))
    assert fed.global_model is None
    assert torch.equal(fed.models, runs["local"][0].models)
    assert not torch.allclose(runs["fedu_on"][0].models, fed.models)


@pytest.mark.parametrize("options, message", [
    ({"lam": -1.0}, "fedu lam must be >= 0"),
    ({"eta": 0.0}, "fedu eta must be > 0"),
    ({"graph": "learned"}, "graph must be one of"),
    ({"graph_keep_fraction": 2.0}, "graph_keep_fraction must lie in"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedu", **options)


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("fedu", lam=1.0), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert "adjacency" in run.resumed_algorithm.state_dict()
