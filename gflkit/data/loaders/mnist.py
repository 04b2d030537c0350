"""MNIST from the four original gzip IDX files (LeCun, Cortes, Burges).

IDX format: a big-endian header ``0x00 0x00 <dtype code> <ndim>`` (dtype 0x08 = unsigned byte), then
``ndim`` big-endian uint32 dimension sizes, then the data in row-major order. Images are
``magic 2051`` (``N x 28 x 28``), labels ``magic 2049`` (``N``). Each file is gzip-compressed.

Output: ``x`` ``float32`` ``(70000, 1, 28, 28)``, ``y`` ``int64`` digits 0..9, ``is_test`` True for the
10,000 ``t10k`` samples (which come last). Pixels are scaled to ``[0, 1]`` (pixel / 255) and, with the
default ``normalize=True``, standardised as the FedSKA authors' loader does (and torchvision's MNIST
recipe): ``(pixel / 255 − 0.1307) / 0.3081``, the training set's mean and standard deviation. With
``normalize=False`` the inputs stay in ``[0, 1]`` (0 = black background, 1 = ink).
The converted cache stores the pixels as ``uint8``; scaling happens on load.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

SOURCE = "http://yann.lecun.com/exdb/mnist/"
_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
_FILES = (
    ("train-images-idx3-ubyte.gz", "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422),
    ("train-labels-idx1-ubyte.gz", "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881),
    ("t10k-images-idx3-ubyte.gz", "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877),
    ("t10k-labels-idx1-ubyte.gz", "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542),
)
_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_idx(path: str | Path) -> np.ndarray:
    """Read a (gzip-compressed when the name ends in ``.gz``) IDX file into a numpy array."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path} is not an IDX file (bad magic {data[:4].hex()})")
    dtype, ndim = np.dtype(_IDX_DTYPES[data[2]]), data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{path}: IDX header says shape {shape} ({expected} bytes) but {len(data) - header} "
                         f"bytes follow")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape)


def _convert(paths: dict[str, Path]) -> dict[str, Any]:
    parts = []
    for split in ("train", "t10k"):
        images = read_idx(paths[f"{split}-images-idx3-ubyte.gz"])
        labels = read_idx(paths[f"{split}-labels-idx1-ubyte.gz"])
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"MNIST {split}: images {images.shape} and labels {labels.shape} do not match")
        parts.append((images, labels))
    x = np.concatenate([p[0] for p in parts])[:, None]
    y = np.concatenate([p[1] for p in parts]).astype(np.int64)
    is_test = np.zeros(len(y), dtype=bool)
    is_test[len(parts[0][1]):] = True
    return {"x": torch.from_numpy(np.ascontiguousarray(x)), "y": torch.from_numpy(y),
            "is_test": torch.from_numpy(is_test)}


MEAN, STD = 0.1307, 0.3081  # of the 60,000 training images' pixels / 255 (the authors' Normalize)


def load_mnist(spec: DatasetSpec, root: Path, *, download: bool = True, normalize: bool = True,
               raw: bool = False, **options: Any) -> SampleDataset:
    """MNIST, 60,000 train + 10,000 test, as ``(N, 1, 28, 28)`` ``float32``.

    ``normalize=True`` (default, the FedSKA authors' input pipeline): ``(pixel / 255 − 0.1307) / 0.3081``;
    ``normalize=False``: ``pixel / 255`` in ``[0, 1]``; ``raw=True`` (with ``normalize=False``): the pixel
    values 0–255 as floats — what the SFL authors' code trains on (it reads the datasets' ``.data``
    tensors, so its ``Normalize`` transform is never applied).
    """
    reject_options(spec, options, allowed=("normalize", "raw"))
    for name, value in (("normalize", normalize), ("raw", raw)):
        if not isinstance(value, bool):
            raise TypeError(f"mnist option {name} must be True or False, got {value!r}")
    if raw and normalize:
        raise ValueError("mnist options raw=True and normalize=True exclude each other: raw pixels are 0-255 "
                         "unscaled; pass normalize=False with raw=True")
    require_files(spec, root, download=download)
    data = cached_conversion(spec, root, spec.files, _convert)
    x = data["x"].float()
    if not raw:
        x = x.div_(255.0)
    if normalize:
        x = x.sub_(MEAN).div_(STD)
    scale = "pixel (0-255)" if raw else f"(pixel / 255 - {MEAN}) / {STD}" if normalize else "pixel / 255"
    background = f"{-MEAN / STD:.4f} (black)" if normalize else "0.0 (black)"
    return SampleDataset(spec.name, x, data["y"], 10, data["is_test"], info={"background": background, "scale": scale})


SPEC = register(DatasetSpec(
    name="mnist",
    description="MNIST handwritten digits, 60k train + 10k test, 1x28x28, 10 classes",
    source=SOURCE,
    files=tuple(RawFile(name, sha, size, tuple(m + name for m in _MIRRORS)) for name, sha, size in _FILES),
    loader=load_mnist,
    obtain="download the four gzip IDX files from http://yann.lecun.com/exdb/mnist/ (or a mirror such as "
           "https://ossci-datasets.s3.amazonaws.com/mnist/) into <root>/mnist/raw/",
    license="CC BY-SA 3.0 (as commonly stated)",
))
