"""``digits``: scikit-learn's embedded 8×8 handwritten digits (UCI optdigits test set), no files needed.

1,797 real digits, pixel counts 0..16 (0 = background). Output ``x`` ``float32`` ``(1797, 1, 8, 8)`` =
value / 16, ``y`` ``int64`` 0..9, ``is_test`` all False (scikit-learn ships no split), no users.
Used by ``make demo`` and the smoke profiles: it works offline on every machine.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.registry import DatasetSpec, register, reject_options


def load_digits_dataset(spec: DatasetSpec, root: Path | None = None, *, download: bool = True,
                        **options: Any) -> SampleDataset:
    """The 1,797 scikit-learn digits as ``(1797, 1, 8, 8)`` ``float32`` in ``[0, 1]`` (no options)."""
    reject_options(spec, options)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.from_numpy((np.asarray(bunch.images, dtype=np.float32) / np.float32(16.0))[:, None])
    y = torch.from_numpy(np.asarray(bunch.target, dtype=np.int64))
    return SampleDataset(spec.name, x.contiguous(), y, 10, torch.zeros(len(y), dtype=torch.bool),
                         info={"scale": "value / 16", "source": "sklearn.datasets.load_digits"})


SPEC = register(DatasetSpec(
    name="digits",
    description="scikit-learn's embedded 8x8 digits (1,797 samples, 10 classes); no files, works offline",
    source="https://archive.ics.uci.edu/dataset/80/optical+recognition+of+handwritten+digits",
    loader=load_digits_dataset,
    license="CC BY 4.0 (UCI), shipped with scikit-learn (BSD-3-Clause)",
    embedded=True,
))
