"""Each side's copy of a run in a Flower federation: a node holds its own partition, the server none.

Both sides build the run's algorithm from the same :class:`~gflkit.experiment.RunConfig`; gflkit's
partition, initial model and random streams are deterministic functions of the config, so the sides
agree on them without exchanging them.

* **A node** (:func:`node_replica`) reads the dataset (the partition is a seeded function of the whole
  dataset, as in every simulation of these papers), keeps **only its own client's samples**
  (:meth:`Federation.keep_only <gflkit.federation.Federation.keep_only>`), forgets the loaded dataset,
  and only then sets the method up. What the server needs of it travels in the handshake as a
  :class:`ClientProfile`: sample counts, the held-out flag, the model's input shape and classes, its
  train-label counts (the side information of a label-sharing graph) and what the method's set-up wrote
  for it into server state (``Split.up``: IFCA's first cluster choice).
* **The server** (:func:`server_replica`) holds a
  :class:`~gflkit.federation.ServerFederation` built from those profiles: the ``K × d`` state and the
  counts, no sample.

A node's copy is reset to its freshly set-up state before every message and then filled with what the
message and the client's own ``Context.state`` carry (:mod:`gflkit.flower.methods`).
"""
from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, MetricRecord, RecordDict
from torch import Tensor

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.base import Algorithm
from gflkit.experiment import RunConfig, build_federation, initial_model, release_datasets, sample_dataset
from gflkit.federation import Federation, ServerFederation
from gflkit.flower.methods import Split, UnsupportedMethod, check_method, split_for
from gflkit.runtime import Runtime, resolve_device


def check_config(config: RunConfig) -> Split:
    """The :class:`Split` of ``config``'s method; one-line :class:`UnsupportedMethod` for what the Flower
    adapter does not run (a method, an option of it, or a graph dataset)."""
    check_method(config.method)
    if config.is_graph:
        raise UnsupportedMethod(f"gflkit.flower: graph dataset {config.dataset!r} is not supported in Flower yet "
                                "(a node would hold the whole graph); use a sample dataset")
    return split_for(build_algorithm(config.method, **config.method_options))


class Replica:
    """One side's federation and set-up algorithm, and a snapshot to reset to.

    Attributes:
        config: the run.
        fed, algorithm: the side's federation (a node's own partition, or the server's counts) and method.
        split: where the method's state lives (:func:`~gflkit.flower.methods.split_for`).
        lock: held while a client message uses the copy (Flower may run ClientApps in threads).
    """

    def __init__(self, config: RunConfig, fed: Federation, algorithm: Algorithm):
        self.config = config
        self.fed, self.algorithm = fed, algorithm
        self.split: Split = split_for(algorithm)
        self.lock = threading.Lock()
        self._models = fed.models.clone()
        self._global = None if fed.global_model is None else fed.global_model.clone()
        self._algorithm = copy.deepcopy(algorithm)

    def reset(self) -> None:
        """Back to the state right after ``setup``: no client's rows, optimiser states or choices remain."""
        fed = self.fed
        fed.models = self._models.clone()
        fed.global_model = None if self._global is None else self._global.clone()
        fed.trainer.optimizer_states = {}
        fed.upload_mask = None
        fed.trainer.paths.clear()
        self.algorithm = copy.deepcopy(self._algorithm)


@dataclass
class ClientProfile:
    """What a node tells the server in the handshake (module docstring)."""

    partition: int
    num_clients: int
    num_train: int
    num_test: int
    held_out: bool
    input_shape: tuple[int, ...]
    num_classes: int
    label_counts: Tensor | None = None
    setup: dict[str, Tensor] = field(default_factory=dict)

    SCALARS = ("partition", "num_clients", "num_train", "num_test", "num_classes")

    def to_record(self) -> RecordDict:
        """The profile as a reply's records: ``"profile"`` (scalars), ``"profile.arrays"`` (tensors)."""
        scalars = {name: int(getattr(self, name)) for name in self.SCALARS}
        tensors = {"input_shape": torch.tensor(self.input_shape), "held_out": torch.tensor(self.held_out),
                   **({"label_counts": self.label_counts} if self.label_counts is not None else {}),
                   **{f"setup.{key}": value for key, value in self.setup.items()}}
        return RecordDict({"profile": MetricRecord(scalars), "profile.arrays": to_record(tensors)})

    @classmethod
    def from_record(cls, records: RecordDict) -> "ClientProfile":
        """The profile a node sent (:meth:`to_record`)."""
        tensors = from_record(records["profile.arrays"])
        return cls(**{name: int(records["profile"][name]) for name in cls.SCALARS},
                   held_out=bool(tensors["held_out"]), input_shape=tuple(tensors["input_shape"].tolist()),
                   label_counts=tensors.get("label_counts"),
                   setup={key[len("setup."):]: value for key, value in tensors.items() if key.startswith("setup.")})


