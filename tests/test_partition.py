"""Partitioners: disjoint covering parts, determinism, heterogeneity, per-client splits, validation."""
from __future__ import annotations

import pytest
import torch

from gflkit.data.partition import (
    ClientSplit,
    dirichlet,
    iid,
    label_counts,
    label_shards,
    natural,
    overlap_fraction,
    overlapping_shards,
    partition,
    split_by_marker,
    train_test_split,
)

N, K, C = 600, 10, 10


def make_labels(n: int = N, num_classes: int = C, seed: int = 0) -> torch.Tensor:
    """Random labels in shuffled order (every class present)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(num_classes, (n,), generator=gen)


def assert_disjoint(parts: list[torch.Tensor]) -> torch.Tensor:
    """Parts are sorted long tensors, pairwise disjoint; returns their union."""
    for part in parts:
        assert part.dtype == torch.long
        assert torch.equal(part, part.sort().values)
    union = torch.cat(parts)
    assert len(union.unique()) == len(union), "parts overlap"
    return union.sort().values


def assert_same(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def classes_per_client(labels: torch.Tensor, parts: list[torch.Tensor]) -> torch.Tensor:
    return (label_counts(labels, parts, int(labels.max()) + 1) > 0).sum(dim=1)


# The partitioners as functions of a seed, with what their union must cover.
LABELS = make_labels()
GROUPS = torch.randint(7, (N,), generator=torch.Generator().manual_seed(5)) * 3  # ids 0, 3, ..., 18
PARTITIONERS = {
    "iid": lambda seed: iid(N, K, seed),
    "shards": lambda seed: label_shards(LABELS, K, 2, seed),
    "dirichlet": lambda seed: dirichlet(LABELS, K, 0.5, seed),
}


# ---- every partitioner -------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_parts_are_disjoint_and_cover(name: str) -> None:
    parts = PARTITIONERS[name](0)
    assert len(parts) == K
    union = assert_disjoint(parts)
    if name == "shards":  # all but the dropped remainder N mod (K q)
        shard_size = N // (K * 2)
        assert len(union) == K * 2 * shard_size and N - len(union) < K * 2
        assert all(len(p) == 2 * shard_size for p in parts)
    else:
        assert torch.equal(union, torch.arange(N))


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_deterministic_for_a_seed(name: str) -> None:
    assert_same(PARTITIONERS[name](3), PARTITIONERS[name](3))
    other = PARTITIONERS[name](4)
    assert any(not torch.equal(a, b) for a, b in zip(PARTITIONERS[name](3), other))


@pytest.mark.parametrize("name", sorted(PARTITIONERS))
def test_train_test_split_of_every_partitioner(name: str) -> None:
    parts = PARTITIONERS[name](0)
    split = train_test_split(parts, 0.2, seed=1)
    assert split.num_clients == K
    for part, train, test in zip(parts, split.train, split.test):
        assert len(set(train.tolist()) & set(test.tolist())) == 0
        assert torch.equal(torch.cat([train, test]).sort().values, part)
        assert len(train) >= 1 and len(test) >= 1
    assert torch.equal(split.sizes(), torch.tensor([len(t) for t in split.train]))


# ---- iid -----------------------------------------------------------------------------------------


def test_iid_sizes_differ_by_at_most_one() -> None:
    parts = iid(103, 10, seed=0)
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == 103
    assert torch.equal(assert_disjoint(parts), torch.arange(103))


def test_iid_single_client_and_one_sample_each() -> None:
    assert torch.equal(iid(5, 1, seed=0)[0], torch.arange(5))
    assert sorted(int(p) for p in iid(5, 5, seed=0)) == list(range(5))


# ---- label shards ----------------------------------------------------------------------------------


def test_shards_one_label_per_client_when_shard_size_divides_class_sizes() -> None:
    # 10 classes x 60 samples, sorted; K = 20, q = 1 -> shard size 30 divides 60.
    labels = torch.arange(C).repeat_interleave(60)
    parts = label_shards(labels, 20, 1, seed=0)
    assert torch.equal(assert_disjoint(parts), torch.arange(600))
    assert classes_per_client(labels, parts).tolist() == [1] * 20
    # every class is held by exactly two clients
    counts = label_counts(labels, parts, C)
    assert ((counts > 0).sum(dim=0) == 2).all()


def test_shards_at_most_two_labels_per_client_otherwise() -> None:
    # unequal classes (sorted): shard size does not divide them, so some shards straddle two labels
    labels = torch.cat([torch.full((n,), c) for c, n in enumerate([37, 81, 55, 62, 90, 44, 71, 66, 52, 42])])
    parts = label_shards(labels, 23, 1, seed=2)
    per_client = classes_per_client(labels, parts)
    assert per_client.max() <= 2 and (per_client == 2).any()
    assert len(assert_disjoint(parts)) == (len(labels) // 23) * 23


def test_shards_q_bounds_labels_per_client() -> None:
    parts = label_shards(LABELS, K, 3, seed=0)
    assert classes_per_client(LABELS, parts).max() <= 2 * 3


# ---- dirichlet -------------------------------------------------------------------------------------


def test_dirichlet_small_alpha_is_more_skewed() -> None:
    labels = make_labels(2000)
    skewed = classes_per_client(labels, dirichlet(labels, K, 0.05, seed=0, min_size=5)).float().mean()
    uniform = classes_per_client(labels, dirichlet(labels, K, 100.0, seed=0)).float().mean()
    assert uniform == C
    assert skewed < 0.5 * C


def test_dirichlet_respects_min_size() -> None:
    parts = dirichlet(LABELS, K, 0.1, seed=0, min_size=20)
    assert min(len(p) for p in parts) >= 20


def test_dirichlet_gives_up_with_a_clear_error() -> None:
    labels = torch.zeros(100, dtype=torch.long)  # one class: sizes ~ Dir(0.01), never all >= 10
    with pytest.raises(ValueError, match="min_size"):
        dirichlet(labels, 10, 0.01, seed=0, min_size=10, max_tries=5)


# ---- natural ---------------------------------------------------------------------------------------


def test_natural_one_client_per_group_in_id_order() -> None:
    parts = natural(GROUPS)
    ids = GROUPS.unique()
    assert len(parts) == len(ids)
    assert torch.equal(assert_disjoint(parts), torch.arange(N))
    for gid, part in zip(ids, parts):
        assert (GROUPS[part] == gid).all()
        assert len(part) == int((GROUPS == gid).sum())


def test_natural_split_and_dispatch() -> None:
    parts = partition(LABELS, "natural", 999, 0, groups=GROUPS)
    assert_same(parts, natural(GROUPS))
    split = train_test_split(parts, 0.3, seed=0)
    for part, train, test in zip(parts, split.train, split.test):
        assert torch.equal(torch.cat([train, test]).sort().values, part)
        assert len(set(train.tolist()) & set(test.tolist())) == 0


# ---- per-client splits -----------------------------------------------------------------------------


def test_train_test_split_sizes_and_small_clients() -> None:
    parts = [torch.arange(0, 10), torch.arange(10, 12), torch.arange(12, 13), torch.arange(0)]
    split = train_test_split(parts, 0.3, seed=0)
    assert [len(t) for t in split.test] == [3, 1, 0, 0]  # ceil(0.3 n), clamped to [1, n - 1]
    assert [len(t) for t in split.train] == [7, 1, 1, 0]
    assert split.sizes().tolist() == [7, 1, 1, 0]
    assert [len(t) for t in train_test_split(parts[:1], 0.99, seed=0).train] == [1]


def test_train_test_split_deterministic() -> None:
    parts = iid(N, K, seed=0)
    a, b, c = (train_test_split(parts, 0.2, seed=s) for s in (7, 7, 8))
    assert_same(a.train, b.train) and assert_same(a.test, b.test)
    assert any(not torch.equal(x, y) for x, y in zip(a.test, c.test))


def test_split_by_marker() -> None:
    is_test = torch.arange(N) % 4 == 0
    parts = iid(N, K, seed=0)
    split = split_by_marker(parts, is_test)
    assert isinstance(split, ClientSplit) and split.num_clients == K
    for part, train, test in zip(parts, split.train, split.test):
        assert is_test[test].all() and not is_test[train].any()
        assert torch.equal(torch.cat([train, test]).sort().values, part)
        assert torch.equal(train, train.sort().values) and torch.equal(test, test.sort().values)


def test_label_counts() -> None:
    labels = torch.tensor([0, 1, 1, 2, 2, 2])
    counts = label_counts(labels, [torch.tensor([0, 1]), torch.tensor([2, 3, 4, 5])], 4)
    assert counts.tolist() == [[1, 1, 0, 0], [0, 1, 3, 0]]


# ---- the dispatcher --------------------------------------------------------------------------------


# ---- the FedSKA authors' overlapping allocation ----------------------------------------------------

MNIST_LIKE = torch.arange(10).repeat_interleave(700)  # 7,000 samples, 700 per label, sorted


@pytest.mark.parametrize("q", [2, 5, 10])
def test_overlapping_shards_follow_the_label_allocation_but_draw_from_the_whole_pool(q: int) -> None:
    parts = overlapping_shards(MNIST_LIKE, 100, q, seed=3)
    disjoint = label_shards(MNIST_LIKE, 100, q, seed=3)
    assert [len(p) for p in parts] == [70] * 100, "q shards of 70 / q samples each, as with disjoint shards"
    assert all(len(p.unique()) == len(p) for p in parts), "no sample twice within a client"
    assert (classes_per_client(MNIST_LIKE, parts) <= q).all()
    # the labels a client holds are those of the same shards the disjoint allocation gives it
    assert torch.equal(label_counts(MNIST_LIKE, parts, 10), label_counts(MNIST_LIKE, disjoint, 10))
    union = torch.cat(parts)
    assert len(union.unique()) < len(union), "clients share samples"
    assert_same(parts, overlapping_shards(MNIST_LIKE, 100, q, seed=3))


def test_overlap_fraction_counts_test_samples_trained_on_by_another_client() -> None:
    train = [torch.tensor([0, 1, 2]), torch.tensor([3, 4]), torch.tensor([5])]
    test = [torch.tensor([3, 9]), torch.tensor([0, 8]), torch.tensor([5, 7])]  # 5 is client 2's own
    assert overlap_fraction(train, test) == pytest.approx(2 / 6)
    split = train_test_split(label_shards(MNIST_LIKE, 100, 2, 0), 0.2, 1)
    assert overlap_fraction(split.train, split.test) == 0.0
    leaky = train_test_split(overlapping_shards(MNIST_LIKE, 100, 2, 0), 0.2, 1)
    assert overlap_fraction(leaky.train, leaky.test) > 0.3


def test_partition_dispatches() -> None:
    assert_same(partition(LABELS, "iid", K, 1), iid(N, K, 1))
    assert_same(partition(LABELS, "shards", K, 1, shards_per_client=2), label_shards(LABELS, K, 2, 1))
    assert_same(partition(LABELS, "dirichlet", K, 1, alpha=0.3), dirichlet(LABELS, K, 0.3, 1))
    assert_same(partition(LABELS, "shards_overlapping", K, 1, shards_per_client=2), overlapping_shards(LABELS, K, 2, 1))


# ---- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: iid(10, 0, 0), "num_clients"),
        (lambda: iid(10, 11, 0), "num_clients"),
        (lambda: iid(0, 1, 0), "num_samples"),
        (lambda: label_shards(LABELS, 0, 2, 0), "num_clients"),
        (lambda: label_shards(LABELS, K, 0, 0), "shards_per_client"),
        (lambda: label_shards(LABELS, K, N // K + 1, 0), "shards_per_client"),
        (lambda: label_shards(LABELS.view(-1, 2), K, 1, 0), "labels"),
        (lambda: dirichlet(LABELS, K, 0.0, 0), "alpha"),
        (lambda: dirichlet(LABELS, K, -1.0, 0), "alpha"),
        (lambda: dirichlet(LABELS, N + 1, 1.0, 0), "num_clients"),
        (lambda: dirichlet(LABELS, K, 1.0, 0, min_size=N), "min_size"),
        (lambda: dirichlet(LABELS, K, 1.0, 0, max_tries=0), "max_tries"),
        (lambda: natural(torch.zeros(0, dtype=torch.long)), "groups"),
        (lambda: train_test_split([torch.arange(4)], 0.0, 0), "test_ratio"),
        (lambda: train_test_split([torch.arange(4)], 1.0, 0), "test_ratio"),
        (lambda: split_by_marker([torch.arange(4)], torch.zeros(4)), "is_test"),
        (lambda: label_counts(LABELS, [torch.arange(4)], 0), "num_classes"),
        (lambda: label_counts(LABELS, [torch.arange(4)], 3), "labels"),
        (lambda: partition(LABELS, "pathological", K, 0), "iid"),
        (lambda: partition(LABELS, "shards", K, 0), "shards_per_client"),
        (lambda: partition(LABELS, "shards_overlapping", K, 0), "shards_per_client"),
        (lambda: overlapping_shards(LABELS, K, 0, 0), "shards_per_client"),
        (lambda: overlapping_shards(torch.tensor([0] * 10 + [1] * 90), 2, 1, 0), "has only"),
        (lambda: partition(LABELS, "dirichlet", K, 0), "alpha"),
        (lambda: partition(LABELS, "natural", K, 0), "groups"),
        (lambda: partition(LABELS, "natural", K, 0, groups=GROUPS[:5]), "groups"),
    ],
)
def test_bad_parameters_raise(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def test_hold_out_clients_is_seeded_and_keeps_at_least_one_client_on_each_side():
    from gflkit.data.partition import ClientSplit, hold_out_clients, num_held_out

    split = ClientSplit([torch.arange(3 * k, 3 * k + 2) for k in range(5)], [torch.tensor([3 * k + 2]) for k in range(5)])
    first, again = hold_out_clients(split, 0.4, seed=1), hold_out_clients(split, 0.4, seed=1)
    assert torch.equal(first.held_out, again.held_out) and int(first.held_out.sum()) == 2
    assert [num_held_out(5, f) for f in (0.0, 0.01, 0.5, 0.99)] == [0, 1, 2, 4]
    for k in first.held_out.nonzero().flatten().tolist():
        assert len(first.train[k]) == 0 and first.test[k].tolist() == [3 * k, 3 * k + 1, 3 * k + 2]
    with pytest.raises(ValueError, match="at least 2 clients"):
        num_held_out(1, 0.5)
