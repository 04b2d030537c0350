import pytest
import torch

from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig

from conftest import make_federation


def test_state_is_a_k_by_d_matrix_of_identical_initial_rows(federation):
    assert federation.models.shape == (federation.num_clients, federation.dim)
    assert torch.equal(federation.models[0], federation.models[-1])


def test_train_is_deterministic_and_does_not_touch_the_state(federation):
    before = federation.models.clone()
    a = federation.train(1, round=3, start=federation.initial)
    b = federation.train(1, round=3, start=federation.initial)
    c = federation.train(1, round=4, start=federation.initial)
    assert torch.equal(a.vector, b.vector)
    assert not torch.equal(a.vector, c.vector)
    assert torch.equal(federation.models, before)


def test_evaluate_shared_vector_equals_evaluate_stacked_rows(federation):
    shared = federation.evaluate(federation.initial)
    stacked = federation.evaluate(federation.initial.repeat(federation.num_clients, 1))
    assert shared == stacked
    assert [m["num_samples"] for m in shared] == [10] * federation.num_clients


def test_evaluate_accuracy_matches_a_direct_computation(federation):
    trained = federation.train(0, 1, federation.initial).vector
    metrics = federation.evaluate(trained)
    x, y = federation.client_data(2, "test")
    federation.flat.load(trained)
    federation.flat.module.eval()
    with torch.no_grad():
        direct = (federation.flat.module(x).argmax(1) == y).float().mean().item() * 100
    assert metrics[2]["accuracy"] == pytest.approx(direct)


def test_mismatched_index_lists_are_rejected():
    with pytest.raises(ValueError, match="one of each per client"):
        Federation(torch.zeros(4, 1), torch.zeros(4, dtype=torch.long), [torch.arange(2)], [],
                   build_model("mclr", (1,), 2), ClassificationTask(), TrainConfig())


def test_reused_optimizer_carries_no_momentum_from_one_client_to_the_next():
    config = TrainConfig(batch_size=8, lr=0.05, momentum=0.9)
    busy, fresh = make_federation(), make_federation()
    busy.train(0, 1, busy.initial, config=config)
    after_other_client = busy.train(1, 1, busy.initial, config=config).vector
    assert torch.equal(after_other_client, fresh.train(1, 1, fresh.initial, config=config).vector)


def test_client_metrics_equal_that_clients_entry_of_evaluate(federation):
    trained = federation.train(1, 1, federation.initial).vector
    for split in ("train", "test"):
        everyone = federation.evaluate(trained, split=split)
        for client in range(federation.num_clients):
            assert federation.client_metrics(client, trained, split) == everyone[client]