def node_replica(config: RunConfig, partition: int, runtime: Runtime | None = None) -> tuple[Replica, ClientProfile]:
    """The copy of the run on the node of client ``partition`` (on ``runtime``'s data root and device): only its
    samples, set up; and its profile."""
    check_config(config)
    runtime = runtime or Runtime()
    fed = build_federation(config, runtime)
    if not 0 <= partition < fed.num_clients:
        raise ValueError(f"gflkit.flower: partition-id {partition} is not a client of this run (clients "
                         f"0..{fed.num_clients - 1}); start one SuperNode per client")
    data = sample_dataset(config, runtime.data_root)
    classification = config.task == "classification"
    profile = ClientProfile(partition, fed.num_clients, int(fed.num_train[partition]), int(fed.num_test[partition]),
                            bool(fed.held_out[partition]), tuple(data.input_shape), int(data.num_classes),
                            fed.train_label_counts()[partition] if classification else None)
    fed.keep_only(partition)
    release_datasets()
    algorithm = build_algorithm(config.method, **config.method_options)
    algorithm.setup(fed)
    replica = Replica(config, fed, algorithm)
    written = {slot.key: slot.get(fed, algorithm, partition) for slot in replica.split.up}
    profile.setup = {key: torch.as_tensor(value) for key, value in written.items() if value is not None}
    return replica, profile


def server_replica(config: RunConfig, profiles: Mapping[int, ClientProfile], device: str | torch.device = "auto"
                   ) -> Replica:
    """The server's copy of the run, from every client's :class:`ClientProfile` (no client data)."""
    ordered = [profiles[k] for k in range(len(profiles))]
    first = ordered[0]
    counts = [p.label_counts for p in ordered]
    fed = ServerFederation(
        [p.num_train for p in ordered], [p.num_test for p in ordered],
        initial_model(config, first.input_shape, first.num_classes), config.train_config(), seed=config.seed,
        device=resolve_device(device), channel=config.uplink(), held_out=torch.tensor([p.held_out for p in ordered]),
        label_counts=None if any(c is None for c in counts) else torch.stack(counts))
    algorithm = build_algorithm(config.method, **config.method_options)
    algorithm.setup(fed)
    replica = Replica(config, fed, algorithm)
    for k, profile in enumerate(ordered):  # what each client's own set-up wrote into server state
        for slot in replica.split.up:
            if slot.key in profile.setup:
                slot.set(fed, algorithm, k, profile.setup[slot.key])
    return replica


_NODES: dict[tuple, tuple[Replica, ClientProfile]] = {}
_NODES_LOCK = threading.Lock()


def cached_node_replica(config: RunConfig, partition: int, runtime: Runtime) -> tuple[Replica, ClientProfile]:
    """The process's copy for client ``partition`` of ``config`` on ``runtime`` (:func:`node_replica`, built once
    per process for each data root, device and local training)."""
    where = None if runtime.data_root is None else str(runtime.data_root)
    key = (repr(config.to_dict()), partition, where, str(runtime.device), runtime.local_training)
    with _NODES_LOCK:
        if key not in _NODES:
            _NODES[key] = node_replica(config, partition, runtime)
        return _NODES[key]


def clear_replicas() -> None:
    """Forget every node copy, as a fresh ClientApp process would start."""
    with _NODES_LOCK:
        _NODES.clear()


def to_record(tensors: dict[str, Tensor]) -> ArrayRecord:
    """An ``ArrayRecord`` of named tensors (moved to the CPU; exact float32 / int64 / bool round trip)."""
    return ArrayRecord({name: Array(np.ascontiguousarray(tensor.detach().cpu().numpy()))
                        for name, tensor in tensors.items()})


def from_record(record: ArrayRecord) -> dict[str, Tensor]:
    """The named tensors of an ``ArrayRecord`` written by :func:`to_record`."""
    return {name: torch.from_numpy(array.numpy()) for name, array in record.items()}


__all__ = ["ClientProfile", "Replica", "cached_node_replica", "check_config", "clear_replicas", "from_record",
           "node_replica", "server_replica", "to_record"]
