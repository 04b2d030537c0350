"""gflkit's data layer: verified raw datasets → :class:`SampleDataset` tensors, and client partitions.

``load_dataset(name, root=None, download=True, **options)`` returns the pooled official train + test
samples of a registered dataset (``dataset_names()``) with an ``is_test`` marker and natural users.
Raw files live under ``<root>/<name>/raw/`` (root: argument, else ``$GFLKIT_DATA``, else ``./data``), are
verified against pinned sha256 values, and are converted once into a tensor cache (``$GFLKIT_CACHE``,
else ``<root>/<name>/processed``, else ``~/.cache/gflkit``). See :mod:`gflkit.data.registry`.
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

__all__ = [
    "SCHEMES", "ClientSplit", "dirichlet", "iid", "label_counts", "label_shards", "natural", "partition",
    "split_by_marker", "train_test_split",
    "ChecksumError", "DataError", "DatasetNotFoundError", "DatasetSpec", "DownloadError", "FileStatus",
    "RawFile", "SampleDataset", "UnknownDatasetError", "cache_dir", "data_root", "dataset_names",
    "fetch_dataset", "get_spec", "load_dataset", "register", "registered", "sha256_file", "verify_dataset",
]

