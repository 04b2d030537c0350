"""A run's checkpoint: the complete state after a round, written atomically and restored only when it fits.

A checkpoint names the run it belongs to (the store key of its configuration) and the format it was
written in, and holds the client models, the global model, the method's :meth:`~Algorithm.state_dict`,
the optimiser states, the evaluation records so far and the latest local-protocol scores. Before anything
is restored, every part is checked against the run that loads it:

* the run, the format, the round (within ``1..rounds``) and the model shapes;
* the records: one row per client for every evaluated round up to the checkpoint's, in order, each with
  the same columns, numbers in the ranges the task declares (:attr:`ClassificationTask.ranges`, ...);
* the method's state against its **schema**: the state the method holds right after
  :meth:`~Algorithm.setup`. The keys must be the same, and every tensor, list and number must have that
  state's kind, dtype and shape, except under the keys the method declares in
  :attr:`~Algorithm.varying_state` (state that grows or appears during a run), which keep their kind only.

A checkpoint that fails any check is set aside as ``<name>.corrupt`` with one warning naming it and why,
and the run resumes from the previous checkpoint, or recomputes from the start: never a traceback, never
a silently different result.
"""
from __future__ import annotations

import copy
import math
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.atomic import atomic_write
from gflkit.federation import Federation

#: The checkpoint format; a checkpoint of another (or no) format is set aside and the run recomputed.
#: 3: checkpoints name their run.
CHECKPOINT_FORMAT = 3

Records = list[dict[str, Any]]
LocalScores = dict[int, dict[str, float]]


class Checkpoint:
    """Atomic save / load of a run's complete state at the end of a round.

    ``run`` names the run (the store key of its configuration; empty outside a store): a checkpoint
    written for another run is refused. Saving keeps the previous checkpoint beside the new one
    (``<name>.previous.pt``). **Loading runs no code**: the file is read with
    ``torch.load(weights_only=True)``, which admits tensors and plain containers of numbers and strings
    only, so a results folder that others can write to (a Ray cluster's shared disk) cannot make a worker
    execute anything. What is read is then checked as the module docstring says.
    """

    def __init__(self, path: str | Path, run: str = ""):
        self.path = Path(path)
        self.run = run
        self.previous = self.path.with_name(f"{self.path.stem}.previous{self.path.suffix}")

    def save(self, round: int, fed: Federation, algorithm: Algorithm, records: Records,
             local_scores: LocalScores) -> None:
        """Write the state after ``round`` (temp file + rename, so a kill never leaves half a file)."""
        state = {
            "format": CHECKPOINT_FORMAT,
            "run": self.run,
            "round": round,
            "models": fed.models,
            "global_model": fed.global_model,
            "algorithm": algorithm.state_dict(),
            "records": records,
            "local_scores": local_scores,
            "optimizer_states": fed.trainer.optimizer_states,
        }
        if self.path.exists():
            os.replace(self.path, self.previous)
        with atomic_write(self.path) as handle:
            torch.save(state, handle)

    def load(self, fed: Federation, algorithm: Algorithm, rounds: int, evaluates: Callable[[int], bool]) -> tuple[int, Records, LocalScores]:
        """Restore the newest usable state into ``fed`` and ``algorithm`` (already set up); returns (last
        finished round, records, the latest local-protocol scores per client) — ``(0, [], {})`` when none
        is usable. ``rounds``: the run's number of rounds; ``evaluates(round)``: whether the run records
        ``round`` (:meth:`~gflkit.engine.Schedule.evaluates`)."""
        schema = copy.deepcopy(algorithm.state_dict())
        for path in (self.path, self.previous):
            if not path.exists():
                continue
            try:
                state = torch.load(path, map_location=fed.device, weights_only=True)
                self._check(state, fed, algorithm, schema, rounds, evaluates)
                algorithm.load_state_dict(state["algorithm"])
            except Exception as error:  # unreadable, unsafe, old or not this run's: all are set aside alike
                algorithm.load_state_dict(copy.deepcopy(schema))
                aside = path.with_name(f"{path.name}.corrupt")
                os.replace(path, aside)
                reason = str(error).splitlines()[0] if str(error) else ""
                warnings.warn(f"checkpoint {path} is unusable ({type(error).__name__}: {reason}); set aside as "
                              f"{aside.name}, resuming from the previous checkpoint or the start")
                continue
            fed.models = state["models"]
            fed.global_model = state["global_model"]
            fed.trainer.optimizer_states = state["optimizer_states"]
            return state["round"], state["records"], state["local_scores"]
        return 0, [], {}

    def _check(self, state: Any, fed: Federation, algorithm: Algorithm, schema: dict[str, Any], rounds: int,
               evaluates: Callable[[int], bool]) -> None:
        """Raise ``ValueError`` naming the first part of ``state`` that does not fit this run."""
        check_frame(state, fed, rounds)
        if state["run"] != self.run:
            raise ValueError(f"it belongs to run {state['run']!r}, not to this run {self.run!r}")
        check_records(state["records"], state["round"], fed, evaluates)
        check_local_scores(state["local_scores"], fed)
        check_like_schema(state["algorithm"], schema, algorithm.varying_state, f"{algorithm.name} state")

    def exists(self) -> bool:
        """Whether a checkpoint file (current or previous) is present."""
        return self.path.exists() or self.previous.exists()

    def remove(self) -> None:
        """Delete the checkpoints (the run finished)."""
        for path in (self.path, self.previous):
            path.unlink(missing_ok=True)


