"""Shared fixtures: a small synthetic federation and the data root of real datasets."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig

REPO = Path(__file__).resolve().parents[1]


def make_federation(num_clients: int = 4, per_client: int = 40, seed: int = 0, model: str = "mclr") -> Federation:
    """Clients whose labels depend linearly on 2×4×4 inputs, each client holding two classes."""
    gen = torch.Generator().manual_seed(123)
    x = torch.randn(num_clients * per_client, 2, 4, 4, generator=gen)
    y = torch.zeros(len(x), dtype=torch.long)
    train, test = [], []
    for k in range(num_clients):
        idx = torch.arange(k * per_client, (k + 1) * per_client)
        classes = torch.tensor([k % 3, (k + 1) % 3])
        y[idx] = classes[(x[idx, 0, 0, 0] > 0).long()]
        train.append(idx[: per_client * 3 // 4])
        test.append(idx[per_client * 3 // 4 :])
    torch.manual_seed(seed)
    net = build_model(model, (2, 4, 4), 3)
    return Federation(x, y, train, test, net, ClassificationTask(), TrainConfig(batch_size=8, lr=0.1), seed=seed)


@pytest.fixture
def federation() -> Federation:
    return make_federation()


@pytest.fixture(scope="session")
def real_data_root() -> Path:
    """The root holding real raw datasets (``GFLKIT_DATA``), or skip when MNIST is not there."""
    root = os.environ.get("GFLKIT_DATA")
    if not root or not (Path(root) / "mnist" / "raw" / "train-images-idx3-ubyte.gz").exists():
        pytest.skip("real MNIST not found: set GFLKIT_DATA to a root holding mnist/raw/*.gz (CI uses ../shared/datasets)")
    return Path(root)
