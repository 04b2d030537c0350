"""The public authoring surface: a method written as a local penalty and an aggregation runs on the engine as
gflkit's own do — FedProx and FedAtt, written on it, give the records of their former formulations."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch import Tensor

from gflkit.algorithms import ALGORITHMS, FedAvg, Method, Uploads, build_algorithm, register_method
from gflkit.algorithms.fedatt import attentive_step
from gflkit.algorithms.terms import squared_distance
from gflkit.engine import Schedule, run_rounds
from gflkit.experiment import RunConfig, run
from gflkit.runtime import Runtime
from gflkit.seeding import FEDATT_NOISE, generator

from conftest import make_federation, run_full_and_resumed
from test_sharing import make_graph_federation


class ProxAsBefore(FedAvg):
    """FedProx as it was written before the public surface: a loss term over flat views of a context anchor."""

    name = "prox_as_before"
    adds_local_loss = True

    def __init__(self, mu: float, **options):
        super().__init__(**options)
        self.mu = mu

    def local_context(self, fed, client):
        return {"anchor": self.configure(fed, client)}

    def local_loss(self, fed, step):
        return 0.5 * self.mu * squared_distance(step.params, fed.flat.parameters_as_views(step.context["anchor"]))


class AttAsBefore(FedAvg):
    """FedAtt as it was written before: the aggregation writing the federation's global model itself."""

    name = "att_as_before"

    def aggregate(self, fed, clients, updates, round):
        fed.models[clients] = updates
        noise = torch.randn(fed.dim, generator=generator(fed.seed, FEDATT_NOISE, round))
        fed.global_model = attentive_step(fed.global_model, updates, fed.layout, 1.0, 2.0) + 0.001 * noise


def records(make_fed, algorithm, mode="auto", rounds=3):
    fed = make_fed()
    fed.trainer.mode = mode
    return run_rounds(fed, algorithm, Schedule(rounds, clients_per_round=3), progress=False)


@pytest.mark.parametrize("mode", ["batched", "sequential"])
def test_a_method_that_changes_nothing_is_fedavg_bit_for_bit(mode):
    plain = type("Plain", (Method,), {"name": "plain"})
    assert records(make_federation, plain(), mode).equals(records(make_federation, build_algorithm("fedavg"), mode))


@pytest.mark.parametrize("mode", ["batched", "sequential"])
@pytest.mark.parametrize("share", ["all", "encoder"])
def test_fedprox_on_the_surface_gives_its_former_records(mode, share):
    def hidden_layer():
        return make_federation(model="mclr_relu")

    new = records(hidden_layer, build_algorithm("fedprox", mu=0.5, share=share), mode)
    before = records(hidden_layer, ProxAsBefore(0.5, share=share), mode)
    pd.testing.assert_frame_equal(new, before)


def test_fedprox_on_the_surface_gives_its_former_records_on_subgraph_clients():
    def graph():
        return make_graph_federation("node_classification")

    new = records(graph, build_algorithm("fedprox", mu=0.5, share="encoder"))
    pd.testing.assert_frame_equal(new,
                                  records(graph, ProxAsBefore(0.5, share="encoder")))


def test_fedatt_on_the_surface_gives_its_former_records():
    new = records(make_federation, build_algorithm("fedatt"))
    pd.testing.assert_frame_equal(new,
                                  records(make_federation, AttAsBefore()))


def test_the_penalty_sees_one_models_named_parameters_and_its_constant_start():
    seen = []

    class Probe(Method):
        name = "probe"

        def local_penalty(self, w, start, round):
            seen.append((list(w), [t.requires_grad for t in w.values()], [t.requires_grad for t in start.values()],
                         [tuple(t.shape) for t in w.values()] == [tuple(t.shape) for t in start.values()], round))
            return None

    fed = make_federation()
    fed.trainer.mode = "sequential"
    run_rounds(fed, Probe(), Schedule(2), progress=False)
    names = [name for name, _ in fed.flat.module.named_parameters()]
    assert seen and all(entry == (names, [True] * len(names), [False] * len(names), True, entry[4]) for entry in seen)
    assert {entry[4] for entry in seen} == {1, 2}
    assert Probe.adds_local_loss and not Method.adds_local_loss
    assert not type("NoPenalty", (Method,), {"name": "no_penalty"}).adds_local_loss