_FRAME_TYPES = {"format": int, "run": str, "round": int, "models": Tensor, "global_model": (Tensor, type(None)),
                "algorithm": dict, "records": list, "local_scores": dict, "optimizer_states": dict}


def _described(value: Any) -> str:
    return f"{tuple(value.shape)} {value.dtype}" if isinstance(value, Tensor) else type(value).__name__


def check_frame(state: Any, fed: Federation, rounds: int) -> None:
    """The checkpoint's own fields: a dict of this format, every key of its type, models of the run's
    shapes, a round in ``1..rounds``."""
    if not isinstance(state, dict):
        raise ValueError(f"a checkpoint is a dict, this one is a {type(state).__name__}")
    if state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"written in checkpoint format {state.get('format')!r}, this gflkit reads format "
                         f"{CHECKPOINT_FORMAT}")
    for key, kind in _FRAME_TYPES.items():
        if key not in state or not isinstance(state[key], kind) or isinstance(state[key], bool):
            raise ValueError(f"its {key!r} is missing or of the wrong type ({type(state.get(key)).__name__})")
    for key in ("models", "global_model"):
        loaded, expected = state[key], getattr(fed, key)
        if (loaded is None) != (expected is None) or (
                loaded is not None and (loaded.shape != expected.shape or loaded.dtype != expected.dtype)):
            raise ValueError(f"its {key!r} is {_described(loaded)}, the run's is {_described(expected)}")
    if not 1 <= state["round"] <= rounds:
        raise ValueError(f"its round {state['round']} lies outside the run's rounds 1..{rounds}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_metric(name: str, value: Any, ranges: Mapping[str, tuple[float, float]], where: str) -> None:
    """A metric is a number, NaN or within the task's declared range for its name (prefixes such as
    ``val_`` and protocol suffixes such as ``_local`` ignored)."""
    if not _is_number(value):
        raise ValueError(f"{where}: {name!r} is a {type(value).__name__}, not a number")
    for metric, (low, high) in ranges.items():
        if metric in name.split("_") and not math.isnan(value) and not low <= value <= high:
            raise ValueError(f"{where}: {name!r} = {value} lies outside {metric}'s range [{low}, {high}]")


def check_records(records: Records, round: int, fed: Federation, evaluates: Callable[[int], bool]) -> None:
    """One record per client for every evaluated round up to ``round``, in order, all with the same
    columns: ``round`` and ``client`` first, ``local_training`` a string, ``held_out`` a bool, the rest numbers."""
    expected = [(r, k) for r in range(1, round + 1) if evaluates(r) for k in range(fed.num_clients)]
    if len(records) != len(expected):
        raise ValueError(f"it holds {len(records)} records; rounds 1..{round} of this run give {len(expected)}")
    columns = None
    for index, (record, (r, k)) in enumerate(zip(records, expected)):
        where = f"record {index}"
        if not isinstance(record, dict) or (record.get("round"), record.get("client")) != (r, k):
            raise ValueError(f"{where} is not round {r}, client {k}")
        if columns is None:
            columns = list(record)
        elif list(record) != columns:
            raise ValueError(f"{where} has the columns {list(record)}, record 0 has {columns}")
        for name, value in record.items():
            if name == "local_training" and not isinstance(value, str):
                raise ValueError(f"{where}: 'local_training' is a {type(value).__name__}, not a string")
            if name == "held_out" and not isinstance(value, bool):
                raise ValueError(f"{where}: 'held_out' is a {type(value).__name__}, not a bool")
            if name not in ("local_training", "held_out"):  # a method's training loss may have any sign
                _check_metric(name, value, {} if name == "train_loss" else fed.task.ranges, where)


def check_local_scores(scores: LocalScores, fed: Federation) -> None:
    """Client ids of the federation, each with a dict of numbers in the task's ranges."""
    for client, metrics in scores.items():
        if not isinstance(client, int) or not 0 <= client < fed.num_clients or not isinstance(metrics, dict):
            raise ValueError(f"its local scores hold an entry {client!r} that is not a client of this run")
        for name, value in metrics.items():
            _check_metric(name, value, fed.task.ranges, f"local scores of client {client}")


def check_like_schema(value: Any, schema: Any, varying: Sequence[str] = (), where: str = "state",
                      path: str = "") -> None:
    """Raise ``ValueError`` unless ``value`` has the structure of ``schema``: a dict with the same keys, a
    list or tuple of the same length, a tensor of the same dtype and shape, a number or string of the same
    type, ``None`` where it is ``None``. At a key whose dotted path (``"server.learner_optimizer"``) is in
    ``varying``, only the kind is compared (a tensor of the same dtype, a container, anything where the
    schema holds ``None``)."""
    if isinstance(schema, dict) and isinstance(value, dict):
        if set(value) != set(schema):
            unknown, missing = sorted(map(str, set(value) - set(schema))), sorted(map(str, set(schema) - set(value)))
            raise ValueError(f"{where} has the keys {unknown} it may not hold" if unknown
                             else f"{where} lacks the keys {missing}")
        for key in schema:
            inner = f"{path}.{key}" if path else str(key)
            if inner in varying:
                _check_kind(value[key], schema[key], f"{where}[{key!r}]")
            else:
                check_like_schema(value[key], schema[key], varying, f"{where}[{key!r}]", inner)
        return
    if schema is None and value is not None:
        raise ValueError(f"{where} is a {type(value).__name__}, the method's is None")
    _check_kind(value, schema, where)
    if isinstance(schema, Tensor) and value.shape != schema.shape:
        raise ValueError(f"{where} is {_described(value)}, the method's is {_described(schema)}")
    if isinstance(schema, (list, tuple)):
        if len(value) != len(schema):
            raise ValueError(f"{where} holds {len(value)} entries, the method's {len(schema)}")
        for index, (item, expected) in enumerate(zip(value, schema)):
            check_like_schema(item, expected, varying, f"{where}[{index}]", f"{path}.{index}")


def _kind(value: Any) -> type:
    if isinstance(value, (list, tuple)):
        return list
    return bool if isinstance(value, bool) else float if _is_number(value) else type(value)


def _check_kind(value: Any, schema: Any, where: str) -> None:
    """``value`` is of the schema's kind (anything where the schema is ``None`` and the key varies)."""
    if schema is not None and _kind(value) is not _kind(schema):
        raise ValueError(f"{where} is a {type(value).__name__}, the method's a {type(schema).__name__}")
    if isinstance(schema, Tensor) and value.dtype != schema.dtype:
        raise ValueError(f"{where} is {_described(value)}, the method's is {_described(schema)}")
