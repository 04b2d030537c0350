"""Where and how runs are computed, as one object: the :class:`Runtime`.

A :class:`~gflkit.experiment.RunConfig` says what a run is (it is the store key); a ``Runtime`` says where it
runs and where its result goes: the data root, the device, the result store, batched or sequential local
training, the grid's executor (serial or Ray, and the Ray cluster) and torch's CPU threads. It is built once —
by the ``gflkit`` command from its flags, by a notebook from its parameters cell, or in Python — and passed as
one argument to :func:`~gflkit.experiment.run`, :func:`~gflkit.executors.run_grid`,
:func:`~gflkit.experiment.build_federation` and the timing helpers. None of it changes a run's numbers beyond
floating-point level (the device type is part of the stored key: a GPU's runs are stored apart).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gflkit.local_training import LOCAL_TRAINING
from gflkit.results import ResultStore
from gflkit.threads import limit_threads

EXECUTORS = ("serial", "ray")
ENV_LOCAL_TRAINING = "GFLKIT_LOCAL_TRAINING"


def check_executor(executor: str, ray_address: str | None = None) -> None:
    """Raise ``ValueError`` unless ``executor`` is one of :data:`EXECUTORS` (and ``ray_address`` is only
    given to the ``ray`` executor)."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose one of {list(EXECUTORS)}")
    if ray_address is not None and executor != "ray":
        raise ValueError(f"ray_address={ray_address!r} is only used by executor='ray', not {executor!r}")


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when available, else CPU; anything else is passed to ``torch.device``."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resolve_local_training(local_training: str | None = None) -> str:
    """How local training runs (the ``mode`` of :class:`~gflkit.local_training.LocalTraining`):
    ``local_training``, else ``$GFLKIT_LOCAL_TRAINING``, else ``"auto"`` (batched wherever it applies). Like the device, it
    changes numbers only at floating-point level, so it is not part of a run's configuration."""
    mode = local_training or os.environ.get(ENV_LOCAL_TRAINING, "").strip() or "auto"
    if mode not in LOCAL_TRAINING:
        raise ValueError(f"unknown local training {mode!r} (argument or ${ENV_LOCAL_TRAINING}); choose one of "
                         f"{list(LOCAL_TRAINING)}")
    return mode


@dataclass(frozen=True)
class Runtime:
    """Where and how runs are computed (see the module docstring).

    Attributes:
        data_root: the data root (None: ``$GFLKIT_DATA``, else the checkout's ``data/``).
        device: ``"auto"`` (CUDA when present, else the CPU), ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...
        store: the result store finished runs are read from and written to (None: compute, keep nothing).
        local_training: ``"auto"``, ``"batched"`` or ``"sequential"`` (None: ``$GFLKIT_LOCAL_TRAINING``, else
            ``"auto"``).
        executor: how a grid's runs are computed: ``"serial"`` here, or ``"ray"`` (one task per run; needs a
            store on a path every worker sees).
        ray_address: the Ray cluster of the ``ray`` executor (None: a local Ray on this machine's cores).
        threads: torch's CPU threads (None: ``$GFLKIT_THREADS``, else torch's default).

    Raises ``ValueError`` for an unknown executor, a Ray address without the ``ray`` executor, an unknown local
    training or a thread count below 1.
    """

    data_root: str | Path | None = None
    device: str | torch.device = "auto"
    store: ResultStore | None = None
    local_training: str | None = None
    executor: str = "serial"
    ray_address: str | None = None
    threads: int | None = None

    def __post_init__(self) -> None:
        check_executor(self.executor, self.ray_address)
        if self.local_training is not None:
            resolve_local_training(self.local_training)
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise ValueError(f"threads must be a positive integer or None, got {self.threads!r}")

    def replace(self, **changes: Any) -> "Runtime":
        """A copy with some fields changed (validated again), e.g. ``runtime.replace(device="cpu")``."""
        return dataclasses.replace(self, **changes)

    def torch_device(self) -> torch.device:
        """The device runs compute on (:func:`resolve_device`)."""
        return resolve_device(self.device)

    def training_mode(self) -> str:
        """How local training runs (:func:`resolve_local_training`)."""
        return resolve_local_training(self.local_training)

    def limit_threads(self) -> None:
        """Apply :attr:`threads` (else ``$GFLKIT_THREADS``) to torch."""
        limit_threads(self.threads)
