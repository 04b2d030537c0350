"""Federated methods, one module each, registered by name."""
from __future__ import annotations

from typing import Any

from gflkit.algorithms.base import Algorithm
from gflkit.algorithms.fedavg import FedAvg
from gflkit.algorithms.fedprox import FedProx
from gflkit.algorithms.local import Local

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (Local, FedAvg, FedProx)}


def build_algorithm(name: str, **options: Any) -> Algorithm:
    """Instantiate the method ``name`` with its hyper-parameters ``options``."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(ALGORITHMS)}")
    return ALGORITHMS[name](**options)


__all__ = ["Algorithm", "ALGORITHMS", "build_algorithm", "FedAvg", "FedProx", "Local"]
