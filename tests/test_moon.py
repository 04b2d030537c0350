import math

import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.terms import model_contrastive
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation
from graph_fixtures import make_graph_federation


def test_contrastive_loss_matches_hand_computation():
    z = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    z_global = torch.tensor([[3.0, 0.0], [1.0, 1.0]])  # cosines 1 and 1/√2
    z_previous = torch.tensor([[0.0, 1.0], [0.0, 5.0]])  # cosines 0 and 1
    tau = 0.5
    row0 = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0 / tau)))
    row1 = -math.log(math.exp(2 ** -0.5 / tau) / (math.exp(2 ** -0.5 / tau) + math.exp(1 / tau)))
    assert model_contrastive(z, z_global, [z_previous], tau).item() == pytest.approx((row0 + row1) / 2, rel=1e-6)
    assert model_contrastive(z, z_global, [], tau).item() == pytest.approx(0.0, abs=1e-7), "no negative: nothing to contrast"
    two = model_contrastive(z[:1], z_global[:1], [z_previous[:1], z_previous[:1]], tau).item()
    assert two == pytest.approx(-math.log(math.exp(2) / (math.exp(2) + 2)), rel=1e-6)


def test_contrastive_gradient_flows_only_into_the_current_representation():
    z = torch.randn(5, 3, requires_grad=True)
    anchors = [torch.randn(5, 3, requires_grad=True) for _ in range(2)]
    model_contrastive(z, anchors[0], anchors[1:], 0.5).backward()
    assert z.grad is not None and all(a.grad is None for a in anchors)
    with pytest.raises(ValueError, match="tau must be > 0"):
        model_contrastive(z, anchors[0], anchors[1:], 0.0)


def test_moon_first_round_equals_fedavg_and_the_pool_keeps_the_last_trained_models():
    runs = {}
    for name in ("fedavg", "moon"):
        fed = make_federation()
        algorithm = build_algorithm(name, **({"pool_size": 2} if name == "moon" else {}))
        run_rounds(fed, algorithm, Schedule(1), progress=False)
        runs[name] = (fed, algorithm)
    assert torch.equal(runs["fedavg"][0].global_model, runs["moon"][0].global_model), "empty pool: no term"
    fed, moon = runs["moon"]
    for round in (2, 3):
        result = moon.client_update(fed, 1, round)
    assert len(moon.previous[1]) == 2 and torch.equal(moon.previous[1][-1], result.vector)


def test_moon_term_changes_training_on_graph_clients():
    trained = {}
    for mu in (0.0, 5.0):
        fed = make_graph_federation()
        run_rounds(fed, build_algorithm("moon", mu=mu), Schedule(2), progress=False)
        trained[mu] = fed.global_model
    assert not torch.equal(trained[0.0], trained[5.0])


@pytest.mark.parametrize("options, message", [({"mu": -1.0}, "mu .* must be >= 0"), ({"tau": 0.0}, "tau"),
                                              ({"pool_size": 0}, "pool_size")])
def test_bad_moon_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("moon", **options)
