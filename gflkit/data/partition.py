r"""Client partitioners and per-client train / test splits.

Every partitioner returns index sets only: a list with one sorted ``torch.long`` tensor of sample
indices per client, pairwise disjoint (except :func:`overlapping_shards`, the FedSKA authors'
allocation, whose clients share samples by design). The same code therefore serves every dataset (a dataset is one
pooled tensor; a client is an index set into it). All randomness comes from
``numpy.random.default_rng(seed)``, so the same arguments always give the same partition.

Schemes:

* :func:`iid` — a uniformly random split into equal sizes.
* :func:`label_shards` — McMahan et al. (2017), as used by FedSKA and SFL: sort by label, cut into
  :math:`K q` equal shards, give every client :math:`q` random shards.
* :func:`overlapping_shards` — the FedSKA / SFL authors' ``allocation_shards``: the same label
  allocation as :func:`label_shards`, but each client draws its samples of a label from that label's
  whole pool, independently of the other clients, so clients overlap.
* :func:`dirichlet` — Hsu et al. (2019), as implemented by NIID-Bench and used by pFedGraph / JGESR:
  per class, client proportions :math:`p \sim \mathrm{Dir}(\alpha \mathbf 1_K)`.
* :func:`natural` — one client per natural group (LEAF writer, Shakespeare speaking role).

A partition is turned into clients' train and test sets by :func:`train_test_split` (a random
fraction per client), :func:`split_by_marker` (the source's own train / test marker) or
:func:`matched_test_split` (the SFL authors' protocol: the clients' samples all train, and each
client's test set is drawn from the official test split with the label mix of its training data).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from gflkit.options import keyword_defaults

SCHEMES = ("iid", "shards", "shards_overlapping", "dirichlet", "natural")


@dataclass
class ClientSplit:
    """Per-client train and test index sets (``train[k]`` and ``test[k]`` belong to client ``k``).

    ``held_out[k]`` marks a client that never trains (an unseen test client, :func:`hold_out_clients`);
    all False by default.
    """

    train: list[Tensor]
    test: list[Tensor]
    held_out: Tensor | None = None

    def __post_init__(self) -> None:
        if len(self.train) != len(self.test):
            raise ValueError(f"train and test must list the same clients, got {len(self.train)} and {len(self.test)}")
        if self.held_out is None:
            self.held_out = torch.zeros(len(self.train), dtype=torch.bool)
        if self.held_out.dtype != torch.bool or tuple(self.held_out.shape) != (len(self.train),):
            raise ValueError(f"held_out must be a boolean tensor with one entry per client ({len(self.train)}), "
                             f"got dtype {self.held_out.dtype} and shape {tuple(self.held_out.shape)}")

    @property
    def num_clients(self) -> int:
        """The number of clients K."""
        return len(self.train)

    def sizes(self) -> Tensor:
        """The clients' numbers of training samples, a ``(K,)`` long tensor."""
        return torch.tensor([len(t) for t in self.train], dtype=torch.long)


def _to_index(indices: np.ndarray) -> Tensor:
    """Sorted indices as a ``torch.long`` tensor."""
    return torch.as_tensor(np.sort(indices), dtype=torch.long)


def _labels_array(labels: Tensor, name: str = "labels") -> np.ndarray:
    """A 1-D tensor of per-sample ids as a numpy array."""
    if labels.dim() != 1:
        raise ValueError(f"{name} must be a 1-D tensor of per-sample ids, got shape {tuple(labels.shape)}")
    return labels.detach().cpu().numpy()


def _check_num_clients(num_clients: int, num_samples: int) -> None:
    if not 1 <= num_clients <= num_samples:
        raise ValueError(f"num_clients must lie in [1, {num_samples}] (the number of samples), got {num_clients}")


