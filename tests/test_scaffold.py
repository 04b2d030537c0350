"""SCAFFOLD: the corrected local step, option II control variates, the server step, the fixed point on a
quadratic, resume."""
import pandas as pd
import pytest
import torch
from torch import nn

from gflkit.algorithms import build_algorithm
from gflkit.engine import Schedule, run_rounds
from gflkit.models.base import FeatureModel
from gflkit.training import TrainConfig

from conftest import make_federation, run_full_and_resumed


def one_step_federation():
    fed = make_federation()
    fed.train_config = TrainConfig(batch_size=1000, lr=0.1)  # one step per epoch: y = x - lr (g + c - c_i)
    return fed


def test_the_local_step_follows_the_corrected_gradient():
    fed = one_step_federation()
    algorithm = build_algorithm("scaffold")
    algorithm.setup(fed)
    plain = fed.train(1, 1, fed.global_model).vector
    shift = torch.randn(fed.dim) * algorithm.trainable
    algorithm.server_control = shift
    corrected = algorithm.client_update(fed, 1, 1).vector
    assert torch.allclose(corrected, plain - 0.1 * shift, atol=1e-6)


def test_control_variates_option_ii_and_the_server_step():
    fed = one_step_federation()
    algorithm = build_algorithm("scaffold", global_lr=0.5)
    algorithm.setup(fed)
    x = fed.global_model.clone()
    results = [algorithm.client_update(fed, k, 1) for k in (0, 2)]
    for k, result in zip((0, 2), results):
        expected = (x - result.vector) / (1 * 0.1) * algorithm.trainable  # c = c_i = 0 before, K = 1 step
        assert torch.allclose(algorithm.client_controls[k], expected, atol=1e-5)
    assert not algorithm.client_controls[1].any(), "a client that did not train keeps its control variate"
    updates = torch.stack([r.vector for r in results])
    algorithm.aggregate(fed, torch.tensor([0, 2]), updates, 1)
    assert torch.allclose(fed.global_model, x + 0.5 * (updates - x).mean(0), atol=1e-6)
    assert torch.allclose(algorithm.server_control, algorithm.client_controls.sum(0) / 4, atol=1e-6)


def test_the_server_control_averages_over_the_clients_that_train():
    # two of six clients are unseen test clients: c is the mean of the four training clients' c_i
    fed = make_federation(num_clients=6, held_out=torch.tensor([False, True, False, False, True, False]))
    algorithm = build_algorithm("scaffold")
    run_rounds(fed, algorithm, Schedule(3), progress=False)
    assert not algorithm.client_controls[[1, 4]].any(), "held-out clients never train"
    assert algorithm.client_controls.any(dim=1).sum() == 4
    assert torch.allclose(algorithm.server_control, algorithm.client_controls.sum(0) / 4, atol=1e-6)


def test_first_round_equals_fedavg_and_later_rounds_differ():
    scaffold = run_rounds(make_federation(), build_algorithm("scaffold"), Schedule(2), progress=False)
    fedavg = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(2), progress=False)
    first = lambda frame: frame[frame["round"] == 1]["accuracy"].to_numpy()
    assert (first(scaffold) == first(fedavg)).all(), "zero control variates: FedAvg's round (equal client sizes)"
    assert not scaffold[scaffold["round"] == 2]["loss"].equals(fedavg[fedavg["round"] == 2]["loss"])


def test_adam_and_bad_options_are_refused():
    fed = make_federation()
    fed.train_config = TrainConfig(optimizer="adam")
    with pytest.raises(ValueError, match="assume plain SGD local steps"):
        build_algorithm("scaffold").setup(fed)
    fed.train_config = TrainConfig(momentum=0.9)
    with pytest.raises(ValueError, match="with momentum 0.9"):
        build_algorithm("scaffold").setup(fed)
    fed.train_config = TrainConfig(lr_schedule=[[0, 0.1], [1, 0.01]])
    with pytest.raises(ValueError, match=r"a learning-rate schedule \[\(0.0, 0.1\), \(1.0, 0.01\)\]"):
        build_algorithm("scaffold").setup(fed)
    with pytest.raises(ValueError, match="global_lr must be > 0"):
        build_algorithm("scaffold", global_lr=0)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("scaffold"), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert torch.equal(run.full_algorithm.server_control, run.resumed_algorithm.server_control)


class SquaredError:
    """Mean squared error: with a linear model every client's loss is a quadratic of the parameters."""

    name = "squared_error"

    def loss(self, outputs, targets):
        return ((outputs - targets) ** 2).mean()


class LinearModel(FeatureModel):
    r""":math:`W \mathrm{vec}(x) + b`: squared error makes it a quadratic of the parameters (MCLR's two
    linear layers would make it a quartic)."""

    def __init__(self):
        super().__init__()
        self.classifier = nn.Linear(32, 3)
        self.feature_dim = 32

    def features(self, x):
        return x.flatten(1)

    def head(self, h):
        return self.classifier(h)


def quadratic_federation(epochs):
    """Four equal-sized clients of a linear model with squared error, inputs at different scales (so the
    clients' quadratics have different curvatures) and different targets; full-batch steps."""
    from gflkit.federation import Federation

    gen = torch.Generator().manual_seed(0)
    per_client, scales = 50, (0.5, 1.0, 1.5, 2.0)
    x = torch.cat([s * torch.randn(per_client, 2, 4, 4, generator=gen) for s in scales])
    y = torch.cat([torch.randn(per_client, 3, generator=gen) + 2.0 * k for k in range(len(scales))])
    train = [torch.arange(k * per_client, (k + 1) * per_client) for k in range(len(scales))]
    torch.manual_seed(0)
    return Federation(x, y, train, train, LinearModel(), SquaredError(),
                      TrainConfig(epochs=epochs, batch_size=per_client, lr=0.05), seed=0)


def fixed_point_distance(name, rounds=150, epochs=5):
    """Distance to the minimiser of the clients' summed losses (least squares on the pooled data: the clients
    are equal-sized) after ``rounds`` full-participation rounds of ``epochs`` local steps."""
    fed = quadratic_federation(epochs)
    algorithm = build_algorithm(name)
    algorithm.setup(fed)
    clients = torch.arange(fed.num_clients)
    for r in range(1, rounds + 1):
        results = algorithm.round_updates(fed, clients, r)
        algorithm.aggregate(fed, clients, torch.stack([result.vector for result in results]), r)
    inputs = torch.cat([fed.data.x.flatten(1), torch.ones(len(fed.data.x), 1)], dim=1).double()
    solution = torch.linalg.lstsq(inputs, fed.data.y.double()).solution  # (33, 3): weights and bias
    views = fed.layout.split(fed.global_model)
    learned = torch.cat([views["classifier.weight"].T, views["classifier.bias"].unsqueeze(0)]).double()
    return float((learned - solution).norm() / solution.norm())


def test_scaffold_reaches_the_quadratic_optimum_that_fedavgs_client_drift_misses():
    # at SCAFFOLD's fixed point c_i = ∇f_i(x*) and c = Σ c_i / N = ∇f(x*) = 0: local steps stay at x*
    scaffold, fedavg = fixed_point_distance("scaffold"), fixed_point_distance("fedavg")
    assert scaffold < 1e-4, f"SCAFFOLD ends {scaffold:.2e} (relative) from the optimum"
    assert fedavg > 1e-2, f"FedAvg's client drift should keep it away from the optimum, got {fedavg:.2e}"
