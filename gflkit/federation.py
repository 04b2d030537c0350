"""A federation: its clients' data, the stacked model state, local training and evaluation.

A :class:`Federation` composes

* the clients' data (``data``, a :class:`~gflkit.client_data.ClientData`: sample clients over pooled
  tensors, subgraph clients in :class:`GraphFederation`, or only the clients' counts in the server's
  :class:`ServerFederation`), which it hands out as ``(input, targets)`` batches (:meth:`Federation.batches`);
* the model state: ``models``, a ``K × d`` tensor whose row ``k`` is client ``k``'s model, and an
  optional ``global_model`` vector for methods that have one, with the uplink they travel through
  (:meth:`Federation.upload`);
* one working module bound to a flat vector (:class:`~gflkit.state.FlatModule`) through which every
  row is trained and evaluated (:meth:`Federation.evaluate`);
* its local training (``trainer``, a :class:`~gflkit.local_training.LocalTraining`): the batched or
  sequential path, the optimisers and the optimiser state clients keep — :meth:`Federation.train` and
  :meth:`Federation.train_clients`, the algorithms' entry points, delegate to it.

Methods read and write ``models`` / ``global_model`` directly: aggregation is linear algebra on rows.
"""
from __future__ import annotations

import copy
from typing import Iterator, Sequence

import torch
from torch import Tensor

from gflkit.batched import FeaturesAndLogits
from gflkit.channel import Channel
from gflkit.client_data import ClientData, GraphClients, NoClientData, SampleClients
from gflkit.local_training import LocalTraining
from gflkit.models.base import FeatureModel
from gflkit.state import FlatModule, Layout
from gflkit.data.subgraphs import ClientGraph
from gflkit.tasks import GraphTask, Task, add_sums
from gflkit.training import Batch, LocalResult, LossTerm, Proximal, TrainConfig


