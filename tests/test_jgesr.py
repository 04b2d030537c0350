import functools

import pandas as pd
import pytest
import torch

from gflkit.algorithms import JGESR, build_algorithm
from gflkit.channel import Channel
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs.jgesr import JGESRParams, restore
from gflkit.training import Proximal

from conftest import make_federation, run_full_and_resumed


def noisy_federation(missing_rate: float = 0.0):
    fed = make_federation(num_clients=5)
    fed.channel = Channel(noise_scale=0.1, missing_rate=missing_rate)
    return fed


@pytest.mark.parametrize("method", ["pdca", "two_step"])
def test_the_server_restores_what_it_received_and_clients_start_from_their_restored_model(method):
    fed = noisy_federation()
    algorithm = build_algorithm(method, max_iter=200)
    algorithm.setup(fed)
    clients = torch.arange(5)
    updates = fed.models + 0.01 * torch.randn(fed.models.shape, generator=torch.Generator().manual_seed(0))
    received = fed.upload(clients, updates, round=1)
    algorithm.aggregate(fed, clients, received, round=1)
    expected = restore(received, fed.num_train, None, JGESRParams(max_iter=200), method)
    assert torch.allclose(fed.models, expected.models)
    assert torch.equal(algorithm.configure(fed, 3), fed.models[3])
    graph = algorithm.artifacts()["adjacency"]
    assert torch.equal(graph, graph.T) and bool((graph >= 0).all()) and bool((graph.diagonal() == 0).all())


def test_lost_entries_reach_the_server_as_a_mask_that_is_kept_per_client():
    fed = noisy_federation(missing_rate=0.2)
    algorithm = build_algorithm("pdca", max_iter=50)
    algorithm.setup(fed)
    clients = torch.tensor([1, 3])
    received = fed.upload(clients, fed.models[clients].clone(), round=1)
    algorithm.aggregate(fed, clients, received, round=1)
    assert torch.equal(algorithm.mask[clients], fed.upload_mask)
    assert bool(algorithm.mask[[0, 2, 4]].all())  # clients not sampled keep their last (complete) rows
    assert 0.7 < float(fed.upload_mask.double().mean()) < 0.9


def test_clients_are_pulled_towards_their_restored_models_with_weight_mu():
    fed = make_federation(num_clients=3)
    algorithm = build_algorithm("pdca", mu=2.0)
    algorithm.setup(fed)
    fed.models[1] = fed.flat.vector + 0.5
    assert algorithm.proximal(fed) == Proximal(2.0, "anchor")  # (mu / 2) ||w - psi_k||^2, Eq. 3
    assert torch.equal(algorithm.local_context(fed, 1)["anchor"], fed.models[1])


@pytest.mark.parametrize("method", ["pdca", "two_step"])
def test_jgesr_trains_under_channel_noise_and_records_a_decreasing_objective(method):
    fed = noisy_federation(missing_rate=0.05)
    start = sum(m["accuracy"] for m in fed.evaluate(fed.initial)) / fed.num_clients
    algorithm = build_algorithm(method)
    records = run_rounds(fed, algorithm, Schedule(4), progress=False)
    assert records[records["round"] == 4]["accuracy"].mean() > start
    objective = algorithm.artifacts()["objective"]
    assert bool((objective[1:] <= objective[:-1] + 1e-9 * objective[:-1].abs()).all())
    assert objective[-1] < objective[0]


def test_jgesr_needs_two_clients():
    with pytest.raises(ValueError, match="needs at least 2"):
        build_algorithm("pdca").check(1)


@pytest.mark.parametrize("method", ["pdca", "two_step"])
def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path, method):
    run = run_full_and_resumed(lambda: noisy_federation(missing_rate=0.05), lambda: build_algorithm(method, max_iter=100),
                               tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert torch.equal(run.full_algorithm.graph, run.resumed_algorithm.graph)


@pytest.mark.parametrize("method", ["pdca", "pdca_e", "two_step"])
def test_every_round_records_the_solver_diagnostics(method):
    fed = make_federation(num_clients=4)
    algorithm = build_algorithm(method)
    run_rounds(fed, algorithm, Schedule(3), progress=False)
    artifacts = algorithm.artifacts()
    assert artifacts["graph_converged"].dtype == torch.bool and bool(artifacts["graph_converged"].all())
    for name in JGESR.DIAGNOSTICS:
        assert len(artifacts[name]) == 3, name
    assert bool((artifacts["graph_gap"] >= 0).all()) and bool((artifacts["iterations"] >= 1).all())
    assert bool((artifacts["distance_max"] >= artifacts["distance_min"]).all())
    assert artifacts["degrees"].shape == (3, 4) and int(artifacts["dimension"]) == fed.models.shape[1]
    assert torch.allclose(artifacts["degrees"][-1], algorithm.graph.sum(1).float())
    assert int(artifacts["edges"][-1]) == int((torch.triu(algorithm.graph, diagonal=1) != 0).sum())
    assert bool((artifacts["edges"] >= 1).all()) and bool((artifacts["edges"] <= 6).all())  # 4 clients: 6 pairs
    if method == "pdca":  # the printed PDCA keeps ρ = 1 unless the safeguard doubled it
        assert torch.equal(artifacts["rho"], 2.0 ** artifacts["safeguard_steps"])


def test_a_round_whose_graph_learning_does_not_converge_continues_and_records_it(monkeypatch):
    import gflkit.graphs.jgesr as jgesr_solvers

    starved = functools.partial(jgesr_solvers.learn_graph, max_iter=1)
    monkeypatch.setattr(jgesr_solvers, "learn_graph", starved)
    fed = make_federation(num_clients=4)
    algorithm = build_algorithm("two_step", max_iter=5)
    with pytest.warns(RuntimeWarning, match="not certified optimal"):
        records = run_rounds(fed, algorithm, Schedule(2), progress=False)
    assert sorted(records["round"].unique())[-1] == 2 and records["accuracy"].notna().all()
    artifacts = algorithm.artifacts()
    assert not bool(artifacts["graph_converged"].any()) and bool((artifacts["graph_gap"] > 1e-12).all())
