"""The checks of a run's plain fields, which need no registry and so no torch.

:class:`~gflkit.experiment.RunConfig` checks every field; the counts, rates and fractions it checks here first,
with the standard library alone, so that ``gflkit notebook ... -p 'overrides={"rounds": 0}'`` is refused in one
line before torch is imported (:func:`gflkit.notebooks.check_parameters` calls :func:`check_plain_fields` on the
overrides). The names (dataset, method, model, ...) are checked against their registries by ``RunConfig``.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

POOLS = ("all", "train")
TEST_SPLITS = ("client", "matched")
#: RunConfig fields that are counts, and those that are real numbers (no bools, no NaN); some may be None.
INTEGER_FIELDS = ("num_clients", "max_samples", "rounds", "clients_per_round", "eval_every", "local_epochs",
                  "batch_size", "seed")
REAL_FIELDS = ("test_ratio", "held_out", "lr", "momentum", "weight_decay")
OPTIONAL_FIELDS = ("max_samples", "clients_per_round", "test_ratio")
#: Sweep entries every table of a notebook is built from (its methods, the benchmark's settings, FedSKA's
#: Table 1 shards): an override may not empty them (a section's own entries may be emptied to skip it).
NONEMPTY_SWEEP = ("methods", "variants", "settings", "shards")


def check_plain_fields(values: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` naming the first of ``values``' plain fields that is wrong: a count that is not an
    integer (``rounds=2.5``, ``rounds=True``), a rate that is not a finite number (``lr=nan``), or a value out of
    its range (``rounds=0``, ``test_ratio=1``, ``held_out=-0.1``, fewer ``max_samples`` than ``num_clients``).
    Only the fields present in ``values`` are checked; other keys are ignored."""
    _check_number_types(values)
    rounds, num_clients = values.get("rounds"), values.get("num_clients")
    if rounds is not None and rounds < 1:
        raise ValueError(f"rounds must be a positive number of communication rounds, got {rounds}")
    if num_clients is not None and num_clients < 1:
        raise ValueError(f"num_clients must be >= 1, got {num_clients}")
    test_ratio = values.get("test_ratio")
    if test_ratio is not None and not 0 < test_ratio < 1:
        raise ValueError(f"test_ratio must lie in (0, 1) or be None, got {test_ratio}")
    held_out = values.get("held_out")
    if held_out is not None and not 0 <= held_out < 1:
        raise ValueError(f"held_out must be a fraction of the clients in [0, 1), got {held_out}")
    max_samples = values.get("max_samples")
    if max_samples is not None and num_clients is not None and max_samples < num_clients:
        raise ValueError(f"max_samples ({max_samples}) must be at least num_clients ({num_clients})")


def _check_number_types(values: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` for a count in ``values`` that is not an integer or a rate that is not finite."""
    for name in INTEGER_FIELDS:
        if name not in values or (values[name] is None and name in OPTIONAL_FIELDS):
            continue
        if isinstance(values[name], bool) or not isinstance(values[name], int):
            raise ValueError(f"{name} must be an integer, got {values[name]!r}")
    for name in REAL_FIELDS:
        if name not in values or (values[name] is None and name in OPTIONAL_FIELDS):
            continue
        value = values[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")


def check_sweep_not_emptied(overrides: Mapping[str, Any], example: Mapping[str, Any] | None = None) -> None:
    """Raise ``ValueError`` when ``overrides`` empties one of the :data:`NONEMPTY_SWEEP` entries (``methods=[]``);
    ``example`` (the profile's sweep, where known) gives the message an entry to suggest."""
    emptied = [key for key in NONEMPTY_SWEEP if key in overrides and _is_empty_list(overrides[key])]
    if emptied:
        key = emptied[0]
        suggestion = list((example or {}).get(key, ()))[:1]
        raise ValueError(f"sweep entry {key!r} is empty: every table of the notebook is built from it; name at "
                         f"least one" + (f", e.g. {{{key!r}: {suggestion}}}" if suggestion else ""))


def _is_empty_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and not value


__all__ = ["INTEGER_FIELDS", "NONEMPTY_SWEEP", "OPTIONAL_FIELDS", "POOLS", "REAL_FIELDS", "TEST_SPLITS",
           "check_plain_fields", "check_sweep_not_emptied"]
