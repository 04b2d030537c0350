"""Federated methods, one module each, registered by name.

Besides gflkit's own, a method registers with :func:`register_method` (a notebook's or a script's), or is
declared by an installed package as an entry point of the group ``gflkit.methods`` (its name the method's
``name``, its object the class), which every process importing gflkit registers — the Flower app's and Ray's
workers included::

    [project.entry-points."gflkit.methods"]
    graph_smooth = "my_package.methods:GraphSmooth"
"""
from __future__ import annotations

from importlib import metadata
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
from gflkit.algorithms.method import Method, Uploads
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
#: the methods gflkit itself defines; the others in :data:`ALGORITHMS` were added by :func:`register_method`
BUILT_IN = frozenset(ALGORITHMS)


def register_method(cls: type[Algorithm]) -> type[Algorithm]:
    """Class decorator: make the method ``cls`` runnable by its ``name`` without editing gflkit —
    ``RunConfig(method=cls.name)``, the result store and the Ray executor (which ships a method defined in a
    notebook to its workers) all find it::

        @register_method
        class Mine(FedAvg):
            name = "mine"

    Registering a class again under its name (a notebook cell run twice) replaces it; a name that another
    class holds, a built-in method's included, is refused (``ValueError``), as is anything but an
    :class:`Algorithm` subclass with a non-empty identifier as ``name`` (``TypeError`` / ``ValueError``).
    """
    if not (isinstance(cls, type) and issubclass(cls, Algorithm)):
        raise TypeError(f"register_method takes a subclass of gflkit.algorithms.Algorithm, got {cls!r}")
    if not isinstance(cls.name, str) or not cls.name.isidentifier():
        raise ValueError(f"{cls.__qualname__}.name must be a non-empty identifier such as 'my_method', "
                         f"got {cls.name!r}")
    held = ALGORITHMS.get(cls.name)
    if held is not None and (cls.name in BUILT_IN or (held.__module__, held.__qualname__) !=
                             (cls.__module__, cls.__qualname__)):
        raise ValueError(f"the method name {cls.name!r} is taken by {held.__module__}.{held.__qualname__}; "
                         "choose another name")
    ALGORITHMS[cls.name] = cls
    return cls


def registered_methods() -> dict[str, type[Algorithm]]:
    """The methods :func:`register_method` added, by name (what a Ray worker must register too)."""
    return {name: cls for name, cls in ALGORITHMS.items() if name not in BUILT_IN}


#: the entry-point group an installed package declares its methods in
ENTRY_POINT_GROUP = "gflkit.methods"


def register_entry_points() -> None:
    """Register every method installed packages declare in :data:`ENTRY_POINT_GROUP` (done once, when
    :mod:`gflkit.algorithms` is imported). An entry point that fails to load, or whose class is not a method
    of that name, raises ``ImportError`` naming it."""
    for point in metadata.entry_points(group=ENTRY_POINT_GROUP):
        where = f"entry point {point.name!r} = {point.value!r} of group {ENTRY_POINT_GROUP!r}"
        try:
            cls = point.load()
        except Exception as error:
            raise ImportError(f"{where} failed to load ({type(error).__name__}: {error}); fix or uninstall the "
                              f"package {point.dist.name if point.dist else '?'} that declares it") from error
        if getattr(cls, "name", None) != point.name:
            raise ImportError(f"{where} must name a method class whose name is {point.name!r}, got {cls!r}")
        try:
            register_method(cls)
        except (TypeError, ValueError) as error:
            raise ImportError(f"{where}: {error}") from None


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


register_entry_points()

__all__ = [
    "Algorithm", "ALGORITHMS", "BUILT_IN", "ENTRY_POINT_GROUP", "Method", "Uploads", "build_algorithm",
    "method_communication", "register_entry_points", "register_method", "registered_methods",
    "FedAvg", "FedProx", "Local", "Ditto", "IFCA", "FedU", "SFL", "FedSKA", "CFL", "FedAMP", "PFedGraph",
    "JGESR", "JGESRExtrapolated", "TwoStep", "MOON", "FedVGAE", "GCFLPlus", "FedSage", "FedPub", "FedAtt", "FedPer", "LGFedAvg", "Scaffold", "FedCG", "FedCGKMeans",
]