def iid(num_samples: int, num_clients: int, seed: int) -> list[Tensor]:
    r"""A uniformly random split of ``range(num_samples)`` into ``num_clients`` parts.

    A random permutation is cut into :math:`K` consecutive pieces whose sizes differ by at most one
    (the first :math:`N \bmod K` clients get :math:`\lceil N/K \rceil` samples).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    _check_num_clients(num_clients, num_samples)
    perm = np.random.default_rng(seed).permutation(num_samples)
    return [_to_index(part) for part in np.array_split(perm, num_clients)]


def label_shards(labels: Tensor, num_clients: int, shards_per_client: int, seed: int) -> list[Tensor]:
    r"""Label shards (McMahan et al., 2017; FedSKA; SFL): every client gets ``q`` shards of sorted labels.

    With :math:`N` samples, :math:`K` clients and :math:`q` shards per client, the shard size is
    :math:`s = \lfloor N / (K q) \rfloor`. The samples are shuffled, the last :math:`N - K q s`
    of the shuffle are **dropped** (a uniformly random set of at most :math:`K q - 1` samples), the
    rest is sorted by label (stably, so ties keep the shuffled order), cut into :math:`K q` consecutive
    shards of size :math:`s`, and a random permutation of the shards gives client :math:`k` the shards
    :math:`kq, \dots, kq + q - 1` of it. A shard spans at most two labels, so a client sees at most
    :math:`2q` labels, and exactly one label per shard when :math:`s` divides every class size.
    """
    y = _labels_array(labels)
    shards, owners = _shards(y, num_clients, shards_per_client, np.random.default_rng(seed))
    return [_to_index(shards[row].reshape(-1)) for row in owners]


def _shards(y: np.ndarray, num_clients: int, shards_per_client: int,
            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`label_shards`' draw: the ``(K q) × s`` shards of label-sorted sample ids and the
    ``K × q`` shard ids each client receives."""
    _check_num_clients(num_clients, len(y))
    if shards_per_client < 1 or num_clients * shards_per_client > len(y):
        raise ValueError(
            f"shards_per_client must lie in [1, {len(y) // num_clients}] so that num_clients * shards_per_client "
            f"<= {len(y)} samples, got {shards_per_client}"
        )
    num_shards = num_clients * shards_per_client
    shard_size = len(y) // num_shards
    kept = rng.permutation(len(y))[: num_shards * shard_size]
    ordered = kept[np.argsort(y[kept], kind="stable")]
    owners = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return ordered.reshape(num_shards, shard_size), owners


def overlapping_shards(labels: Tensor, num_clients: int, shards_per_client: int, seed: int) -> list[Tensor]:
    r"""The FedSKA authors' label-shard allocation (``allocation_shards`` in their ``split_utils.py``,
    shared with SFL's code): clients **overlap**.

    The labels are allocated as in :func:`label_shards` — :math:`K q` shards of size
    :math:`s = \lfloor N / (K q) \rfloor` over the label-sorted samples, :math:`q` random shards per
    client, a shard's label being that of its first sample — but a client does not receive the
    shards' samples: for each label :math:`l` it holds :math:`c_l` shards of, it draws
    :math:`c_l\,s` samples without replacement from *all* samples of label :math:`l`, independently of
    the other clients. Every client has :math:`q s` samples (as with disjoint shards), but two clients
    with a label in common share about :math:`c_l s / N_l` of it, so after each client's own
    train / test split, a client's test sample is often another client's training sample
    (:func:`overlap_fraction` measures it). Kept as a named option to measure how much of the paper's
    level this explains; :func:`label_shards` (disjoint) is the correct protocol.
    """
    y = _labels_array(labels)
    rng = np.random.default_rng(seed)
    shards, owners = _shards(y, num_clients, shards_per_client, rng)
    pools = {int(label): np.flatnonzero(y == label) for label in np.unique(y)}
    shard_labels = y[shards[:, 0]]
    parts = []
    for row in owners:
        chosen, counts = np.unique(shard_labels[row], return_counts=True)
        draws = []
        for label, count in zip(chosen.tolist(), counts.tolist()):
            pool = pools[label]
            if count * shards.shape[1] > len(pool):
                raise ValueError(f"a client needs {count * shards.shape[1]} samples of label {label}, which has only "
                                 f"{len(pool)}: use fewer clients or shards_per_client")
            draws.append(rng.choice(pool, count * shards.shape[1], replace=False))
        parts.append(_to_index(np.concatenate(draws)))
    return parts


