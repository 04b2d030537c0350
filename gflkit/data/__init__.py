"""gflkit's data layer: verified raw datasets → :class:`SampleDataset` tensors, and client partitions.

``load_dataset(name, root=None, download=True, **options)`` returns the pooled official train + test
samples of a registered dataset (``dataset_names()``) with an ``is_test`` marker and natural users.
Raw files live under ``<root>/<name>/raw/`` (root: argument, else ``$GFLKIT_DATA``, else the checkout's ``data/``), are
verified against pinned sha256 values, and are converted once into a tensor cache (``$GFLKIT_CACHE``,
else ``<root>/<name>/processed``, else ``~/.cache/gflkit``). See :mod:`gflkit.data.registry`.

Graph datasets (``cora``, ``citeseer``, ``pubmed``, ``cora_full``, ``polblogs``) load with
``load_graph(name, root=None)`` as one :class:`torch_geometric.data.Data`; :mod:`gflkit.data.subgraphs`
cuts a graph into subgraph clients (``metis`` / ``louvain``) with per-client node and link splits.
"""
from gflkit.data.dataset import SampleDataset
from gflkit.data.registry import (
    ChecksumError,
    DataError,
    DatasetNotFoundError,
    DatasetSpec,
    DownloadError,
    FileStatus,
    RawFile,
    UnknownDatasetError,
    cache_dir,
    data_root,
    dataset_names,
    fetch_dataset,
    get_spec,
    load_dataset,
    load_graph,
    register,
    registered,
    sha256_file,
    verify_dataset,
)

from gflkit.data.partition import (
    SCHEMES,
    ClientSplit,
    dirichlet,
    iid,
    label_counts,
    label_shards,
    natural,
    partition,
    split_by_marker,
    train_test_split,
)
from gflkit.data.subgraphs import (
    PARTITIONERS,
    ClientGraph,
    LinkSplit,
    make_subgraph_clients,
    partition_graph,
    split_links,
    split_nodes,
)

__all__ = [
    "SCHEMES", "ClientSplit", "dirichlet", "iid", "label_counts", "label_shards", "natural", "partition",
    "split_by_marker", "train_test_split",
    "PARTITIONERS", "ClientGraph", "LinkSplit", "make_subgraph_clients", "partition_graph", "split_links",
    "split_nodes",
    "ChecksumError", "DataError", "DatasetNotFoundError", "DatasetSpec", "DownloadError", "FileStatus",
    "RawFile", "SampleDataset", "UnknownDatasetError", "cache_dir", "data_root", "dataset_names",
    "fetch_dataset", "get_spec", "load_dataset", "load_graph", "register", "registered", "sha256_file",
    "verify_dataset",
]

