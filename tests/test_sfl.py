import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.sfl import graph_propagate
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs import given_graph

from conftest import make_federation, run_full_and_resumed

PATH4 = torch.tensor([[0.0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
# D^{-1}(A + I) of the path 0 - 1 - 2
PROPAGATION3 = torch.tensor([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])


def test_propagation_on_a_path_graph_matches_hand_computation():
    models = torch.tensor([[6.0, 0.0], [0.0, 6.0], [0.0, 0.0]])
    one_hop = torch.tensor([[3.0, 3.0], [2.0, 2.0], [0.0, 3.0]])
    two_hops = torch.tensor([[2.5, 2.5], [5 / 3, 8 / 3], [1.0, 2.5]])
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=1), one_hop)
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=2), two_hops)
    mixed = torch.tensor([[4.25, 1.25], [5 / 6, 13 / 3], [0.5, 1.25]])  # 0.5 * two hops + 0.5 * models
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=2, alpha=0.5), mixed)
    assert torch.equal(graph_propagate(PROPAGATION3, models, layers=3, alpha=0.0), models)


def test_server_propagates_all_personalised_models_and_reads_out_their_mean():
    fed = make_federation()
    algorithm = build_algorithm("sfl")
    algorithm.setup(fed)
    assert torch.equal(algorithm.adjacency, given_graph(fed))
    algorithm.adjacency = PATH4
    assert torch.allclose(algorithm.propagation()[:2, :3], PROPAGATION3[:2])  # rows 0, 1 as on the 3-path
    updates = torch.randn(2, fed.dim)
    algorithm.aggregate(fed, torch.tensor([0, 2]), updates, 1)
    models = fed.initial.repeat(4, 1)
    models[torch.tensor([0, 2])] = updates
    assert torch.equal(fed.models, models)
    expected = graph_propagate(algorithm.propagation(), models, layers=3)
    assert torch.allclose(algorithm.aggregated, expected)
    assert torch.allclose(fed.global_model, expected.mean(0))
    assert torch.equal(algorithm.evaluation_models(fed), algorithm.aggregated), "server protocol: u_k"
    trained = algorithm.client_update(fed, 1, 2)
    assert torch.equal(algorithm.trained_model(fed, 1, trained), trained.vector), "local protocol: v_k"


def run(rounds, **options):
    fed = make_federation()
    algorithm = build_algorithm("sfl", **options)
    run_rounds(fed, algorithm, Schedule(rounds), progress=False)
    return fed, algorithm


def test_first_round_has_no_regulariser_and_zero_weights_give_local_training():
    local = make_federation()
    run_rounds(local, build_algorithm("local"), Schedule(1), progress=False)
    assert torch.equal(run(1, lam_graph=5.0, lam_global=5.0)[0].models, local.models)
    fresh = make_federation()
    run_rounds(fresh, build_algorithm("local"), Schedule(2), progress=False)
    assert torch.equal(run(2, lam_graph=0.0, lam_global=0.0)[0].models, fresh.models)


def test_regulariser_pulls_personalised_models_towards_the_aggregated_and_global_models():
    # the same round-2 client step of client 1, with and without the regulariser, from the same state
    fed, algorithm = run(1, lam_graph=2.0, lam_global=2.0)
    pulled = algorithm.client_update(fed, 1, round=2).vector
    free, plain = run(1, lam_graph=0.0, lam_global=0.0)
    unpulled = plain.client_update(free, 1, round=2).vector
    assert torch.equal(algorithm.aggregated, plain.aggregated)  # round 1 had no regulariser in either run
    for anchor in (algorithm.aggregated[1], fed.global_model):
        assert (pulled - anchor).norm() < 0.8 * (unpulled - anchor).norm()


@pytest.mark.parametrize("start", ["personal", "global", "graph"])
def test_local_training_starts_from_the_chosen_model(start):
    fed, algorithm = run(1, start=start, lam_graph=0.0, lam_global=0.0)
    source = {"personal": fed.models[3], "global": fed.global_model, "graph": algorithm.aggregated[3]}[start]
    assert torch.equal(algorithm.configure(fed, 3), source)
    expected = make_federation().train(3, 2, source).vector
    assert torch.equal(algorithm.client_update(fed, 3, round=2).vector, expected)


@pytest.mark.parametrize("options, message", [
    ({"lam_graph": -0.1}, "sfl lam_graph must be >= 0"),
    ({"lam_global": -1.0}, "sfl lam_global must be >= 0"),
    ({"layers": 0}, "sfl layers must be an integer >= 1"),
    ({"alpha": 1.5}, r"sfl alpha must lie in \[0, 1\]"),
    ({"start": "server"}, "sfl start must be one of"),
    ({"graph": "learned"}, "graph must be one of"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("sfl", **options)


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("sfl"), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
