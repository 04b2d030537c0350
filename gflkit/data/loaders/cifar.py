"""CIFAR-10 and CIFAR-100 from the official python archives (Krizhevsky, https://www.cs.toronto.edu/~kriz/).

Archives (downloaded whole, sha256-pinned):

- ``cifar-10-python.tar.gz``: ``cifar-10-batches-py/data_batch_1`` … ``data_batch_5`` (10,000 images each),
  ``test_batch`` (10,000), ``batches.meta`` (``label_names``).
- ``cifar-100-python.tar.gz``: ``cifar-100-python/train`` (50,000), ``test`` (10,000), ``meta``
  (``fine_label_names``, ``coarse_label_names``).

Each member is a Python pickle of a dict with ``data`` (``uint8`` ``(n, 3072)``: 1024 red, 1024 green,
1024 blue values of a 32×32 image, row-major) and ``labels`` (CIFAR-10) or ``fine_labels`` /
``coarse_labels`` (CIFAR-100). The archive's sha256 is checked before anything is unpickled, and the
unpickler only accepts the numpy array constructors these files use.

Output: ``x`` ``float32`` ``(N, 3, 32, 32)`` = value / 255, ``y`` ``int64`` (CIFAR-100: the 100 fine
labels), ``is_test`` True for the official test batch (last 10,000 samples), no users.
"""
from __future__ import annotations

import importlib
import pickle
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

SOURCE = "https://www.cs.toronto.edu/~kriz/cifar.html"
_BASE = "https://www.cs.toronto.edu/~kriz/"
CIFAR10_SHA256 = "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
CIFAR100_SHA256 = "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7"

_ALLOWED_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.numeric", "_frombuffer"), ("numpy.core.numeric", "_frombuffer"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
    ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
    ("__builtin__", "object"), ("builtins", "object"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays only (defence in depth after the sha256 check)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"CIFAR pickle refers to {module}.{name}, which is not allowed")
        if module.startswith("numpy.core.") and hasattr(np, "_core"):
            module = "numpy._core." + module[len("numpy.core."):]
        module = {"copy_reg": "copyreg", "__builtin__": "builtins"}.get(module, module)
        return getattr(importlib.import_module(module), name)


def _unpickle(tar: tarfile.TarFile, member: str) -> dict[str, Any]:
    try:
        handle = tar.extractfile(member)
    except KeyError:
        raise ValueError(f"CIFAR archive has no member {member!r}") from None
    if handle is None:
        raise ValueError(f"CIFAR archive member {member!r} is not a file")
    obj = _ArrayUnpickler(handle, encoding="latin1").load()
    if not isinstance(obj, dict):
        raise ValueError(f"CIFAR member {member!r} is not a dict")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in obj.items()}


def _names(values: Any) -> list[str]:
    return [v.decode("latin1") if isinstance(v, bytes) else str(v) for v in values]


def _batches(tar: tarfile.TarFile, members: list[str], label_key: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for member in members:
        batch = _unpickle(tar, member)
        data = np.asarray(batch["data"], dtype=np.uint8)
        labels = np.asarray(batch[label_key], dtype=np.int64)
        if data.ndim != 2 or data.shape[1] != 3072 or len(data) != len(labels):
            raise ValueError(f"CIFAR member {member!r}: data {data.shape} / labels {labels.shape} malformed")
        xs.append(data.reshape(-1, 3, 32, 32))
        ys.append(labels)
    return np.concatenate(xs), np.concatenate(ys)


def _convert(archive: Path, folder: str, train: list[str], test: list[str], label_key: str,
             meta: str, names_key: str) -> dict[str, Any]:
    with tarfile.open(archive, "r:gz") as tar:
        x_train, y_train = _batches(tar, [f"{folder}/{m}" for m in train], label_key)
        x_test, y_test = _batches(tar, [f"{folder}/{m}" for m in test], label_key)
        label_names = _names(_unpickle(tar, f"{folder}/{meta}")[names_key])
    is_test = np.r_[np.zeros(len(y_train), bool), np.ones(len(y_test), bool)]
    return {"x": torch.from_numpy(np.ascontiguousarray(np.concatenate([x_train, x_test]))),
            "y": torch.from_numpy(np.concatenate([y_train, y_test])),
            "is_test": torch.from_numpy(is_test), "label_names": label_names}


def _load(spec: DatasetSpec, root: Path, download: bool, options: dict[str, Any], num_classes: int,
          layout: tuple[str, list[str], list[str], str, str, str]) -> SampleDataset:
    reject_options(spec, options)
    require_files(spec, root, download=download)
    raw = spec.files[0]
    data = cached_conversion(spec, root, spec.files, lambda paths: _convert(paths[raw.path], *layout))
    if int(data["y"].max()) >= num_classes or int(data["y"].min()) < 0:
        raise ValueError(f"{spec.name}: labels outside 0..{num_classes - 1}")
    return SampleDataset(spec.name, data["x"].float().div_(255.0), data["y"], num_classes, data["is_test"],
                         info={"label_names": list(data["label_names"]), "scale": "value / 255"})


def load_cifar10(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> SampleDataset:
    """CIFAR-10: 50,000 train + 10,000 test, ``(N, 3, 32, 32)`` ``float32`` in ``[0, 1]``, 10 classes."""
    layout = ("cifar-10-batches-py", [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "labels",
              "batches.meta", "label_names")
    return _load(spec, root, download, options, 10, layout)


def load_cifar100(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> SampleDataset:
    """CIFAR-100 with its 100 fine labels: 50,000 train + 10,000 test, ``(N, 3, 32, 32)`` ``float32``."""
    layout = ("cifar-100-python", ["train"], ["test"], "fine_labels", "meta", "fine_label_names")
    return _load(spec, root, download, options, 100, layout)


SPEC10 = register(DatasetSpec(
    name="cifar10",
    description="CIFAR-10, 50k train + 10k test, 3x32x32, 10 classes (official python archive)",
    source=_BASE + "cifar-10-python.tar.gz",
    files=(RawFile("cifar-10-python.tar.gz", CIFAR10_SHA256, 170498071, (_BASE + "cifar-10-python.tar.gz",)),),
    loader=load_cifar10,
    obtain="download https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz into <root>/cifar10/raw/",
    license="no explicit licence; commonly used for research (cite Krizhevsky 2009)",
))

SPEC100 = register(DatasetSpec(
    name="cifar100",
    description="CIFAR-100, 50k train + 10k test, 3x32x32, 100 fine classes (official python archive)",
    source=_BASE + "cifar-100-python.tar.gz",
    files=(RawFile("cifar-100-python.tar.gz", CIFAR100_SHA256, 169001437, (_BASE + "cifar-100-python.tar.gz",)),),
    loader=load_cifar100,
    obtain="download https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz into <root>/cifar100/raw/",
    license="no explicit licence; commonly used for research (cite Krizhevsky 2009)",
))
