"""Which of a method's state travels in Flower messages, and which methods this adapter runs.

In gflkit's engine the server and every client share one :class:`~gflkit.federation.Federation` and one
:class:`~gflkit.algorithms.base.Algorithm` object: a client step (``algorithm.round_updates``: configure →
local context → the local loop → ``finish_client``) reads and writes the same ``fed.models`` /
``fed.global_model`` / method attributes that ``algorithm.aggregate`` does. In Flower the two sides are
apart, so for each method a :class:`Split` names the pieces of that shared state by where they live:

* ``down``: server state the client step of client ``k`` reads — sent to ``k`` in its train message
  (the global model, *row k* of a ``K × d`` matrix such as SFL's aggregated models or pFedGraph's
  personalised aggregates, IFCA's ``C`` cluster models);
* ``kept``: state that stays on client ``k`` between rounds — kept in Flower's per-client
  ``Context.state``, never sent (Ditto's personal model, SCAFFOLD's control variate, the client's
  own model under partial sharing, SFL's :math:`v_k`);
* ``up``: server state the client step writes besides the trained vector — sent back in the reply and
  written into the server's state before aggregation (IFCA's cluster choice, SCAFFOLD's control delta);
* ``evaluation``: what client ``k`` needs to rebuild the model the server holds for it
  (``algorithm.evaluation_models``), scored on the client's own test split (default: ``down``).

A slot is either one attribute as a whole (``per_client=False``) or client ``k``'s entry of it (row ``k``
of a tensor, key ``k`` of a dict). Only client ``k``'s rows ever reach client ``k``.

A method written on the public surface (:class:`~gflkit.algorithms.method.Method`: a local penalty that reads
only the client's model and its start, an aggregation that runs on the server alone) needs no entry: its
split follows from whether it is personalised (its row of ``fed.models`` down) or not (the global model down,
as FedAvg). A method registered outside gflkit reaches the Flower app's processes as an entry point of the
``gflkit.methods`` group (:mod:`gflkit.algorithms`).

Methods whose server needs more than one round trip per round — FedSKA's structure encoder, trained with
``E_g`` gradient exchanges with every client — or whose state is not described here are refused with a
one-line :class:`UnsupportedMethod` error naming the supported ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from torch import Tensor

from gflkit.algorithms import ALGORITHMS, Method
from gflkit.algorithms.base import Algorithm
from gflkit.federation import Federation


class UnsupportedMethod(ValueError):
    """A method (or an option of it) this Flower adapter does not run; the message is one line."""


@dataclass(frozen=True)
class Slot:
    """One piece of a run's state: attribute ``name`` of the federation (``owner="fed"``) or of the
    algorithm (``owner="algorithm"``), as a whole or client ``k``'s entry of it (``per_client``)."""

    owner: str
    name: str
    per_client: bool = True

    @property
    def key(self) -> str:
        """The slot's key in a Flower record, e.g. ``"algorithm.aggregated"``."""
        return f"{self.owner}.{self.name}"

    def _holder(self, fed: Federation, algorithm: Algorithm) -> Any:
        return fed if self.owner == "fed" else algorithm

    def get(self, fed: Federation, algorithm: Algorithm, client: int) -> Tensor | None:
        """The slot's value for ``client`` (None when the attribute, or client's entry of a dict, is absent)."""
        value = getattr(self._holder(fed, algorithm), self.name)
        if value is None or not self.per_client:
            return value
        return value.get(client) if isinstance(value, dict) else value[client]

    def set(self, fed: Federation, algorithm: Algorithm, client: int, value: Tensor) -> None:
        """Write ``value`` into the slot for ``client`` (on ``fed.device``)."""
        holder = self._holder(fed, algorithm)
        value = value.to(fed.device)
        if self.per_client:
            getattr(holder, self.name)[client] = value
        else:
            setattr(holder, self.name, value)


@dataclass(frozen=True)
class Split:
    """Where a method's state lives when server and clients are apart (see the module docstring)."""

    down: tuple[Slot, ...] = ()
    kept: tuple[Slot, ...] = ()
    up: tuple[Slot, ...] = ()
    evaluation: tuple[Slot, ...] | None = None

    @property
    def evaluation_slots(self) -> tuple[Slot, ...]:
        """What an evaluation message carries — ``evaluation``, else ``down``."""
        return self.down if self.evaluation is None else self.evaluation


GLOBAL = Slot("fed", "global_model", per_client=False)
OWN_ROW = Slot("fed", "models")  # row k of the K × d models


