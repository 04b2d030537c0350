"""One side's copy of a run (server or client), and tensors ↔ Flower records.

Both sides of a Flower run build the run's :class:`~gflkit.federation.Federation` and algorithm from the
same :class:`~gflkit.experiment.RunConfig` (``build_federation``, ``build_algorithm``, ``setup``): gflkit's
partition, initial model and given graphs are deterministic functions of the config, so every side
agrees on them without exchanging them. The server's copy holds the method's server state and is never
trained; a client's copy is reset to the freshly set-up state before every message and then filled
with what the message and the client's own ``Context.state`` carry (:mod:`gflkit.flower.methods`), so
nothing one client computed can leak into another's step through the copy.
"""
from __future__ import annotations

import copy
import threading
from pathlib import Path

import numpy as np
import torch
from flwr.app import Array, ArrayRecord
from torch import Tensor

from gflkit.algorithms import build_algorithm
from gflkit.experiment import RunConfig, build_federation
from gflkit.flower.methods import Split, check_method, split_for


class Replica:
    """The Federation and algorithm of ``config`` as one side of a Flower run holds them.

    Attributes:
        fed, algorithm: the run's federation and method, set up (``algorithm.setup(fed)``).
        split: where the method's state lives (:func:`~gflkit.flower.methods.split_for`).
        lock: held while a client message uses the copy (Flower may run ClientApps in threads).
    """

    def __init__(self, config: RunConfig, data_root: str | Path | None = None, device: str | torch.device = "auto",
                 local_training: str | None = None):
        check_method(config.method)
        self.config = config
        algorithm = build_algorithm(config.method, **config.method_options)
        self.split: Split = split_for(algorithm)  # refuses unsupported options before any data are loaded
        self.fed = build_federation(config, data_root, device, local_training)
        algorithm.setup(self.fed)
        self.algorithm = algorithm
        self.lock = threading.Lock()
        self._models = self.fed.models.clone()
        self._global = None if self.fed.global_model is None else self.fed.global_model.clone()
        self._algorithm = copy.deepcopy(algorithm)

    def reset(self) -> None:
        """Back to the state right after ``setup``: no client's rows, optimiser states or choices remain."""
        fed = self.fed
        fed.models = self._models.clone()
        fed.global_model = None if self._global is None else self._global.clone()
        fed.optimizer_states = {}
        fed.upload_mask = None
        fed.training_paths.clear()
        self.algorithm = copy.deepcopy(self._algorithm)


_REPLICAS: dict[tuple, Replica] = {}
_REPLICAS_LOCK = threading.Lock()


def client_replica(config: RunConfig, data_root: str | Path | None, device: str | torch.device,
                   local_training: str | None) -> Replica:
    """The process's client-side copy of ``config`` (built once per process: data, partition, setup)."""
    key = (repr(config.to_dict()), None if data_root is None else str(data_root), str(device), local_training)
    with _REPLICAS_LOCK:
        if key not in _REPLICAS:
            _REPLICAS[key] = Replica(config, data_root, device, local_training)
        return _REPLICAS[key]


def clear_replicas() -> None:
    """Forget every client-side copy, as a fresh ClientApp process would start."""
    with _REPLICAS_LOCK:
        _REPLICAS.clear()


def to_record(tensors: dict[str, Tensor]) -> ArrayRecord:
    """An ``ArrayRecord`` of named tensors (moved to the CPU; exact float32 / int64 / bool round trip)."""
    return ArrayRecord({name: Array(np.ascontiguousarray(tensor.detach().cpu().numpy()))
                        for name, tensor in tensors.items()})


def from_record(record: ArrayRecord) -> dict[str, Tensor]:
    """The named tensors of an ``ArrayRecord`` written by :func:`to_record`."""
    return {name: torch.from_numpy(array.numpy()) for name, array in record.items()}


__all__ = ["Replica", "clear_replicas", "client_replica", "from_record", "to_record"]