# The :type: fields name the classes' full paths for Sphinx: an annotation of a class's __init__ reaches the API
# reference as written (``FeatureModel``), which is ambiguous there (gflkit.models re-exports it).
class Federation:
    """K clients over shared data tensors, with their models stacked as a ``K × d`` matrix.

    The attributes listed below are set after construction, not by an argument.

    Args:
        x, y: all samples and labels (moved to ``device``).
        train_indices, test_indices: per client, indices into ``x`` / ``y``.
        model: the working module; its initial weights become every client's initial row.
        task: loss and metrics (a sample task: classification or forecasting).
        train_config: local-training hyper-parameters.
        seed: seed of every random stream of local training.
        device: where data, models and training live.
        eval_batch_size: batch size of evaluation passes.
        client_graph: a ``K × K`` graph over the clients that comes with the data (METR-LA's road
            network between sensor clients), or ``None``; methods may use it as their given graph.
        channel: the uplink that corrupts uploads before aggregation (perfect by default).
        held_out: a ``(K,)`` boolean mask of unseen test clients, which are never sampled to train
            (:func:`~gflkit.data.partition.hold_out_clients`); none by default.

    Attributes:
        data: the clients' data (:class:`~gflkit.client_data.SampleClients` here): ``x``, ``y``, the clients'
            ``train_indices`` / ``test_indices``.
        trainer: the clients' local training (:class:`~gflkit.local_training.LocalTraining`): its ``mode``
            (``"auto"`` by default: batched wherever it applies), ``client_chunk``, the ``paths`` it took and
            the ``optimizer_states`` clients keep between trainings.

    :type model: ~gflkit.models.base.FeatureModel
    """

    def __init__(
        self,
        x: Tensor,
        y: Tensor,
        train_indices: Sequence[Tensor],
        test_indices: Sequence[Tensor],
        model: FeatureModel,
        task: Task,
        train_config: TrainConfig,
        seed: int = 0,
        device: torch.device | str = "cpu",
        eval_batch_size: int = 2048,
        client_graph: Tensor | None = None,
        channel: Channel = Channel(),
        held_out: Tensor | None = None,
    ):
        data = SampleClients(x, y, train_indices, test_indices, device, eval_batch_size)
        self._setup(data, model, task, train_config, seed, device, channel)
        if client_graph is not None and tuple(client_graph.shape) != (self.num_clients,) * 2:
            raise ValueError(f"client_graph must be {self.num_clients} × {self.num_clients} (one row per "
                             f"client), got shape {tuple(client_graph.shape)}")
        self.client_graph = None if client_graph is None else client_graph.to(self.device)
        if held_out is not None:
            if tuple(held_out.shape) != (self.num_clients,) or held_out.dtype != torch.bool:
                raise ValueError(f"held_out must be a boolean mask with one entry per client ({self.num_clients}), "
                                 f"got dtype {held_out.dtype} and shape {tuple(held_out.shape)}")
            if bool(held_out.all()):
                raise ValueError("every client is held out: at least one client must train")
            self.held_out = held_out.cpu()

    def _setup(self, data: ClientData, model: FeatureModel, task: Task | None, train_config: TrainConfig,
               seed: int, device: torch.device | str, channel: Channel) -> None:
        """The parts every federation shares: its data, counts, working module, ``K × d`` models, channel."""
        self.data = data
        self.device = torch.device(device)
        self.num_train = torch.tensor(data.num_train, dtype=torch.float32, device=self.device)
        self.num_test = torch.tensor(data.num_test, dtype=torch.float32, device=self.device)
        self.task = task
        self.train_config = train_config
        self.seed = seed
        self.client_graph: Tensor | None = None
        self.held_out = torch.zeros(data.num_clients, dtype=torch.bool)
        self.flat = FlatModule(model.to(self.device))
        self._reference = FlatModule(copy.deepcopy(self.flat.module))  # second working module (representations)
        self.initial = self.flat.vector.detach().clone()
        self.models = self.initial.repeat(data.num_clients, 1)
        self.global_model: Tensor | None = None
        self.channel = channel
        self.upload_mask: Tensor | None = None  # entries received in the latest upload (None: all)
        self.trainer = LocalTraining(self)
        self._reference_forward = FeaturesAndLogits(self._reference.module)

    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.num_train)

    @property
    def training_clients(self) -> Tensor:
        """The ids of the clients that may be sampled to train (all but the held-out ones), sorted."""
        return torch.nonzero(~self.held_out).flatten()

    @property
    def dim(self) -> int:
        """Length d of a model vector."""
        return self.flat.layout.dim

    @property
    def layout(self) -> Layout:
        """Where each named tensor of the model sits in a model vector."""
        return self.flat.layout

    def holds_data(self, client: int) -> bool:
        """Whether this copy of the federation holds ``client``'s samples (all of them, unless
        :meth:`keep_only` dropped the others, as a node of a deployment does; never on a server)."""
        return self.data.holds(client)

    def keep_only(self, client: int) -> None:
        """Drop every other client's samples (:meth:`~gflkit.client_data.SampleClients.keep_only`): what the
        node of ``client`` holds in a deployment. Everything but the data is unchanged (the ``K × d`` state,
        counts, held-out mask)."""
        self.data.keep_only(client)

    def train_label_counts(self) -> Tensor:
        """The ``K × C`` label counts of the clients' train splits (a label-sharing graph's side information)."""
        return self.data.train_label_counts()

    def client_data(self, client: int, split: str = "train") -> tuple[object, Tensor]:
        """The model input and targets of one client's ``split`` (samples and labels; a subgraph and its
        targets)."""
        return self.data.client_data(client, split)

    def batches(self, client: int, split: str, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Batch]:
        """One pass over a client's ``split`` as ``(input, targets)`` batches: with a ``generator``, shuffled
        minibatches of ``batch_size`` (a training epoch); without, the split in order (evaluation)."""
        return self.data.batches(client, split, generator, batch_size)

    def train(
        self,
        client: int,
        round: int,
        start: Tensor,
        loss_term: LossTerm | None = None,
        stream: int = 0,
        config: TrainConfig | None = None,
        extra_parameters: Sequence[Tensor] = (),
        context: dict[str, Tensor] | None = None,
        proximal: Proximal | None = None,
    ) -> LocalResult:
        """Local training of ``client`` from the model vector ``start``.

        ``stream`` separates several trainings of the same client in one round (Ditto trains a global
        and a personal model) so that each draws its own minibatch order. ``extra_parameters`` are
        leaf tensors outside the model that the same optimiser steps alongside it for this training
        only (FED-PUB's sparse masks, which a method applies to the working module itself); their
        optimiser state is never kept. ``context`` is the loss term's ``step.context``. ``proximal`` is a
        proximal term added as its gradient (:class:`~gflkit.training.Proximal`, anchor read from ``context``).
        """
        return self.trainer.train(client, round, start, loss_term, stream, config, extra_parameters, context, proximal)

    def train_clients(
        self,
        clients: Sequence[int] | Tensor,
        round: int,
        starts: Tensor,
        loss_term: LossTerm | None = None,
        contexts: Sequence[dict[str, Tensor]] | None = None,
        stream: int = 0,
        config: TrainConfig | None = None,
        batchable: bool = True,
        proximal: Proximal | None = None,
    ) -> list[LocalResult]:
        """Local training of several clients, client ``clients[i]`` from the row ``starts[i]``.

        Batched (:func:`~gflkit.batched.train_batched`, the same numbers to floating-point tolerance)
        when the trainer's ``mode`` allows it and nothing stands in the way (:func:`~gflkit.batched.
        batching_obstacle`; ``batchable=False``: the caller's loss term is not written for it; under
        ``"auto"`` also where batching is slower, :func:`~gflkit.batched.slower_than_sequential`); otherwise
        :meth:`train` for one client after the other.
        ``contexts[i]`` is client ``clients[i]``'s loss-term context (``step.context``); ``proximal`` a proximal
        term added as its gradient (:class:`~gflkit.training.Proximal`, anchors read from the contexts).
        """
        return self.trainer.train_clients(clients, round, starts, loss_term, contexts, stream, config, batchable,
                                          proximal)

    @torch.no_grad()
    def representations(self, model: Tensor, x: object) -> Tensor:
        """``features(x)`` of the model vector ``model`` in eval mode, without gradient.

        Computed functionally on a second module, so the working module — and the autograd graph local
        training is building on it — stay untouched: what a loss term needs to compare the current
        representation with those of other models (MOON's global and previous models). ``model`` may be
        one client's row inside batched training.
        """
        named = {f"model.{name}": view for name, view in self._reference.layout.split(model.detach()).items()}
        return torch.func.functional_call(self._reference_forward.eval(), named, (x,))[0]

    def upload(self, clients: Tensor, vectors: Tensor, round: int) -> Tensor:
        """What the server receives when ``clients`` upload the rows of ``vectors`` through the channel.

        Sets :attr:`upload_mask` (rows aligned with ``clients``; ``None`` when no entry was lost).
        """
        reference_scale = float(self.initial.abs().mean())
        received, self.upload_mask = self.channel.transmit(vectors, clients, round, self.seed, reference_scale)
        return received

    @torch.no_grad()
    def evaluate(self, models: Tensor, split: str = "test") -> list[dict[str, float]]:
        """Metrics of every client's model on its own ``split``.

        ``models`` is either ``K × d`` (one model per client) or a single vector of length ``d``
        shared by all clients (then the model is loaded once). Returns one dict per client with the
        task's metrics (e.g. ``accuracy`` and ``loss``) and ``num_samples``.
        """
        shared = models.dim() == 1
        if shared:
            self.flat.load(models)
        return [self._measure(client, None if shared else models[client], split) for client in range(self.num_clients)]

    @torch.no_grad()
    def client_metrics(self, client: int, model: Tensor, split: str = "train") -> dict[str, float]:
        """Metrics (the task's, and ``num_samples``) of one model vector on one client's ``split``.

        What :meth:`evaluate` reports for that client, without touching the others: e.g. IFCA's
        cluster choice, the training loss of each cluster model on the client's own data.
        """
        return self._measure(client, model, split)

    def _measure(self, client: int, model: Tensor | None, split: str) -> dict[str, float]:
        """The task's metrics of ``model`` (None: the one already loaded) on ``client``'s ``split``."""
        if model is not None:
            self.flat.load(model)
        module = self.flat.module.eval()
        sums = {"correct": 0.0, "loss_sum": 0.0, "count": 0.0}  # what an empty split finalises to
        for inputs, targets, _ in self.batches(client, split):
            sums = add_sums(sums, self.task.evaluate(module(inputs), targets))
        return {**self.task.finalize(sums), "num_samples": int(sums.get("count", 0))}