class NeighbourMean(Method):
    """Personalised: each sampled client's new model is the mean of its own upload and its ring neighbour's."""

    name = "neighbour_mean"
    personalised = True

    def aggregate_models(self, uploads: Uploads) -> Tensor:
        return 0.5 * (uploads.models + uploads.models.roll(1, dims=0))


def test_a_personalised_method_keeps_a_model_per_client_and_scores_each_with_its_own():
    fed = make_federation()
    method = NeighbourMean()
    method.setup(fed)
    assert fed.global_model is None
    uploads = torch.randn(3, fed.dim)
    clients = torch.tensor([0, 2, 3])
    method.aggregate(fed, clients, uploads, 1)
    assert torch.equal(fed.models[clients], 0.5 * (uploads + uploads.roll(1, dims=0)))
    assert torch.equal(fed.models[1], fed.initial), "a client that did not train keeps its model"
    assert method.evaluation_models(fed) is fed.models and torch.equal(method.configure(fed, 2), fed.models[2])


def test_a_personalised_method_resumes_to_the_uninterrupted_run(tmp_path):
    resumed = run_full_and_resumed(make_federation, NeighbourMean, tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(resumed.full, resumed.resumed)


@pytest.mark.parametrize("personalised, returned, expected", [
    (False, lambda u: u.models, "returned shape (4, {d}), expected ({d},) (one model)"),
    (True, lambda u: u.weighted_mean(), "returned shape ({d},), expected (4, {d}) (one model per sampled client)"),
])
def test_an_aggregation_of_the_wrong_shape_is_named(personalised, returned, expected):
    wrong = type("Wrong", (Method,), {"name": "wrong", "personalised": personalised,
                                      "aggregate_models": lambda self, uploads: returned(uploads)})()
    fed = make_federation()
    wrong.setup(fed)
    with pytest.raises(ValueError, match=r"method 'wrong': aggregate_models " + expected.format(d=fed.dim)
                       .replace("(", r"\(").replace(")", r"\)")):
        wrong.aggregate(fed, torch.arange(4), torch.randn(4, fed.dim), 1)


def test_a_personalised_method_with_partial_sharing_is_refused():
    from gflkit.algorithms.sharing import SharingParams

    shared = type("Shared", (NeighbourMean,), {"name": "shared", "Params": SharingParams})(share="encoder")
    with pytest.raises(ValueError, match="a personalised method keeps whole models per client; use share='all'"):
        shared.setup(make_federation())


def test_the_methods_random_stream_is_its_own_and_the_same_on_a_rerun():
    draws = {}

    class Noisy(Method):
        name = "noisy"

        def aggregate_models(self, uploads):
            draws.setdefault(uploads.round, []).append(torch.rand(3, generator=uploads.random))
            return uploads.weighted_mean()

    for _ in range(2):
        run_rounds(make_federation(), Noisy(), Schedule(2), progress=False)
    assert torch.equal(draws[1][0], draws[1][1]) and not torch.equal(draws[1][0], draws[2][0])
    other = type("Other", (Noisy,), {"name": "other"})
    run_rounds(make_federation(), other(), Schedule(1), progress=False)
    assert not torch.equal(draws[1][0], draws[1][2]), "another method's stream differs"


def test_a_registered_method_runs_by_name_from_a_run_config():
    register_method(NeighbourMean)
    try:
        config = RunConfig(dataset="digits", num_clients=6, partition="iid", rounds=2, method="neighbour_mean", batch_size=16)
        result = run(config, Runtime(device="cpu"), progress=False)
        assert (result["method"] == "neighbour_mean").all() and len(result) == 2 * 6
    finally:
        ALGORITHMS.pop("neighbour_mean")
