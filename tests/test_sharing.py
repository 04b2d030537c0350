"""Partial sharing (``share``) of FedAvg, FedProx and MOON: what leaves a client and what the server reads."""
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.sharing import shared_mask
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation
from graph_fixtures import make_graph_federation


@pytest.mark.parametrize("method", ["fedavg", "fedprox", "moon"])
def test_the_readout_never_leaves_the_client_and_the_server_reads_only_shared_entries(method):
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm(method, share="encoder")
    run_rounds(fed, algorithm, Schedule(2), progress=False)
    shared = algorithm.shared
    assert 0 < int(shared.sum()) < fed.dim
    readouts = fed.models[:, ~shared]
    assert not torch.allclose(readouts[0], readouts[1]), "each client trained its own readout"
    assert torch.equal(fed.global_model[~shared], fed.initial[~shared]), "no readout reached the server"
    uploads = torch.stack([algorithm.client_update(fed, k, 3).vector for k in range(fed.num_clients)])
    assert bool((uploads[:, ~shared] == 0).all())
    kept = fed.models.clone()
    poisoned = uploads.clone()
    poisoned[:, ~shared] = float("nan")
    algorithm.aggregate(fed, torch.arange(fed.num_clients), poisoned, 3)
    assert torch.isfinite(fed.global_model).all() and torch.equal(fed.models, kept)
    assert torch.allclose(fed.global_model[shared], (fed.num_train / fed.num_train.sum()) @ uploads[:, shared], atol=1e-6)


def test_a_client_starts_from_the_global_encoder_and_its_own_readout_and_is_scored_with_it():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("fedavg", share="encoder")
    algorithm.setup(fed)
    fed.models[1] = torch.randn(fed.dim)
    fed.global_model = torch.randn(fed.dim)
    start = algorithm.configure(fed, 1)
    assert torch.equal(start[algorithm.shared], fed.global_model[algorithm.shared])
    assert torch.equal(start[~algorithm.shared], fed.models[1][~algorithm.shared])
    assert torch.equal(algorithm.evaluation_models(fed)[1], start), "server protocol: where the client starts from"
    result = algorithm.client_update(fed, 1, 1)
    assert torch.equal(algorithm.trained_model(fed, 1, result), fed.models[1]), "local protocol: its trained model"


def test_share_all_is_fedavg_bit_for_bit():
    plain = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(3), progress=False)
    explicit = run_rounds(make_federation(), build_algorithm("fedavg", share="all"), Schedule(3), progress=False)
    assert plain.equals(explicit)


def test_fedprox_under_partial_sharing_anchors_the_readout_at_the_clients_own():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("fedprox", share="encoder")
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    anchor = algorithm.local_context(fed, 0)["start"]
    assert torch.equal(anchor[~algorithm.shared], fed.models[0][~algorithm.shared])
    assert not torch.equal(anchor[~algorithm.shared], fed.global_model[~algorithm.shared])
    assert torch.equal(anchor[algorithm.shared], fed.global_model[algorithm.shared])


def test_moon_contrasts_against_the_whole_previous_model_under_partial_sharing():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("moon", share="encoder")
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    assert all(torch.equal(algorithm.previous[k][-1], fed.models[k]) for k in range(fed.num_clients))


def test_bad_share_values_are_rejected_with_the_choices():
    with pytest.raises(ValueError, match=r"share must be one of \('all', 'encoder', 'head', 'first_layer'\), got 'top'"):
        build_algorithm("fedavg", share="top")
    fed = make_federation()
    with pytest.raises(ValueError, match="share='first_layer' needs a model with a common first layer"):
        shared_mask(fed, "first_layer")


@pytest.mark.parametrize("method, share", [("fedper", "encoder"), ("lg_fedavg", "head")])
def test_fedper_and_lg_fedavg_are_masks_over_the_same_loop_and_their_personal_part_never_leaves(method, share):
    fed = make_federation()
    algorithm = build_algorithm(method)
    records = run_rounds(fed, algorithm, Schedule(2), progress=False)
    personal = ~algorithm.shared
    head = ~shared_mask(fed, "encoder")
    assert torch.equal(personal, head if method == "fedper" else ~head)
    assert torch.equal(fed.global_model[personal], fed.initial[personal]), "no personal entry reached the server"
    assert not torch.allclose(fed.models[0][personal], fed.models[1][personal])
    same = run_rounds(make_federation(), build_algorithm("fedavg", share=share), Schedule(2), progress=False)
    assert records.equals(same), f"{method} is FedAvg's share={share!r}, not a copy of the loop"


def test_head_is_the_complement_of_encoder():
    fed = make_federation()
    assert torch.equal(shared_mask(fed, "head"), ~shared_mask(fed, "encoder"))