# The :type: fields: as Federation's.
class GraphFederation(Federation):
    """K subgraph clients (:class:`~gflkit.data.subgraphs.ClientGraph`) with their models as a ``K × d`` matrix.

    Everything but the data is :class:`Federation`'s: the same state, training, upload and evaluation. The
    data is a :class:`~gflkit.client_data.GraphClients` (``data.graphs``, ``data.targets``, ``data.num_nodes``,
    ``data.replace_graph``): a pass over a split is one full batch, so a local epoch is one optimiser step on
    the client's subgraph (the "local iterations" of subgraph-FL papers) and ``batch_size`` is ignored.

    Args:
        clients: the subgraph clients, in client order (links needed for link prediction).
        model, task, train_config, seed, device, channel: as for :class:`Federation`.

    :type clients: Sequence[~gflkit.data.subgraphs.ClientGraph]
    :type model: ~gflkit.models.base.FeatureModel
    """

    def __init__(
        self,
        clients: Sequence[ClientGraph],
        model: FeatureModel,
        task: GraphTask,
        train_config: TrainConfig,
        seed: int = 0,
        device: torch.device | str = "cpu",
        channel: Channel = Channel(),
    ):
        self._setup(GraphClients(clients, task, device), model, task, train_config, seed, device, channel)


class ServerFederation(Federation):
    """The federation as a server of a deployment holds it: the clients' counts and the ``K × d`` state,
    no sample of any client.

    Built from what the clients report (sample counts, held-out flags, and — the side information a
    label-sharing graph needs — their train-label counts); everything an algorithm's ``configure`` /
    ``aggregate`` reads is there, and anything that would touch a client's samples raises.

    Args:
        num_train, num_test: per client, its train and test sample counts.
        model: the working module, initialised as every client's (the run's seeded initial model).
        train_config, seed, device, channel: as :class:`Federation`.
        held_out: the ``(K,)`` boolean mask of unseen test clients (none by default).
        label_counts: the ``K × C`` train-label counts, or None when the clients reported none.

    :type model: ~gflkit.models.base.FeatureModel
    """

    def __init__(self, num_train: Sequence[int], num_test: Sequence[int], model: FeatureModel,
                 train_config: TrainConfig, seed: int = 0, device: torch.device | str = "cpu",
                 channel: Channel = Channel(), held_out: Tensor | None = None, label_counts: Tensor | None = None):
        self._setup(NoClientData(num_train, num_test, label_counts, device), model, None, train_config, seed, device,
                    channel)
        if held_out is not None:
            self.held_out = held_out.cpu().bool()
