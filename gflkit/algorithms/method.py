r"""Writing a method of your own: a local penalty and an aggregation, the engine does the rest.

Most federated methods change one or two things in FedAvg's round: what a client minimises, and how the
server combines what the clients send. :class:`Method` is FedAvg with those two places open:

.. math::
    \text{client } k:\quad \min_w\; f_k(w) + \texttt{local\_penalty}(w, w^{\text{start}}_k)
    + \tfrac{\rho}{2}\lVert w - w^{\text{start}}_k\rVert^2
    \qquad\qquad
    \text{server:}\quad \texttt{aggregate\_models}(w_{k_1}, \dots, w_{k_n}) \to
    \begin{cases} w & \text{one global model} \\ \tilde w_{k_1}, \dots, \tilde w_{k_n} &
    \text{one model per client (}\texttt{personalised = True}\text{)} \end{cases}

* :meth:`Method.local_penalty` is written for **one** model: ``w`` and ``start`` map each parameter's name
  (as in ``model.named_parameters()``) to its tensor. The engine trains every sampled client with it — many at
  once where the clients can be batched, which the penalty never has to know about. A proximal pull towards the
  start, :math:`\rho` from :meth:`Method.proximal_weight`, needs no penalty: the engine adds its gradient
  :math:`\rho\,(w - w^{\text{start}})` directly, which is cheaper than differentiating it.
* :meth:`Method.aggregate_models` sees the uploads as rows of a matrix (``n × d``, one flat model per sampled
  client) with :class:`Uploads` telling whose they are, how much data each holds, the round, the given client
  graph (if the data come with one) and a random stream of the method's own.

The engine does the rest: client sampling, seeding, batched local training, the uplink's noise, checkpoints and
resuming, both evaluation protocols and the records. Register the class with
:func:`~gflkit.algorithms.register_method` and it runs by name in ``RunConfig``, the result store, the Ray
executor and — from a package that declares it as a ``gflkit.methods`` entry point — the Flower app.
FedProx (:mod:`gflkit.algorithms.fedprox`) and FedAtt (:mod:`gflkit.algorithms.fedatt`) are written this way.
Methods that need more (extra state on the clients, several round trips, their own local loop) subclass
:class:`~gflkit.algorithms.base.Algorithm` directly.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from gflkit.algorithms.base import weighted_mean
from gflkit.algorithms.fedavg import FedAvg
from gflkit.federation import Federation
from gflkit.seeding import generator
from gflkit.state import Layout
from gflkit.training import LocalStep, Proximal


@dataclass(frozen=True)
class Uploads:
    """What the server holds when it aggregates a round (the argument of :meth:`Method.aggregate_models`).

    Attributes:
        models: ``n × d``, row ``i`` the flat model client ``clients[i]`` uploaded (after the uplink).
        clients: the ids of the sampled clients (``n``).
        sizes: their numbers of training samples :math:`n_k` (``n``, float).
        current: what the server held before this round: the global model (``d``), or for a personalised
            method the sampled clients' models (``n × d``).
        round: the round, from 1.
        layout: where each named tensor sits in a flat model (``layout.entries``, each with its ``slice``;
            ``layout.split(vector)`` gives a vector's tensors by name).
        graph: the client graph that comes with the data (``K × K``, e.g. METR-LA's roads), or None.
        random: a generator of the method's own for this round (seeded by the run's seed, the method and the
            round, so reruns and resumed runs draw the same numbers).
    """

    models: Tensor
    clients: Tensor
    sizes: Tensor
    current: Tensor
    round: int
    layout: Layout
    graph: Tensor | None
    random: torch.Generator

    def weighted_mean(self) -> Tensor:
        r"""FedAvg's aggregate :math:`\sum_k \frac{n_k}{\sum_j n_j} w_k` of the uploads (``d``)."""
        return weighted_mean(self.models, self.sizes)


class Method(FedAvg):
    """A method written as a local penalty and an aggregation (see the module docstring).

    Subclass it, give it a ``name`` (and a frozen dataclass ``Params`` of hyper-parameters, read as
    ``self.params``), override any of :meth:`local_penalty`, :meth:`proximal_weight` and
    :meth:`aggregate_models`, and set ``personalised = True`` when the server keeps one model per client instead
    of one global model. A
    ``Params`` with a ``share`` field (:class:`~gflkit.algorithms.sharing.SharingParams`) gives partial sharing
    as in FedAvg; without one everything is shared.
    """

    #: whether the server keeps one model per client (``aggregate_models`` returns ``n × d``, each client
    #: starts from and is scored with its own row) instead of one global model (returns ``d``)
    personalised: ClassVar[bool] = False
    #: the key of the method's random stream (:attr:`Uploads.random`); by default derived from ``name``
    stream: ClassVar[int | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.adds_local_loss = cls.local_penalty is not Method.local_penalty

    # --- the places a method changes -------------------------------------------------------------

    def local_penalty(self, w: dict[str, Tensor], start: dict[str, Tensor], round: int) -> Tensor | None:
        """A term added to one client's training loss at every local step (none by default).

        ``w`` maps each trainable parameter's name to the client's current tensor (differentiate through it),
        ``start`` to the model the client started the round from (constants); ``round`` counts from 1.
        """
        return None

    def proximal_weight(self) -> float | None:
        r"""The weight :math:`\rho` of a proximal term :math:`\frac{\rho}{2}\lVert w - w^{\text{start}}\rVert^2`
        in every client's objective, or None (the default) for none. The engine adds its gradient directly."""
        return None

    def aggregate_models(self, uploads: Uploads) -> Tensor:
        """The server's new model(s) from a round's :class:`Uploads`: the global model (``d``), or with
        ``personalised = True`` one model per sampled client (``n × d``, in ``uploads.clients``' order).
        By default FedAvg's weighted mean (:meth:`Uploads.weighted_mean`)."""
        return uploads.weighted_mean()

    # --- the engine's side ----------------------------------------------------------------------
    @property
    def share(self) -> str:
        """Which entries leave the client: ``Params.share`` where the method has one, else ``"all"``."""
        return getattr(self.params, "share", "all")

    def setup(self, fed: Federation) -> None:
        if self.personalised and self.partial:
            raise ValueError(f"method {self.name!r}: a personalised method keeps whole models per client; "
                             f"use share='all', not {self.share!r}")
        super().setup(fed)
        if self.personalised:
            fed.global_model = None

    def configure(self, fed: Federation, client: int) -> Tensor:
        """The client's own row when personalised, else FedAvg's start (the global model)."""
        return fed.models[client] if self.personalised else super().configure(fed, client)

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        needs_start = self.adds_local_loss or self.proximal_weight() is not None
        return {"start": self.configure(fed, client)} if needs_start else {}

    def proximal(self, fed: Federation) -> Proximal | None:
        weight = self.proximal_weight()
        return None if weight is None else Proximal(weight, "start")

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        names = fed.layout.parameter_names
        start = fed.flat.parameters_as_views(step.context["start"])
        return self.local_penalty(dict(zip(names, step.params)), dict(zip(names, start)), step.round)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        current = fed.models[clients] if self.personalised else fed.global_model
        key = self.stream if self.stream is not None else 2**32 + zlib.crc32(self.name.encode())
        uploads = Uploads(updates, clients, fed.num_train[clients], current, round, fed.layout, fed.client_graph,
                          generator(fed.seed, key, round))
        new = self.aggregate_models(uploads)
        expected = (len(clients), fed.dim) if self.personalised else (fed.dim,)
        if tuple(new.shape) != expected:
            raise ValueError(f"method {self.name!r}: aggregate_models returned shape {tuple(new.shape)}, expected "
                             f"{expected} ({'one model per sampled client' if self.personalised else 'one model'})")
        if self.personalised:
            fed.models[clients] = new
        else:
            self.set_global_model(fed, clients, updates, new)

    def evaluation_models(self, fed: Federation) -> Tensor:
        return fed.models if self.personalised else super().evaluation_models(fed)


__all__ = ["Method", "Uploads"]
