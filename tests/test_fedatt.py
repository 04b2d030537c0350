"""FedAtt's attentive server step on a hand-computed case, its options, and resume."""
import math

import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.fedatt import attentive_step
from gflkit.state import Entry, Layout

from conftest import make_federation, run_full_and_resumed


def test_two_clients_two_layers_by_hand():
    layout = Layout([Entry("a", torch.Size([2]), 0, False), Entry("b", torch.Size([1]), 2, False)])
    server = torch.tensor([0.0, 0.0, 1.0])
    clients = torch.tensor([[3.0, 4.0, 1.0],    # layer a at distance 5, layer b at distance 0
                            [0.0, 0.0, 3.0]])   # layer a at distance 0, layer b at distance 2
    new = attentive_step(server, clients, layout, step_size=0.5, norm=2)
    attention_a = torch.softmax(torch.tensor([5.0, 0.0]), 0)   # the farther client gets more attention
    attention_b = torch.softmax(torch.tensor([0.0, 2.0]), 0)
    expected_a = -0.5 * attention_a[0] * torch.tensor([-3.0, -4.0])
    expected_b = 1.0 - 0.5 * attention_b[1] * (1.0 - 3.0)
    assert torch.allclose(new[:2], expected_a) and math.isclose(float(new[2]), float(expected_b), rel_tol=1e-6)


def test_aggregate_adds_seeded_noise_and_without_noise_is_the_step():
    fed = make_federation()
    quiet = build_algorithm("fedatt", noise=0.0)
    quiet.setup(fed)
    updates = torch.randn(4, fed.dim)
    start = fed.global_model.clone()
    quiet.aggregate(fed, torch.arange(4), updates, 1)
    assert torch.allclose(fed.global_model, attentive_step(start, updates, fed.layout, 1.0, 2.0))
    noisy = [build_algorithm("fedatt") for _ in range(2)]
    results = []
    for algorithm in noisy:
        fed = make_federation()
        algorithm.setup(fed)
        algorithm.aggregate(fed, torch.arange(4), updates, 1)
        results.append(fed.global_model)
    assert torch.equal(results[0], results[1]), "the noise is seeded by (seed, round)"
    assert 0 < float((results[0] - attentive_step(start, updates, fed.layout, 1.0, 2.0)).std()) < 0.01


@pytest.mark.parametrize("options, message", [({"step_size": 0}, "step_size must be > 0"),
                                              ({"norm": 0.5}, "norm must be >= 1"),
                                              ({"noise": -1}, "noise must be >= 0")])
def test_invalid_options(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedatt", **options)


@pytest.mark.parametrize("method", ["fedatt", "fedper", "lg_fedavg"])
def test_resume_reproduces_the_uninterrupted_run(tmp_path, method):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm(method), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
