"""``test_split="matched"``: each client's test set drawn from the official test split with the label mix of
its training data (the SFL authors' ``split_equal_noniid``), and stored keys of existing configs unchanged."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gflkit.data import SampleDataset
from gflkit.data.partition import largest_remainder, matched_test_split
from gflkit.experiment import RunConfig, client_split, matched_test_size
from gflkit.options import added_fields
from gflkit.results import config_key

# A tiny dataset with an official test split: 40 training samples (labels 0..3, 10 each, in blocks) and
# 20 official test samples (label l at test positions with l = position % 4, 5 each).
TRAIN_Y = torch.arange(4).repeat_interleave(10)
TEST_Y = torch.arange(20) % 4
Y = torch.cat([TRAIN_Y, TEST_Y])
IS_TEST = torch.cat([torch.zeros(40, dtype=torch.bool), torch.ones(20, dtype=torch.bool)])
DATA = SampleDataset("tiny", torch.randn(60, 1, 2, 2), Y, 4, IS_TEST)
NO_TEST_SPLIT = SampleDataset("tiny", DATA.x, Y, 4, torch.zeros(60, dtype=torch.bool))
# The dataset name only has to be registered: client_split gets the data it splits.
MATCHED = dict(dataset="mnist", num_clients=4, partition="shards", partition_options={"shards_per_client": 2},
               pool="train", test_ratio=None, test_split="matched")


def label_mix(indices: torch.Tensor) -> dict[int, int]:
    labels, counts = Y[indices].unique(return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist()))


def test_largest_remainder_is_proportional_and_sums_exactly():
    assert largest_remainder(np.array([3, 1]), 4).tolist() == [3, 1]
    assert largest_remainder(np.array([4, 2]), 4).tolist() == [3, 1]  # 2.67, 1.33 -> 2, 1 + one unit to 0.67
    assert largest_remainder(np.array([5, 3, 2]), 7).tolist() == [4, 2, 1]  # 3.5, 2.1, 1.4
    assert largest_remainder(np.array([1, 1, 1]), 2).tolist() == [1, 1, 0]  # ties: lower index first
    assert largest_remainder(np.array([1199, 1]), 100).tolist() == [100, 0]
    rng = np.random.default_rng(0)
    for _ in range(50):
        weights, total = rng.integers(0, 30, size=rng.integers(1, 8)) + 1, int(rng.integers(0, 200))
        counts = largest_remainder(weights, total)
        assert counts.sum() == total
        assert np.all(np.abs(counts - total * weights / weights.sum()) < 1)
    with pytest.raises(ValueError, match="not all 0"):
        largest_remainder(np.array([0, 0]), 3)


def test_hand_checked_tiny_case():
    # client 0 trains on labels 0, 0, 0, 1 (3 : 1); client 1 on labels 1, 1, 1, 1, 2, 2 (4 : 2)
    parts = [torch.tensor([0, 1, 2, 10]), torch.tensor([11, 12, 13, 14, 20, 21])]
    # official test pool: label 0 at 40, 44, 48, 52; label 1 at 41, 45 only; label 2 at 42, 46, 50
    pool = torch.tensor([40, 44, 48, 52, 41, 45, 42, 46, 50])
    split = matched_test_split(Y, parts, pool, 4, seed=3)
    assert [p.tolist() for p in split.train] == [p.tolist() for p in parts]
    # client 0: 4 * (3/4, 1/4) = 3, 1
    assert label_mix(split.test[0]) == {0: 3, 1: 1}
    assert len(split.test[0].unique()) == 4, "without replacement within a client"
    # client 1: 4 * (4/6, 2/6) = 2.67, 1.33 -> 2, 1, and the remaining unit to label 1 (remainder 0.67)
    assert label_mix(split.test[1]) == {1: 3, 2: 1}
    # label 1 has only 2 test samples for 3 draws: both, and one of them twice (the only repetition)
    ones = split.test[1][Y[split.test[1]] == 1].tolist()
    assert set(ones) == {41, 45} and len(ones) == 3
    assert set(split.test[0].tolist() + split.test[1].tolist()) <= set(pool.tolist())
    assert all(torch.equal(t, t.sort().values) for t in split.test)


def test_client_split_draws_matched_test_sets_from_the_official_test_split():
    config = RunConfig(**MATCHED)
    split = client_split(DATA, config)
    size = matched_test_size(DATA, config)
    assert size == 5  # round(20 official test samples / 4 clients)
    for train, test in zip(split.train, split.test):
        assert not IS_TEST[train].any(), "training samples come from the training split"
        assert IS_TEST[test].all(), "test samples come from the official test split"
        assert len(test) == size
        mix, trained = label_mix(test), label_mix(train)
        assert set(mix) <= set(trained)
        labels = sorted(trained)
        expected = largest_remainder(np.array([trained[l] for l in labels]), size)
        assert [mix.get(l, 0) for l in labels] == expected.tolist()
        assert len(test.unique()) == len(test), "each label has enough test samples: no repetition"
    # the clients' training samples are the whole training pool (nothing is split off for testing)
    assert sorted(torch.cat(split.train).tolist()) == list(range(40))


def test_test_per_client_sets_the_size():
    config = RunConfig(**{**MATCHED, "partition_options": {"shards_per_client": 2, "test_per_client": 7}})
    split = client_split(DATA, config)
    assert [len(t) for t in split.test] == [7] * 4
    for train, test in zip(split.train, split.test):
        assert set(label_mix(test)) <= set(label_mix(train))


def test_the_draw_is_seeded():
    config = RunConfig(**MATCHED)
    first, again = client_split(DATA, config), client_split(DATA, config)
    assert all(torch.equal(a, b) for a, b in zip(first.test, again.test))
    # the same partition with another test draw: the split stream is derived from the seed
    other = matched_test_split(Y, first.train, torch.arange(40, 60), 5, seed=12345)
    assert any(not torch.equal(a, b) for a, b in zip(first.test, other.test))
    reseeded = client_split(DATA, config.replace(seed=1))
    assert any(not torch.equal(a, b) for a, b in zip(first.test, reseeded.test))


def test_clients_draw_independently_so_test_sets_may_overlap():
    # every client trains on all four labels: 8 test samples each from 20, so some are shared
    parts = [torch.tensor([k, 10 + k, 20 + k, 30 + k]) for k in range(6)]
    split = matched_test_split(Y, parts, torch.arange(40, 60), 8, seed=0)
    drawn = torch.cat(split.test)
    assert len(drawn.unique()) < len(drawn)
    assert all(len(t.unique()) == len(t) for t in split.test)


def test_a_dataset_without_an_official_test_split_is_rejected():
    with pytest.raises(ValueError, match="official test split"):
        client_split(NO_TEST_SPLIT, RunConfig(**MATCHED))


@pytest.mark.parametrize("change, message", [
    ({"pool": "all"}, 'set pool="train"'),
    ({"test_ratio": 0.2}, "set test_ratio=None"),
    ({"test_split": "official"}, "unknown test_split 'official'"),
    ({"partition_options": {"shards_per_client": 2, "test_per_client": 0}}, "positive integer"),
    ({"test_split": "client", "partition_options": {"shards_per_client": 2, "test_per_client": 5}},
     'for test_split="matched"'),
    ({"dataset": "cora", "partition": "louvain", "partition_options": {}, "task": "link_prediction",
      "model": "vgae"}, "for sample datasets"),
])
def test_bad_matched_configs_are_rejected(change, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**{**MATCHED, **change})


def test_a_client_label_missing_from_the_test_split_is_rejected():
    with pytest.raises(ValueError, match="label 3"):
        matched_test_split(Y, [torch.tensor([30, 31])], torch.tensor([40, 41, 42]), 2, seed=0)


def test_existing_configs_keep_their_stored_keys():
    plain = RunConfig(dataset="digits")
    assert dataclasses.asdict(plain)["test_split"] == "client"
    # the fields stored keys had before (every field but the later-added ones at their defaults)
    earlier = {name: value for name, value in dataclasses.asdict(plain).items() if name not in added_fields(RunConfig)}
    assert "test_split" not in plain.to_dict()
    assert plain.to_dict() == earlier, "the default test_split is left out of the stored configuration"
    assert config_key(RunConfig(dataset="digits", test_split="client").to_dict()) == config_key(plain.to_dict())
    matched = RunConfig(**MATCHED)
    assert matched.to_dict()["test_split"] == "matched"
    assert config_key(matched.to_dict()) != config_key(matched.replace(test_split="client", test_ratio=0.2).to_dict())


@pytest.mark.integration
def test_real_mnist_shard_clients_are_tested_on_their_own_labels(real_data_root):
    from gflkit.data import load_dataset

    data = load_dataset("mnist", root=real_data_root)
    config = RunConfig(dataset="mnist", num_clients=100, partition="shards", partition_options={"shards_per_client": 2},
                       pool="train", test_ratio=None, test_split="matched")
    split = client_split(data, config)
    assert matched_test_size(data, config) == 100  # the authors' 2 * int(10000 / (2 * 100))
    for train, test in zip(split.train, split.test):
        assert len(test) == 100 and data.is_test[test].all() and not data.is_test[train].any()
        assert set(data.y[test].tolist()) == set(data.y[train].tolist())
