"""Federated methods, one module each, registered by name."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gflkit.algorithms.base import Algorithm
from gflkit.algorithms.cfl import CFL
from gflkit.algorithms.ditto import Ditto
from gflkit.algorithms.fedamp import FedAMP
from gflkit.algorithms.fedatt import FedAtt
from gflkit.algorithms.fedavg import FedAvg
from gflkit.algorithms.fedcg import FedCG, FedCGKMeans
from gflkit.algorithms.fedper import FedPer
from gflkit.algorithms.fedprox import FedProx
from gflkit.algorithms.fedpub import FedPub
from gflkit.algorithms.fedsage import FedSage
from gflkit.algorithms.fedska import FedSKA
from gflkit.algorithms.fedu import FedU
from gflkit.algorithms.fedvgae import FedVGAE
from gflkit.algorithms.gcfl import GCFLPlus
from gflkit.algorithms.ifca import IFCA
from gflkit.algorithms.jgesr import JGESR, JGESRExtrapolated, TwoStep
from gflkit.algorithms.lgfedavg import LGFedAvg
from gflkit.algorithms.local import Local
from gflkit.algorithms.moon import MOON
from gflkit.algorithms.pfedgraph import PFedGraph
from gflkit.algorithms.scaffold import Scaffold
from gflkit.algorithms.sfl import SFL
from gflkit.communication import Communication

if TYPE_CHECKING:
    from gflkit.federation import Federation

ALGORITHMS: dict[str, type[Algorithm]] = {cls.name: cls for cls in (
    Local, FedAvg, FedProx, Ditto, IFCA, FedU, SFL, FedSKA, CFL, FedAMP, PFedGraph, JGESR, JGESRExtrapolated, TwoStep, MOON, FedVGAE,
    GCFLPlus, FedSage, FedPub, FedAtt, FedPer, LGFedAvg, Scaffold, FedCG, FedCGKMeans,
)}


def build_algorithm(name: str, **options: Any) -> Algorithm:
    """Instantiate the method ``name`` with its hyper-parameters ``options``."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(ALGORITHMS)}")
    return ALGORITHMS[name](**options)


def method_communication(fed: "Federation", name: str, **options: Any) -> Communication:
    """The :class:`~gflkit.communication.Communication` of method ``name`` with ``options`` on ``fed``.

    Builds the method and runs its :meth:`~gflkit.algorithms.base.Algorithm.setup` on ``fed`` (which sets
    the federation's server state): pass a federation built for this count, not one mid-run.
    """
    algorithm = build_algorithm(name, **options)
    algorithm.setup(fed)
    return algorithm.communication(fed)


__all__ = [
    "Algorithm", "ALGORITHMS", "build_algorithm", "method_communication",
    "FedAvg", "FedProx", "Local", "Ditto", "IFCA", "FedU", "SFL", "FedSKA", "CFL", "FedAMP", "PFedGraph",
    "JGESR", "JGESRExtrapolated", "TwoStep", "MOON", "FedVGAE", "GCFLPlus", "FedSage", "FedPub", "FedAtt", "FedPer", "LGFedAvg", "Scaffold", "FedCG", "FedCGKMeans",
]