def overlap_fraction(train: list[Tensor], test: list[Tensor]) -> float:
    """The share of all clients' test samples that are some *other* client's training sample (0 for
    disjoint partitions): what an overlapping allocation leaks from training into evaluation."""
    held = [set(part.tolist()) for part in train]
    trained_by = {}
    for client, samples in enumerate(held):
        for sample in samples:
            trained_by.setdefault(sample, set()).add(client)
    total = sum(len(part) for part in test)
    leaked = sum(1 for client, part in enumerate(test) for sample in part.tolist()
                 if trained_by.get(sample, set()) - {client})
    return leaked / total if total else 0.0


def _dirichlet_once(y: np.ndarray, num_clients: int, alpha: float, rng: np.random.Generator) -> list[np.ndarray]:
    """One draw of the NIID-Bench Dirichlet partition (see :func:`dirichlet`)."""
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    sizes = np.zeros(num_clients, dtype=np.int64)
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        p = rng.dirichlet(np.full(num_clients, alpha))
        capped = p * (sizes < len(y) / num_clients)
        p = capped / capped.sum() if capped.sum() > 0 else p / p.sum()
        cuts = (np.cumsum(p) * len(members)).astype(np.int64)[:-1]
        for k, piece in enumerate(np.split(members, cuts)):
            parts[k].append(piece)
            sizes[k] += len(piece)
    return [np.concatenate(pieces) for pieces in parts]


def dirichlet(
    labels: Tensor, num_clients: int, alpha: float, seed: int, min_size: int = 10, max_tries: int = 1000
) -> list[Tensor]:
    r"""Dirichlet label skew (Hsu et al., 2019) in the NIID-Bench form used by pFedGraph and JGESR.

    For every class :math:`c`, proportions :math:`p \sim \mathrm{Dir}(\alpha \mathbf 1_K)` are drawn;
    clients that already hold at least :math:`N / K` samples get proportion 0 (renormalised), and the
    class's shuffled samples are cut at :math:`\lfloor N_c \sum_{j \le k} p_j \rfloor`. Small
    :math:`\alpha` gives few classes per client, large :math:`\alpha` approaches an IID split. The whole
    draw is repeated until every client holds at least ``min_size`` samples, at most ``max_tries``
    times. Every sample is assigned to exactly one client.

    Raises:
        ValueError: for invalid parameters, or when no draw within ``max_tries`` gives every client
            ``min_size`` samples (lower ``min_size`` or ``num_clients``, or raise ``alpha``).
    """
    y = _labels_array(labels)
    _check_num_clients(num_clients, len(y))
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0 (the Dirichlet concentration), got {alpha}")
    if not 0 <= min_size * num_clients <= len(y):
        raise ValueError(f"min_size must lie in [0, {len(y) // num_clients}] (N / num_clients), got {min_size}")
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    rng = np.random.default_rng(seed)
    for _ in range(max_tries):
        parts = _dirichlet_once(y, num_clients, alpha, rng)
        if min(len(p) for p in parts) >= min_size:
            return [_to_index(p) for p in parts]
    raise ValueError(
        f"no Dirichlet(alpha={alpha}) partition of {len(y)} samples into {num_clients} clients gave every client "
        f"min_size={min_size} samples in max_tries={max_tries} draws; lower min_size or num_clients, or raise alpha"
    )


