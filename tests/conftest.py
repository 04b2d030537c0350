"""Shared fixtures: a small synthetic federation and the data root of real datasets."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd
import pytest
import torch

from gflkit.algorithms import Algorithm
from gflkit.checkpoint import Checkpoint
from gflkit.engine import Schedule, run_rounds
from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig

REPO = Path(__file__).resolve().parents[1]

#: modules that start Ray, Flower or Jupyter, whose timeouts and process checks expect the machine to themselves:
#: they are marked ``processes``, and ``make test`` runs them after the other tests, one at a time
PROCESS_MODULES = {"test_executors", "test_flower", "test_flower_app", "test_flower_paper", "test_lab", "test_lifeline"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests of :data:`PROCESS_MODULES` ``processes``; group every other module's tests for pytest-xdist's
    ``loadgroup``, one group per module, so that its module-scoped fixtures are built once."""
    for item in items:
        module = item.path.stem
        item.add_marker(pytest.mark.processes if module in PROCESS_MODULES else pytest.mark.xdist_group(module))


def make_federation(num_clients: int = 4, per_client: int = 40, seed: int = 0, model: str = "mclr",
                    model_options: dict | None = None, held_out: torch.Tensor | None = None) -> Federation:
    """Clients whose labels depend linearly on 2×4×4 inputs, client ``k`` holding classes ``k % 3`` and
    ``(k + 1) % 3``; ``held_out`` marks unseen test clients."""
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
    net = build_model(model, (2, 4, 4), 3, **(model_options or {}))
    return Federation(x, y, train, test, net, ClassificationTask(), TrainConfig(batch_size=8, lr=0.1), seed=seed,
                      held_out=held_out)



class ResumedRun(NamedTuple):
    """An uninterrupted run and the same run killed after a checkpoint and resumed."""

    full: pd.DataFrame
    resumed: pd.DataFrame
    full_algorithm: Algorithm
    resumed_algorithm: Algorithm


def run_full_and_resumed(make_fed: Callable[[], Federation], make_algorithm: Callable[[], Algorithm],
                         checkpoint_path: Path, rounds: int = 3, stop_after: int = 2) -> ResumedRun:
    """Run ``rounds`` rounds uninterrupted; run them again, stopped after a checkpoint at ``stop_after``
    and resumed from it by fresh objects (as after a kill)."""
    full_algorithm = make_algorithm()
    full = run_rounds(make_fed(), full_algorithm, Schedule(rounds), progress=False)
    checkpoint = Checkpoint(checkpoint_path)
    run_rounds(make_fed(), make_algorithm(), Schedule(stop_after, checkpoint_every=stop_after), checkpoint,
               progress=False)
    resumed_algorithm = make_algorithm()
    resumed = run_rounds(make_fed(), resumed_algorithm, Schedule(rounds, checkpoint_every=stop_after), checkpoint,
                         progress=False)
    return ResumedRun(full, resumed, full_algorithm, resumed_algorithm)

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


@pytest.fixture
def isolated_data_env(tmp_path, monkeypatch):
    """Loader tests: offline, no shared data root, caches under ``tmp_path`` (never the real per-user cache)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GFLKIT_OFFLINE", "1")
    monkeypatch.delenv("GFLKIT_DATA", raising=False)
