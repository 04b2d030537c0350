r"""The strategy interface every method implements: configure → client step → aggregate.

A method is a small class with

* ``Params``: a dataclass of its hyper-parameters (its published defaults);
* :meth:`Algorithm.setup`: the server's initial state;
* :meth:`Algorithm.configure`: the model vector a client starts local training from;
* :meth:`Algorithm.local_loss`: an optional extra loss term of local training (declared by
  ``adds_local_loss = True``), reading the client's
  parameters from ``step.params`` and what differs between clients from ``step.context``
  (:meth:`Algorithm.local_context`), so that it runs in the batched loop too;
* :meth:`Algorithm.proximal`: an optional proximal term :math:`\frac{\rho}{2}\lVert w - a\rVert^2` whose gradient
  both loops add directly (:class:`~gflkit.training.Proximal`; the anchor :math:`a` from the local context);
* :meth:`Algorithm.train_clients`: the client step of the sampled clients (by default the shared local
  loop from :meth:`configure` with :meth:`local_loss` and :meth:`proximal`, batched where it applies, then
  :meth:`finish_client` per client); :meth:`Algorithm.client_update` is the same step for one client;
* :meth:`Algorithm.aggregate`: the server update from the returned vectors;
* :meth:`Algorithm.evaluation_models`: the model the server holds for each client (the ``"server"``
  evaluation protocol);
* :meth:`Algorithm.trained_model`: the model a client holds after its local training (the ``"local"``
  protocol);
* :meth:`Algorithm.communication`: the float32 values a participating client sends up and receives per
  round (:mod:`gflkit.communication`; by default one model vector each way).

State lives in the :class:`~gflkit.federation.Federation` (``models``, ``global_model``) plus whatever
tensors a method adds; :meth:`state_dict` returns the latter so that checkpoints are complete.

**Batched local training** (:mod:`gflkit.batched`): a method whose client step is the default one opts
in with ``batchable = True`` once its :meth:`local_loss` takes everything per client from
``step.context``; a method whose step is written for one client overrides :meth:`client_update` and
declares ``client_step = "one_by_one"``: its clients train one after another.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import torch
from torch import Tensor

from gflkit.communication import Communication
from gflkit.federation import Federation, LocalResult
from gflkit.training import LocalStep, LossTerm, Proximal


@dataclasses.dataclass(frozen=True)
class NoParams:
    """Hyper-parameters of a method that has none."""


def make_params(params_type: type, options: dict[str, Any], owner: str) -> Any:
    """Build ``params_type`` from ``options``, rejecting unknown names with the list of valid ones.

    ``owner`` names what the options are for in the message, e.g. ``"method 'fedprox'"``.
    """
    valid = {f.name for f in dataclasses.fields(params_type)}
    unknown = sorted(set(options) - valid)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {owner}; valid options: {sorted(valid) or 'none'}")
    return params_type(**options)


class Algorithm:
    """Base class of federated methods (see the module docstring for the protocol)."""

    name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    #: whether the default client step may train the sampled clients batched (see the module docstring)
    batchable: ClassVar[bool] = False
    #: how a round's client step runs: ``"together"`` — :meth:`train_clients` for every sampled client at once
    #: (batched where it applies) — or ``"one_by_one"`` — :meth:`client_update` per client, declared by a method
    #: whose step is written for one client
    client_step: ClassVar[str] = "together"
    #: whether :meth:`local_loss` adds a term to local training, declared by a method that defines one
    adds_local_loss: ClassVar[bool] = False
    #: the keys of :meth:`state_dict` whose shape or content changes during a run (histories that grow,
    #: state that appears after the first rounds); every other key keeps the structure, dtypes and shapes
    #: it has right after :meth:`setup`, which is what a checkpoint's state is checked against
    varying_state: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **options: Any):
        self.params = make_params(self.Params, options, f"method {self.name!r}")

    def check(self, num_clients: int) -> None:
        """Reject hyper-parameters that do not fit a federation of ``num_clients`` (nothing by default)."""

    # --- server state -------------------------------------------------------------------------
    def setup(self, fed: Federation) -> None:
        """Initial server state: by default a global model equal to the common initial model."""
        fed.global_model = fed.initial.clone()

    def state_dict(self) -> dict[str, Any]:
        """Method-specific state beyond ``fed.models`` / ``fed.global_model`` (for checkpoints)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def artifacts(self) -> dict[str, Tensor]:
        """Tensors worth keeping after a run (e.g. a learned client graph), stored beside its records."""
        return {}

    # --- one round ------------------------------------------------------------------------------
    def configure(self, fed: Federation, client: int) -> Tensor:
        """The vector ``client`` starts local training from: the global model if there is one."""
        return fed.global_model if fed.global_model is not None else fed.models[client]

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        """An extra term added to the task loss at every local step (none by default).

        Differentiate through ``step.params``; take whatever differs between clients from
        ``step.context`` (:meth:`local_context`), never from ``step.client``, so the term is batchable.
        """
        return None

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        """The tensors :meth:`local_loss` needs for ``client`` (its ``step.context``; none by default),
        e.g. the anchor a proximal term pulls towards."""
        return {}

    def proximal(self, fed: Federation) -> Proximal | None:
        r"""A proximal term :math:`\frac{\rho}{2}\lVert w - a\rVert^2` of local training, whose gradient the loops
        add directly (:class:`~gflkit.training.Proximal`: its weight and the :meth:`local_context` key of its
        anchor); None by default."""
        return None

    def loss_term(self, fed: Federation) -> LossTerm | None:
        """:meth:`local_loss` bound to ``fed`` as a loss term of the local loop, or None without one."""
        return (lambda step: self.local_loss(fed, step)) if self.adds_local_loss else None

    def train_clients(self, fed: Federation, clients: Tensor, round: int) -> list[LocalResult]:
        """The default client step of several clients: local training from :meth:`configure` with
        :meth:`local_loss` and :meth:`proximal` (batched where it applies, :meth:`Federation.train_clients`),
        then :meth:`finish_client` for each."""
        ids = [int(k) for k in clients]
        starts = torch.stack([self.configure(fed, k) for k in ids])
        contexts = [self.local_context(fed, k) for k in ids]
        results = fed.train_clients(ids, round, starts, self.loss_term(fed), contexts, batchable=self.batchable,
                                    proximal=self.proximal(fed))
        return [self.finish_client(fed, k, result) for k, result in zip(ids, results)]

    def finish_client(self, fed: Federation, client: int, result: LocalResult) -> LocalResult:
        """What a client does after its local training (keep its model, ...); returns what it uploads."""
        return result

    def client_update(self, fed: Federation, client: int, round: int) -> LocalResult:
        """One client's work in a round (by default :meth:`train_clients` for that client alone)."""
        return self.train_clients(fed, torch.tensor([client]), round)[0]

    def round_updates(self, fed: Federation, clients: Tensor, round: int) -> list[LocalResult]:
        """Every sampled client's work in a round: :meth:`train_clients`, or :meth:`client_update` for one
        client after the other when the method's :attr:`client_step` is ``"one_by_one"``."""
        if self.client_step == "one_by_one":
            return [self.client_update(fed, int(k), round) for k in clients]
        return self.train_clients(fed, clients, round)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        """Server update from the sampled ``clients`` and their returned vectors (rows of ``updates``)."""
        raise NotImplementedError

    def evaluation_models(self, fed: Federation) -> Tensor:
        """The model the server holds for each client after aggregation (the ``"server"`` protocol):
        ``K × d``, or one shared vector of length ``d``."""
        return fed.models

    def trained_model(self, fed: Federation, client: int, result: LocalResult) -> Tensor:
        """The model ``client`` holds after its local training this round (the ``"local"`` protocol):
        by default the vector it trained, before the channel corrupts its upload."""
        return result.vector

    # --- cost -------------------------------------------------------------------------------------
    def communication(self, fed: Federation) -> Communication:
        """Float32 values a participating client sends up and receives per round, after :meth:`setup`
        (counting rules: :mod:`gflkit.communication`): by default its model down and its trained model up,
        ``d`` each way."""
        return Communication.both(fed.dim)


def weighted_mean(rows: Tensor, weights: Tensor) -> Tensor:
    r"""Weighted average of rows, :math:`\sum_k p_k x_k` with :math:`p_k = w_k / \sum_j w_j`."""
    return (weights / weights.sum()) @ rows


__all__ = ["Algorithm", "NoParams", "make_params", "weighted_mean"]
