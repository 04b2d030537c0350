import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm

from conftest import make_federation, run_full_and_resumed


def ready(num_clusters=2):
    fed = make_federation()
    algorithm = build_algorithm("ifca", num_clusters=num_clusters)
    algorithm.setup(fed)
    return fed, algorithm


def test_cluster_models_start_from_the_initial_model_and_distinct_seeded_initialisations():
    fed, algorithm = ready(3)
    models = algorithm.cluster_models
    assert models.shape == (3, fed.dim)
    assert torch.equal(models[0], fed.initial)
    assert not torch.allclose(models[1], models[0]) and not torch.allclose(models[2], models[1])
    assert torch.equal(ready(3)[1].cluster_models, models)
    assert algorithm.assignments.shape == (fed.num_clients,)


def test_each_client_picks_the_cluster_model_with_the_lowest_training_loss():
    fed, algorithm = ready(2)
    fitted = fed.initial
    for rnd in range(1, 6):
        fitted = fed.train(0, rnd, fitted).vector
    algorithm.cluster_models = torch.stack([fed.initial, fitted])
    assert algorithm.choose_cluster(fed, 0) == 1
    algorithm.cluster_models = torch.stack([fitted, fed.initial])
    assert algorithm.choose_cluster(fed, 0) == 0
    result = algorithm.client_update(fed, 0, round=1)
    assert algorithm.assignments[0] == 0
    assert torch.equal(result.vector, make_federation().train(0, 1, fitted).vector)


def test_server_averages_each_cluster_over_the_clients_that_chose_it_and_keeps_unchosen_ones():
    fed, algorithm = ready(3)
    before = algorithm.cluster_models.clone()
    fed.num_train = torch.tensor([1.0, 2.0, 3.0, 4.0])
    algorithm.assignments = torch.tensor([0, 2, 0, 2])
    updates = torch.randn(4, fed.dim)
    algorithm.aggregate(fed, torch.arange(4), updates, 1)
    models = algorithm.cluster_models
    assert torch.allclose(models[0], (1 * updates[0] + 3 * updates[2]) / 4, atol=1e-6)
    assert torch.allclose(models[2], (2 * updates[1] + 4 * updates[3]) / 6, atol=1e-6)
    assert torch.equal(models[1], before[1])
    assert torch.equal(algorithm.evaluation_models(fed), models[torch.tensor([0, 2, 0, 2])])


def test_partial_participation_averages_only_the_sampled_members():
    fed, algorithm = ready(2)
    algorithm.assignments = torch.tensor([1, 1, 0, 1])
    updates = torch.randn(2, fed.dim)
    algorithm.aggregate(fed, torch.tensor([1, 3]), updates, 1)
    n = fed.num_train[torch.tensor([1, 3])]
    assert torch.allclose(algorithm.cluster_models[1], (n[0] * updates[0] + n[1] * updates[1]) / n.sum(), atol=1e-6)


@pytest.mark.parametrize("options, message", [
    ({"num_clusters": 0}, "ifca num_clusters must be an integer >= 1"),
    ({"num_clusters": 2.5}, "ifca num_clusters must be an integer >= 1"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("ifca", **options)


def test_more_clusters_than_clients_is_rejected():
    with pytest.raises(ValueError, match=r"num_clusters must be <= the number of clients \(4\)"):
        build_algorithm("ifca", num_clusters=5).setup(make_federation())


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("ifca"), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
