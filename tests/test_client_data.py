"""The clients' data a federation holds (gflkit.client_data): sample clients, graph clients and a server's none."""
from __future__ import annotations

import pytest
import torch

from gflkit.client_data import ClientData, NoClientData, SampleClients
from gflkit.seeding import generator

from conftest import make_federation


def sample_clients() -> SampleClients:
    x, y = torch.arange(20.0).reshape(10, 2), torch.arange(10) % 3
    return SampleClients(x, y, [torch.tensor([0, 1, 2]), torch.tensor([5, 6])],
                         [torch.tensor([3, 4]), torch.tensor([7, 8, 9])], eval_batch_size=2)


def test_sample_clients_hand_out_their_splits_in_batches():
    data = sample_clients()
    assert data.num_clients == 2 and data.num_train == [3, 2] and data.num_test == [2, 3]
    x, y = data.client_data(1, "test")
    assert x[:, 0].tolist() == [14.0, 16.0, 18.0] and y.tolist() == [1, 2, 0]
    assert [len(batch.targets) for batch in data.batches(1, "test")] == [2, 1], "evaluation: in order, eval batches"
    shuffled = [int(i) for batch in data.batches(0, "train", generator(0, 1, 0, 0), 2) for i in batch.targets]
    assert sorted(shuffled) == [0, 1, 2]
    assert data.train_label_counts().tolist() == [[1, 1, 1], [1, 0, 1]]  # labels 0 1 2; 2 0
    with pytest.raises(ValueError, match="unknown split 'val'; sample clients have the splits"):
        data.client_data(0, "val")


def test_keep_only_leaves_one_clients_samples_under_the_same_counts():
    data = sample_clients()
    data.keep_only(1)
    assert data.holds(1) and not data.holds(0) and data.own_client == 1
    assert data.x[:, 0].tolist() == [10.0, 12.0, 14.0, 16.0, 18.0] and data.num_train == [3, 2]
    assert [len(i) for i in data.train_indices] == [0, 2] and data.client_data(1, "test")[0][:, 0].tolist() == [
        14.0, 16.0, 18.0]


def test_a_server_holds_counts_and_refuses_any_sample():
    server = NoClientData([3, 2], [2, 3])
    assert not server.holds(0) and server.num_clients == 2
    with pytest.raises(RuntimeError, match="the server holds no client data \\(asked for client 1's 'train' split\\)"):
        server.client_data(1)
    with pytest.raises(ValueError, match="its clients reported none"):
        server.train_label_counts()
    counts = torch.tensor([[1, 2], [0, 2]])
    assert torch.equal(NoClientData([3, 2], [2, 3], counts).train_label_counts(), counts)


def test_counts_must_come_one_of_each_per_client():
    with pytest.raises(ValueError, match="got 2 train and 1 test counts"):
        ClientData([1, 2], [1])
    with pytest.raises(ValueError, match="at least one client"):
        ClientData([], [])
    with pytest.raises(ValueError, match="got 2 train and 1 test index sets"):
        SampleClients(torch.zeros(3, 1), torch.zeros(3), [torch.tensor([0]), torch.tensor([1])], [torch.tensor([2])])


def test_the_federation_reads_and_trains_on_its_data():
    fed = make_federation(num_clients=3)
    assert isinstance(fed.data, SampleClients) and fed.num_train.tolist() == fed.data.num_train
    inputs, targets = fed.client_data(2, "test")
    test = fed.data.test_indices[2]
    assert torch.equal(inputs, fed.data.x[test]) and torch.equal(targets, fed.data.y[test])
    assert fed.holds_data(2) and fed.data.evaluation_splits == ("test",) and fed.data.batchable
