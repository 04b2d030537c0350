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


def test_keep_only_leaves_one_clients_samples_and_the_same_client_step():
    full, kept = make_federation(), make_federation()
    kept.keep_only(2)
    assert len(kept.data.x) == len(full.data.train_indices[2]) + len(full.data.test_indices[2])
    assert [len(i) for i in kept.data.train_indices] == [0, 0, len(full.data.train_indices[2]), 0]
    assert kept.holds_data(2) and not kept.holds_data(0) and full.holds_data(0)
    torch.testing.assert_close(kept.train(2, round=1, start=kept.initial).vector,
                               full.train(2, round=1, start=full.initial).vector, rtol=0, atol=0)
    assert kept.client_metrics(2, kept.initial, "test") == full.client_metrics(2, full.initial, "test")


def test_server_federation_holds_counts_and_state_but_no_samples():
    from gflkit.federation import ServerFederation

    full = make_federation()
    server = ServerFederation(full.num_train.tolist(), full.num_test.tolist(), build_model("mclr", (2, 4, 4), 3),
                              full.train_config, label_counts=full.train_label_counts())
    assert server.models.shape == full.models.shape and server.num_train.tolist() == full.num_train.tolist()
    assert torch.equal(server.train_label_counts(), full.train_label_counts()) and not server.holds_data(0)
    with pytest.raises(RuntimeError, match="the server holds no client data"):
        server.client_metrics(0, server.initial, "train")
    with pytest.raises(ValueError, match="reported none"):
        ServerFederation([3], [1], build_model("mclr", (2, 4, 4), 3), full.train_config).train_label_counts()
