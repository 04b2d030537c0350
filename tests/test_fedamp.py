import math

import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.fedamp import attention_weights, cloud_models
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation, run_full_and_resumed

# squared distances: ‖w0 − w1‖² = 1, ‖w0 − w2‖² = 4, ‖w1 − w2‖² = 5
MODELS3 = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)


def test_attention_weights_match_the_derivative_of_the_attention_function():
    alpha, sigma = 0.5, 2.0
    weights = attention_weights(MODELS3, alpha, sigma)
    xi = lambda sq: alpha * math.exp(-sq / sigma) / sigma  # α A'(x), A(x) = 1 − exp(−x/σ)
    off = torch.tensor([[0, xi(1), xi(4)], [xi(1), 0, xi(5)], [xi(4), xi(5), 0]], dtype=torch.float64)
    expected = off + torch.diag(1 - off.sum(1))
    assert torch.allclose(weights, expected)
    assert torch.allclose(weights.sum(1), torch.ones(3, dtype=torch.float64))
    assert torch.equal(weights, weights.T)


def test_cloud_models_are_the_attention_weighted_mixtures_of_the_models():
    weights = attention_weights(MODELS3, 0.5, 2.0)
    assert torch.allclose(cloud_models(MODELS3, weights), weights @ MODELS3)


def test_cloud_models_stay_exact_under_large_weights_and_equal_models():
    models = torch.full((3, 5), 0.3)
    weights = attention_weights(models, alpha=1e3, sigma=0.1)  # ξ_kj = 1e4 for equal models
    assert weights[0, 1] == pytest.approx(1e4)
    assert torch.equal(cloud_models(models, weights), models)


def test_with_the_default_scale_distant_models_do_not_attend_to_each_other():
    far = torch.tensor([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]])  # squared distances ≥ 9: ξ ≈ 1e4 e^{-90}
    assert torch.allclose(attention_weights(far, 1e3, 0.1), torch.eye(3))


def ready(**options):
    fed = make_federation()
    algorithm = build_algorithm("fedamp", **options)
    algorithm.setup(fed)
    return fed, algorithm


def test_server_builds_cloud_models_from_the_latest_uploads_and_leaves_personal_models_on_the_clients():
    fed, algorithm = ready(alpha=1.0, sigma=1.0)
    assert torch.equal(algorithm.cloud, fed.initial.repeat(4, 1))
    personal = fed.models.clone()
    uploads = fed.initial + 0.1 * torch.randn(2, fed.dim, generator=torch.Generator().manual_seed(0))
    algorithm.aggregate(fed, torch.tensor([1, 3]), uploads, 1)
    expected_uploads = fed.initial.repeat(4, 1)
    expected_uploads[torch.tensor([1, 3])] = uploads
    assert torch.equal(algorithm.uploads, expected_uploads)
    weights = attention_weights(expected_uploads, 1.0, 1.0)  # MCLR: every entry is a parameter
    assert torch.allclose(algorithm.attention, weights)
    assert torch.allclose(algorithm.cloud, weights @ expected_uploads, atol=1e-6)
    assert torch.equal(fed.models, personal)
    assert torch.equal(algorithm.evaluation_models(fed), fed.models)


def test_with_lam_zero_fedamp_is_separate_training():
    fed = make_federation()
    run_rounds(fed, build_algorithm("fedamp", lam=0.0, alpha=1.0, sigma=1.0), Schedule(2), progress=False)
    local = make_federation()
    run_rounds(local, build_algorithm("local"), Schedule(2), progress=False)
    assert torch.equal(fed.models, local.models)


def test_proximal_term_pulls_the_personal_model_towards_its_cloud_model():
    fed, algorithm = ready(alpha=1.0, sigma=1.0, lam=5.0)  # proximal weight λ / α = 5
    algorithm.cloud = fed.initial + 0.5 * torch.randn(4, fed.dim, generator=torch.Generator().manual_seed(1))
    pulled = algorithm.client_update(fed, 2, round=1).vector
    assert torch.equal(fed.models[2], pulled)  # the client keeps its personal model
    free = make_federation().train(2, 1, fed.initial).vector
    anchor = algorithm.cloud[2]
    assert (pulled - anchor).norm() < 0.5 * (free - anchor).norm()


@pytest.mark.parametrize("start", ["personal", "cloud"])
def test_local_training_starts_from_the_chosen_model(start):
    fed, algorithm = ready(start=start, lam=0.0)
    algorithm.cloud = fed.initial.repeat(4, 1) + 0.5
    fed.models[1] = fed.initial - 0.5
    source = {"personal": fed.models[1], "cloud": algorithm.cloud[1]}[start].clone()
    assert torch.equal(algorithm.configure(fed, 1), source)
    assert torch.equal(algorithm.client_update(fed, 1, round=1).vector, make_federation().train(1, 1, source).vector)


@pytest.mark.parametrize("options, message", [
    ({"alpha": 0.0}, "fedamp alpha must be > 0"),
    ({"sigma": -1.0}, "fedamp sigma must be > 0"),
    ({"lam": -0.5}, "fedamp lam must be >= 0"),
    ({"start": "global"}, "fedamp start must be one of"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedamp", **options)


# a scale at which the test federation's models do attend to each other
ATTENDING = {"alpha": 1.0, "sigma": 10.0}


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("fedamp", **ATTENDING), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert (run.resumed_algorithm.attention - torch.eye(4)).abs().max() > 0.01  # the clients did collaborate