def _own(algorithm: Algorithm) -> tuple[Slot, ...]:
    """Row ``k`` of ``fed.models`` stays on the client when part of the model never leaves it."""
    return (OWN_ROW,) if getattr(algorithm, "partial", False) else ()


def _fedavg(algorithm: Algorithm) -> Split:
    return Split(down=(GLOBAL,), kept=_own(algorithm))


def _sfl(algorithm: Algorithm) -> Split:
    if algorithm.partial:
        raise UnsupportedMethod(
            f"gflkit.flower: sfl with share={algorithm.params.share!r} is not supported: its server propagates "
            "the clients' unshared entries too (aggregated models and scores need them); use share='all'")
    return Split(down=(GLOBAL, Slot("algorithm", "aggregated")), kept=(OWN_ROW,))


def _pfedgraph(algorithm: Algorithm) -> Split:
    neighbours = (Slot("algorithm", "neighbour_sum"),) if algorithm.params.regularizer == "neighbours" else ()
    return Split(down=(OWN_ROW, *neighbours))


def _ifca(algorithm: Algorithm) -> Split:
    clusters, choice = Slot("algorithm", "cluster_models", per_client=False), Slot("algorithm", "assignments")
    return Split(down=(clusters,), up=(choice,), evaluation=(clusters, choice))


SPLITS: dict[str, Callable[[Algorithm], Split]] = {
    "local": lambda algorithm: Split(kept=(OWN_ROW,)),
    "fedavg": _fedavg,
    "fedper": _fedavg,
    "lg_fedavg": _fedavg,
    "ditto": lambda algorithm: Split(down=(GLOBAL,), kept=(OWN_ROW,)),
    "scaffold": lambda algorithm: Split(down=(GLOBAL, Slot("algorithm", "server_control", per_client=False)),
                                        kept=(Slot("algorithm", "client_controls"),),
                                        up=(Slot("algorithm", "_pending"),)),
    "ifca": _ifca,
    "fedu": lambda algorithm: Split(down=(OWN_ROW,)),
    "sfl": _sfl,
    "pfedgraph": _pfedgraph,
    "fedamp": lambda algorithm: Split(down=(Slot("algorithm", "cloud"),), kept=(OWN_ROW,)),
    "pdca": lambda algorithm: Split(down=(OWN_ROW,)),
    "pdca_e": lambda algorithm: Split(down=(OWN_ROW,)),
    "two_step": lambda algorithm: Split(down=(OWN_ROW,)),
}

#: Why a method is not run by this adapter (methods missing here and from SPLITS — "not ported yet").
REFUSALS: dict[str, str] = {
    "fedska": "its server trains the structure encoder with E_g extra gradient round trips to every client "
              "per round, which this adapter does not run yet",
    "cfl": "its server splits clusters from the similarities of the clients' updates; not ported yet",
    "gcfl": "its server splits clusters from sequences of update norms (GCFL+); not ported yet",
    "moon": "its clients keep their previous local models for the contrastive term; not ported yet",
}


def _surface(algorithm: Algorithm) -> Split:
    """The split of a :class:`~gflkit.algorithms.method.Method`: its own row down when personalised, else FedAvg's."""
    return Split(down=(OWN_ROW,)) if algorithm.personalised else _fedavg(algorithm)


def _on_surface(name: str) -> bool:
    return name in ALGORITHMS and issubclass(ALGORITHMS[name], Method)


def supported_methods() -> list[str]:
    """The methods this adapter runs, sorted: those of :data:`SPLITS` and every method on the public surface."""
    return sorted(set(SPLITS) | {name for name in ALGORITHMS if _on_surface(name)})


def split_for(algorithm: Algorithm) -> Split:
    """The :class:`Split` of ``algorithm``; raises :class:`UnsupportedMethod` (one line) otherwise."""
    check_method(algorithm.name)
    return SPLITS.get(algorithm.name, _surface)(algorithm)


def check_method(name: str) -> None:
    """Raise :class:`UnsupportedMethod` with a one-line reason unless the method ``name`` runs in Flower."""
    if name in SPLITS or _on_surface(name):
        return
    reason = REFUSALS.get(name, "not ported to Flower yet")
    raise UnsupportedMethod(f"gflkit.flower: method {name!r} is not supported in Flower: {reason}; "
                            f"supported: {', '.join(supported_methods())}")


__all__ = ["GLOBAL", "OWN_ROW", "REFUSALS", "SPLITS", "Slot", "Split", "UnsupportedMethod", "check_method",
           "split_for", "supported_methods"]
