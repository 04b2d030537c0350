"""The clients' data and the stacked model state.

A :class:`Federation` holds

* the pooled samples ``x``, ``y`` on one device and, per client, index tensors of its train and test
  samples (no per-client copies of the data);
* the model state: ``models``, a ``K × d`` tensor whose row ``k`` is client ``k``'s model, and an
  optional ``global_model`` vector for methods that have one;
* one working module bound to a flat vector (:class:`~gflkit.state.FlatModule`) through which every
  row is trained and evaluated.

Methods read and write ``models`` / ``global_model`` directly: aggregation is linear algebra on rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from torch import Tensor

from gflkit.channel import Channel
from gflkit.models.base import FeatureModel
from gflkit.seeding import TORCH_GLOBAL, derive_seed, generator, seed_global_rng
from gflkit.state import FlatModule, Layout
from gflkit.tasks import ClassificationTask, add_sums
from gflkit.training import LossTerm, TrainConfig, local_sgd, make_sgd


@dataclass
class LocalResult:
    """A client's trained model vector and its mean training loss."""

    vector: Tensor
    loss: float


class Federation:
    """K clients over shared data tensors, with their models stacked as a ``K × d`` matrix.

    Args:
        x, y: all samples and labels (moved to ``device``).
        train_indices, test_indices: per client, indices into ``x`` / ``y``.
        model: the working module; its initial weights become every client's initial row.
        task: loss and metrics.
        train_config: local-training hyper-parameters.
        seed: seed of every random stream of local training.
        device: where data, models and training live.
        eval_batch_size: batch size of evaluation passes.
        client_graph: a ``K × K`` graph over the clients that comes with the data (METR-LA's road
            network between sensor clients), or ``None``; methods may use it as their given graph.
        channel: the uplink that corrupts uploads before aggregation (perfect by default).
    """

    def __init__(
        self,
        x: Tensor,
        y: Tensor,
        train_indices: Sequence[Tensor],
        test_indices: Sequence[Tensor],
        model: FeatureModel,
        task: ClassificationTask,
        train_config: TrainConfig,
        seed: int = 0,
        device: torch.device | str = "cpu",
        eval_batch_size: int = 2048,
        client_graph: Tensor | None = None,
        channel: Channel = Channel(),
    ):
        if len(train_indices) != len(test_indices):
            raise ValueError(
                f"got {len(train_indices)} train and {len(test_indices)} test index sets: one of each per client"
            )
        if len(train_indices) == 0:
            raise ValueError("a federation needs at least one client")
        self.device = torch.device(device)
        self.x, self.y = x.to(self.device), y.to(self.device)
        self.train_indices = [idx.to(self.device) for idx in train_indices]
        self.test_indices = [idx.to(self.device) for idx in test_indices]
        self.num_train = torch.tensor([len(i) for i in train_indices], dtype=torch.float32, device=self.device)
        self.num_test = torch.tensor([len(i) for i in test_indices], dtype=torch.float32, device=self.device)
        self.task = task
        self.train_config = train_config
        self.seed = seed
        self.eval_batch_size = eval_batch_size
        if client_graph is not None and tuple(client_graph.shape) != (len(train_indices),) * 2:
            raise ValueError(f"client_graph must be {len(train_indices)} × {len(train_indices)} (one row per "
                             f"client), got shape {tuple(client_graph.shape)}")
        self.client_graph = None if client_graph is None else client_graph.to(self.device)
        self.flat = FlatModule(model.to(self.device))
        self.initial = self.flat.vector.detach().clone()
        self.models = self.initial.repeat(self.num_clients, 1)
        self.global_model: Tensor | None = None
        self.channel = channel
        self.upload_mask: Tensor | None = None  # entries received in the latest upload (None: all)
        self._optimizers: dict[TrainConfig, torch.optim.SGD] = {}

    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.train_indices)

    @property
    def dim(self) -> int:
        """Length d of a model vector."""
        return self.flat.layout.dim

    @property
    def layout(self) -> Layout:
        """Where each named tensor of the model sits in a model vector."""
        return self.flat.layout

    def client_data(self, client: int, split: str = "train") -> tuple[Tensor, Tensor]:
        """The samples and labels of one client's ``"train"`` or ``"test"`` split."""
        indices = {"train": self.train_indices, "test": self.test_indices}[split][client]
        return self.x[indices], self.y[indices]

    def train(
        self,
        client: int,
        round: int,
        start: Tensor,
        loss_term: LossTerm | None = None,
        stream: int = 0,
        config: TrainConfig | None = None,
    ) -> LocalResult:
        """Local training of ``client`` from the model vector ``start``.

        ``stream`` separates several trainings of the same client in one round (Ditto trains a global
        and a personal model) so that each draws its own minibatch order.
        """
        self.flat.load(start)
        seed_global_rng(derive_seed(self.seed, round, client, stream, TORCH_GLOBAL), self.device)
        config = config or self.train_config
        loss = local_sgd(
            self.flat,
            self.task.loss,
            self.x,
            self.y,
            self.train_indices[client],
            config,
            generator(self.seed, round, client, stream),
            loss_term,
            client,
            round,
            self._optimizer(config),
        )
        return LocalResult(self.flat.vector.detach().clone(), loss)

    def upload(self, clients: Tensor, vectors: Tensor, round: int) -> Tensor:
        """What the server receives when ``clients`` upload the rows of ``vectors`` through the channel.

        Sets :attr:`upload_mask` (rows aligned with ``clients``; ``None`` when no entry was lost).
        """
        reference_scale = float(self.initial.abs().mean())
        received, self.upload_mask = self.channel.transmit(vectors, clients, round, self.seed, reference_scale)
        return received

    def _optimizer(self, config: TrainConfig) -> torch.optim.SGD:
        """The working module's optimiser for ``config``, built once and emptied before each use."""
        if config not in self._optimizers:
            self._optimizers[config] = make_sgd(self.flat.parameters, config)
        optimizer = self._optimizers[config]
        optimizer.state.clear()
        return optimizer

    @torch.no_grad()
    def evaluate(self, models: Tensor, split: str = "test") -> list[dict[str, float]]:
        """Metrics of every client's model on its own ``split``.

        ``models`` is either ``K × d`` (one model per client) or a single vector of length ``d``
        shared by all clients (then the model is loaded once). Returns one dict per client with
        ``accuracy``, ``loss`` and ``num_samples``.
        """
        shared = models.dim() == 1
        indices = {"train": self.train_indices, "test": self.test_indices}[split]
        model = self.flat.module
        model.eval()
        if shared:
            self.flat.load(models)
        results = []
        for client, idx in enumerate(indices):
            if not shared:
                self.flat.load(models[client])
            sums: dict[str, float] = {"correct": 0.0, "loss_sum": 0.0, "count": 0.0}
            for start in range(0, len(idx), self.eval_batch_size):
                batch = idx[start : start + self.eval_batch_size]
                sums = add_sums(sums, self.task.evaluate(model(self.x[batch]), self.y[batch]))
            results.append({**self.task.finalize(sums), "num_samples": int(sums["count"])})
        return results

    @torch.no_grad()
    def client_metrics(self, client: int, model: Tensor, split: str = "train") -> dict[str, float]:
        """Metrics (``accuracy``, ``loss``, ``num_samples``) of one model vector on one client's ``split``.

        What :meth:`evaluate` reports for that client, without touching the others: e.g. IFCA's
        cluster choice, the training loss of each cluster model on the client's own data.
        """
        idx = {"train": self.train_indices, "test": self.test_indices}[split][client]
        model_module = self.flat.module
        model_module.eval()
        self.flat.load(model)
        sums: dict[str, float] = {"correct": 0.0, "loss_sum": 0.0, "count": 0.0}
        for start in range(0, len(idx), self.eval_batch_size):
            batch = idx[start : start + self.eval_batch_size]
            sums = add_sums(sums, self.task.evaluate(model_module(self.x[batch]), self.y[batch]))
        return {**self.task.finalize(sums), "num_samples": int(sums["count"])}
