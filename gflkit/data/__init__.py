"""gflkit's data layer: verified raw datasets → :class:`SampleDataset` tensors, and client partitions.

``load_dataset(name, root=None, download=True, **options)`` returns the pooled official train + test
samples of a registered dataset (``dataset_names()``) with an ``is_test`` marker and natural users.
Raw files live under ``<root>/<name>/raw/`` (root: argument, else ``$GFLKIT_DATA``, else the checkout's
``data/``), are verified against pinned sha256 values, and are converted once into a tensor cache
(``$GFLKIT_CACHE``, else the per-user cache ``~/.cache/gflkit``, else ``<root>/<folder>/processed``).
See :mod:`gflkit.data.registry` (what a dataset is) and the modules beside it, one per job:
:mod:`~gflkit.data.download`, :mod:`~gflkit.data.integrity`, :mod:`~gflkit.data.cache`,
:mod:`~gflkit.data.conversion`, :mod:`~gflkit.data.loading`.

Graph datasets (``cora``, ``citeseer``, ``pubmed``, ``cora_full``, ``polblogs``) load with
``load_graph(name, root=None)`` as one :class:`torch_geometric.data.Data`; :mod:`gflkit.data.subgraphs`
cuts a graph into subgraph clients (``metis`` / ``louvain``) with per-client node and link splits.

The names below are imported on first use (PEP 562), so ``import gflkit.data`` — and the ``gflkit``
command's help — does not pay for torch and torch_geometric. The partitioning function is
``gflkit.data.partition.partition`` (the package attribute ``partition`` is that module).
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, tuple[str, ...]] = {
    "gflkit.data.dataset": ("SampleDataset",),
    "gflkit.data.errors": ("ChecksumError", "DataError", "DatasetNotFoundError", "DownloadError", "UnknownDatasetError"),
    "gflkit.data.registry": ("DatasetSpec", "RawFile", "data_root", "dataset_names", "get_spec", "register", "registered"),
    "gflkit.data.cache": ("cache_dir", "clean_cache"),
    "gflkit.data.integrity": ("FileStatus", "dataset_available", "sha256_file", "verify_dataset"),
    "gflkit.data.download": ("fetch_dataset",),
    "gflkit.data.loading": ("load_dataset", "load_graph"),
    "gflkit.data.partition": (
        "SCHEMES", "ClientSplit", "dirichlet", "iid", "label_counts", "label_shards", "natural",
        "split_by_marker", "train_test_split",
    ),
    "gflkit.data.subgraphs": (
        "PARTITIONERS", "ClientGraph", "LinkSplit", "make_subgraph_clients", "partition_graph", "split_links",
        "split_nodes",
    ),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'gflkit.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
