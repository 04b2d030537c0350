import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.base import weighted_mean
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation, run_full_and_resumed


def run(rounds=1, **options):
    fed = make_federation()
    run_rounds(fed, build_algorithm("ditto", **options), Schedule(rounds), progress=False)
    return fed


def test_global_model_is_fedavg_of_the_global_copies_and_personal_models_differ_from_it():
    fed = run()
    reference = make_federation()
    copies = torch.stack([reference.train(k, 1, reference.initial, stream=0).vector for k in range(4)])
    assert torch.allclose(fed.global_model, weighted_mean(copies, reference.num_train), atol=1e-6)
    for k in range(fed.num_clients):
        assert not torch.allclose(fed.models[k], fed.global_model, atol=1e-3)


def test_with_lambda_zero_personal_models_are_separate_training_on_their_own_stream():
    fed = run(rounds=2, lam=0.0)
    solo = make_federation()
    for rnd in (1, 2):
        solo.models[2] = solo.train(2, rnd, solo.models[2], stream=1).vector
    assert torch.allclose(fed.models[2], solo.models[2], atol=1e-6)  # batched round vs sequential solo training


def test_large_lambda_pulls_personal_models_onto_the_global_model():
    # after round 1 the anchor w^1 was the initial model
    drift = {lam: (run(lam=lam).models - make_federation().initial).norm(dim=1) for lam in (0.0, 1.0, 10.0)}
    assert torch.all(drift[1.0] < drift[0.0])
    assert torch.all(drift[10.0] < 0.6 * drift[0.0])


def test_clients_are_evaluated_with_their_personal_models():
    fed = run()
    assert torch.equal(build_algorithm("ditto").evaluation_models(fed), fed.models)


def test_negative_lambda_is_rejected():
    with pytest.raises(ValueError, match="ditto lam must be >= 0"):
        build_algorithm("ditto", lam=-0.1)


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("ditto"), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