def natural(groups: Tensor) -> list[Tensor]:
    """One client per distinct group id (LEAF writer, speaking role), ordered by increasing group id.

    ``groups[i]`` is the group of sample ``i``; client ``k`` holds the samples of the ``k``-th smallest id.
    """
    g = _labels_array(groups, "groups")
    if len(g) == 0:
        raise ValueError("groups must hold at least one sample, got an empty tensor")
    ids, inverse = np.unique(g, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    return [_to_index(part) for part in np.split(order, np.cumsum(np.bincount(inverse))[:-1])]


def label_counts(labels: Tensor, parts: list[Tensor], num_classes: int) -> Tensor:
    """The ``(K, C)`` matrix of per-client label counts: entry ``(k, c) = |{i in parts[k] : labels[i] = c}|``."""
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    labels = labels.cpu()
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < num_classes:
        raise ValueError(f"labels must lie in [0, {num_classes - 1}] (num_classes={num_classes})")
    counts = [torch.bincount(labels[part.cpu()].long(), minlength=num_classes) for part in parts]
    return torch.stack(counts) if counts else torch.zeros(0, num_classes, dtype=torch.long)


def _num_test(size: int, test_ratio: float) -> int:
    """Test size of a client of ``size`` samples: ⌈ρ n⌉ clamped to [1, n-1] (0 for n < 2)."""
    if size < 2:
        return 0
    return min(max(math.ceil(test_ratio * size - 1e-9), 1), size - 1)


def train_test_split(parts: list[Tensor], test_ratio: float, seed: int) -> ClientSplit:
    r"""A random train / test split of every client's samples.

    Client :math:`k` with :math:`n_k \ge 2` samples puts
    :math:`\min(\max(\lceil \rho\, n_k \rceil, 1), n_k - 1)` random samples into its test set (the
    rounding of scikit-learn's ``train_test_split``), so it has at least one train and one test
    sample; a client with one sample keeps it for training. One generator, seeded by ``seed``,
    serves the clients in order.
    """
    if not 0 < test_ratio < 1:
        raise ValueError(f"test_ratio must lie in (0, 1), got {test_ratio}")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for part in parts:
        indices = part.cpu().numpy()
        shuffled = indices[rng.permutation(len(indices))]
        n_test = _num_test(len(indices), test_ratio)
        test.append(_to_index(shuffled[:n_test]))
        train.append(_to_index(shuffled[n_test:]))
    return ClientSplit(train, test)


def split_by_marker(parts: list[Tensor], is_test: Tensor) -> ClientSplit:
    """Split every client's samples by the source's own marker: sample ``i`` is a test sample iff ``is_test[i]``.

    This keeps LEAF's per-user train / test files. ``is_test`` is a boolean tensor over the whole
    dataset (the space the indices in ``parts`` refer to).
    """
    if is_test.dim() != 1 or is_test.dtype != torch.bool:
        raise ValueError(
            f"is_test must be a 1-D boolean tensor, got dtype {is_test.dtype} and shape {tuple(is_test.shape)}"
        )
    marker = is_test.cpu()
    train = [part[~marker[part]].sort().values for part in parts]
    test = [part[marker[part]].sort().values for part in parts]
    return ClientSplit(train, test)


def largest_remainder(weights: np.ndarray, total: int) -> np.ndarray:
    r"""Integer counts proportional to non-negative ``weights`` that sum to exactly ``total``.

    Each entry gets :math:`\lfloor t\,w_i / \sum w \rfloor`; the remaining units go one each to the
    largest fractional parts (ties to the lower index). Used to apportion a client's test samples
    among its labels (:func:`matched_test_split`).
    """
    weights = np.asarray(weights, dtype=np.int64)
    if weights.ndim != 1 or len(weights) == 0 or weights.min() < 0 or weights.sum() == 0:
        raise ValueError(f"weights must be a non-empty 1-D array of non-negative counts, not all 0; got {weights}")
    if total < 0:
        raise ValueError(f"total must be >= 0, got {total}")
    exact = total * weights  # quotas times sum(weights): integer arithmetic, so ties are exact
    counts = exact // weights.sum()
    remainders = exact - counts * weights.sum()
    order = np.lexsort((np.arange(len(weights)), -remainders))  # largest remainder first, then lower index
    counts[order[: total - int(counts.sum())]] += 1
    return counts


def matched_test_split(labels: Tensor, parts: list[Tensor], test_pool: Tensor, size: int, seed: int) -> ClientSplit:
    r"""Every client trains on all of ``parts[k]`` and is tested on ``size`` samples of ``test_pool`` with
    the label mix of its training data (the SFL authors' ``split_equal_noniid``, ``data_util.py``).

    Client :math:`k` with training label counts :math:`c_k(l)` gets, for each of its labels :math:`l`,
    :math:`m_l` test samples of label :math:`l`, :math:`m_l \propto c_k(l)` with
    :math:`\sum_l m_l =` ``size`` (:func:`largest_remainder`, so a label with a tiny training share
    may get none; no label outside the client's training labels is ever drawn). The :math:`m_l` are
    drawn from the samples of ``test_pool`` with label :math:`l` **without replacement**; only when the
    pool holds fewer (:math:`n_l < m_l`) do samples repeat, each :math:`\lfloor m_l/n_l \rfloor` or
    :math:`\lceil m_l/n_l \rceil` times. Clients draw **independently**: two clients with a label in
    common may share test samples (as in the authors' code); no test sample is any client's training
    sample as long as ``test_pool`` and the parts are disjoint (the official test vs training split).
    One generator, seeded by ``seed``, serves the clients in order and, within a client, its labels in
    increasing order. Test index sets are sorted and may repeat an index only in the case above.

    Args:
        labels: ``(N,)`` class ids of the whole dataset (the space of all indices).
        parts: each client's training indices.
        test_pool: the indices test samples are drawn from (e.g. the official test split).
        size: test samples per client, ``>= 1``.
        seed: seeds the draw.

    Raises:
        ValueError: ``size < 1``, labels not 1-D class ids, a client without training samples, or a
            client label that needs test samples but has none in ``test_pool``.
    """
    y = _labels_array(labels)
    if size < 1:
        raise ValueError(f"the number of test samples per client must be >= 1, got {size}")
    pool = test_pool.cpu().numpy()
    by_label = {int(label): pool[y[pool] == label] for label in np.unique(y[pool])}
    rng = np.random.default_rng(seed)
    test = []
    for k, part in enumerate(parts):
        own = y[part.cpu().numpy()]
        if len(own) == 0:
            raise ValueError(f"client {k} has no training samples whose labels its test set could match")
        present, counts = np.unique(own, return_counts=True)
        draws = []
        for label, quota in zip(present.tolist(), largest_remainder(counts, size).tolist()):
            if quota == 0:
                continue
            candidates = by_label.get(label, pool[:0])
            if len(candidates) == 0:
                raise ValueError(f"client {k} needs {quota} test samples of label {label}, which the test split "
                                 f"does not hold")
            repeats, rest = divmod(quota, len(candidates))
            draws += [candidates] * repeats + [rng.choice(candidates, rest, replace=False)]
        test.append(_to_index(np.concatenate(draws)))
    return ClientSplit([part.sort().values for part in parts], test)


def num_held_out(num_clients: int, fraction: float) -> int:
    """How many of ``num_clients`` clients a hold-out ``fraction`` keeps for testing: round(f·K), at least
    one and at most K − 1 when ``fraction > 0`` (so that someone trains and someone is tested)."""
    if not 0 <= fraction < 1:
        raise ValueError(f"the held-out fraction of clients must lie in [0, 1), got {fraction}")
    if fraction == 0:
        return 0
    if num_clients < 2:
        raise ValueError(f"holding out clients needs at least 2 clients, got {num_clients}")
    return min(max(round(fraction * num_clients), 1), num_clients - 1)


def hold_out_clients(split: ClientSplit, fraction: float, seed: int) -> ClientSplit:
    """Make a random ``fraction`` of the clients unseen test clients (LEAF's and FedCG's protocol).

    A held-out client never trains: its train set becomes empty and its test set holds all its samples
    (train and test together), so that a global model is scored on clients it never saw. The clients are
    drawn uniformly by a generator seeded with ``seed``; :func:`num_held_out` says how many.
    """
    count = num_held_out(split.num_clients, fraction)
    chosen = np.random.default_rng(seed).choice(split.num_clients, count, replace=False)
    held_out = torch.zeros(split.num_clients, dtype=torch.bool)
    held_out[torch.as_tensor(chosen, dtype=torch.long)] = True
    empty = torch.zeros(0, dtype=torch.long)
    train = [empty if held else part for part, held in zip(split.train, held_out.tolist())]
    test = [torch.cat([split.train[k], split.test[k]]).sort().values if held else split.test[k]
            for k, held in enumerate(held_out.tolist())]
    return ClientSplit(train, test, held_out)


def _option(options: dict[str, Any], name: str, scheme: str) -> Any:
    if name not in options:
        raise ValueError(f"partition scheme {scheme!r} needs the option {name!r}")
    return options.pop(name)


def partition(labels: Tensor, scheme: str, num_clients: int, seed: int, **options: Any) -> list[Tensor]:
    """Partition the samples with labels ``labels`` by ``scheme``; ``options`` go to the scheme.

    * ``"iid"``: :func:`iid` over ``len(labels)`` samples.
    * ``"shards"``: :func:`label_shards`, needs ``shards_per_client``.
    * ``"shards_overlapping"``: :func:`overlapping_shards` (the FedSKA authors'), needs ``shards_per_client``.
    * ``"dirichlet"``: :func:`dirichlet`, needs ``alpha`` (optional ``min_size``, ``max_tries``).
    * ``"natural"``: :func:`natural`, needs ``groups`` (one id per sample); ``num_clients`` and
      ``seed`` are ignored, the groups define the clients.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown partition scheme {scheme!r}; choose one of {list(SCHEMES)}")
    options = dict(options)
    if scheme == "iid":
        return iid(len(labels), num_clients, seed, **options)
    if scheme in ("shards", "shards_overlapping"):
        allocate = label_shards if scheme == "shards" else overlapping_shards
        return allocate(labels, num_clients, _option(options, "shards_per_client", scheme), seed, **options)
    if scheme == "dirichlet":
        return dirichlet(labels, num_clients, _option(options, "alpha", scheme), seed, **options)
    groups = _option(options, "groups", scheme)
    if len(groups) != len(labels):
        raise ValueError(f"groups must give one id per sample: {len(groups)} ids for {len(labels)} labels")
    return natural(groups, **options)


def scheme_defaults(scheme: str) -> dict[str, Any]:
    """The options of partition ``scheme`` that have a default, with their current defaults (``dirichlet``:
    ``min_size``, ``max_tries``): what shapes a partition although no option names it."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown partition scheme {scheme!r}; choose one of {list(SCHEMES)}")
    schemes = {"iid": iid, "shards": label_shards, "shards_overlapping": overlapping_shards, "dirichlet": dirichlet,
               "natural": natural}
    return keyword_defaults(schemes[scheme])


__all__ = [
    "ClientSplit",
    "SCHEMES",
    "dirichlet",
    "hold_out_clients",
    "iid",
    "label_counts",
    "label_shards",
    "largest_remainder",
    "matched_test_split",
    "natural",
    "num_held_out",
    "overlap_fraction",
    "overlapping_shards",
    "partition",
    "scheme_defaults",
    "split_by_marker",
    "train_test_split",
]
