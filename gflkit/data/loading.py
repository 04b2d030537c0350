"""The data layer's entry points: a registered dataset as tensors (:func:`load_dataset`) or as one graph
(:func:`load_graph`), from verified raw files (:mod:`gflkit.data.registry`) through the tensor cache."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gflkit.data.registry import data_root, spec_of_kind

if TYPE_CHECKING:  # torch is imported where tensors are read or written, so listing datasets stays light
    from torch_geometric.data import Data

    from gflkit.data.dataset import SampleDataset


# The :rtype: field names SampleDataset's full path for Sphinx: the annotation is imported only for type checking, so
# it reaches the API reference as written, and ``SampleDataset`` is ambiguous there (gflkit.data re-exports it).
def load_dataset(name: str, root: str | Path | None = None, download: bool = True, **options: Any) -> SampleDataset:
    """Load a registered dataset as a :class:`~gflkit.data.dataset.SampleDataset` (official train + test pooled,
    ``is_test`` marks test).

    Args:
        name: one of :func:`dataset_names` (``mnist``, ``cifar10``, ``cifar100``, ``femnist``,
            ``shakespeare``, ``digits``).
        root: data root holding ``<name>/raw/...``; default ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT`.
        download: download missing files when they have a URL and the network is reachable.
        ``**options``: loader options (e.g. ``source="leaf"`` and ``stride=...`` for ``shakespeare``).

    Raises:
        UnknownDatasetError: ``name`` is not registered (the message lists the known names).
        ValueError: ``name`` is a graph dataset (use :func:`load_graph`).
        DatasetNotFoundError: raw files are missing and could not be downloaded.
        ChecksumError: a raw file does not match its pinned sha256.
        TypeError: an option the loader does not know.

    :rtype: ~gflkit.data.dataset.SampleDataset
    """
    spec = spec_of_kind(name, "samples")
    assert spec.loader is not None
    return spec.loader(spec, data_root(root), download=download, **options)


def load_graph(name: str, root: str | Path | None = None, download: bool = True, normalize_features: bool = False,
               **options: Any) -> Data:
    """Load a registered graph dataset as one :class:`torch_geometric.data.Data`.

    The graph has ``x`` (``float32`` node features), ``edge_index`` (undirected: both directions of every
    edge, no self-loops, no duplicates, sorted), ``y`` (``int64`` labels), ``num_classes`` (int) and
    ``name``; datasets with an official split also carry ``train_mask`` / ``val_mask`` / ``test_mask``.
    Raw files and the cache work exactly as for :func:`load_dataset`.

    Args:
        name: a graph dataset (``cora``, ``citeseer``, ``pubmed``, ``cora_full``, ``polblogs``; see
            :func:`dataset_names` and :mod:`gflkit.data.loaders`).
        root: data root holding the raw files; default ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT`.
        download: download missing files when they have a URL and the network is reachable.
        normalize_features: divide every node's features by their sum (rows summing to 0 are left as
            they are), :class:`torch_geometric.transforms.NormalizeFeatures` as in PyG's Planetoid
            examples and FED-PUB's data pipeline; off by default (the raw features).
        ``**options``: loader options (e.g. ``largest_component=False`` for ``polblogs``).

    Raises:
        UnknownDatasetError: ``name`` is not registered.
        ValueError: ``name`` is a sample dataset (use :func:`load_dataset`), or ``normalize_features``
            is not a bool.
        DatasetNotFoundError, ChecksumError, TypeError: as for :func:`load_dataset`.
    """
    spec = spec_of_kind(name, "graph")
    assert spec.loader is not None
    if not isinstance(normalize_features, bool):
        raise ValueError(f"normalize_features must be True or False, got {normalize_features!r}")
    graph = spec.loader(spec, data_root(root), download=download, **options)
    if not normalize_features:
        return graph
    from torch_geometric.transforms import NormalizeFeatures
    return NormalizeFeatures()(graph.clone())
