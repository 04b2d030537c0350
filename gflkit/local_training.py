"""Local training of a federation's clients: which path trains them, their optimisers, the state they keep.

A :class:`LocalTraining` belongs to one :class:`~gflkit.federation.Federation` and does one job: given
clients, their start rows and a loss term, return their trained rows. It chooses between the two loops that
compute the same numbers — the sequential reference loop (:func:`gflkit.training.local_sgd`, one client
after the other through the federation's working module) and batched training
(:func:`gflkit.batched.train_batched`, every client's step as one vectorised computation) — and holds what
that needs between calls: the optimisers built per :class:`~gflkit.training.TrainConfig`, the optimiser
state a client keeps between its trainings (``optimizer_state="persistent"``), and the paths taken since
the engine last asked (for the run's records).

The federation keeps the data and the ``K × d`` state and builds its own :class:`LocalTraining` over itself
(``fed.trainer``); algorithms call
:meth:`Federation.train <gflkit.federation.Federation.train>` /
:meth:`~gflkit.federation.Federation.train_clients`, which delegate here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import torch
from torch import Tensor

from gflkit.allocator import keep_freed_blocks
from gflkit.batched import batching_obstacle, slower_than_sequential, train_batched
from gflkit.seeding import TORCH_GLOBAL, derive_seed, generator, seed_global_rng
from gflkit.training import LocalResult, LossTerm, Proximal, TrainConfig, local_sgd, make_optimizer

if TYPE_CHECKING:  # pragma: no cover
    from gflkit.federation import Federation

#: the paths :attr:`LocalTraining.mode` may name
LOCAL_TRAINING = ("auto", "batched", "sequential")


class LocalTraining:
    """How one federation's clients train locally, and the state that training keeps.

    Args:
        fed: the federation whose clients (data, working module, seed, task) this trains; its optimisers are
            bound to that federation's working module.
        mode: ``"auto"`` (default: batched, :mod:`gflkit.batched`, wherever it applies, else one client
            after another), ``"batched"`` (an error where it does not apply) or ``"sequential"`` (always
            one after another, the reference loop).
        client_chunk: how many clients one batched step holds (None: as many as fit a memory budget).

    Attributes:
        paths: the paths training took since the engine last emptied it (``"batched"`` / ``"sequential"``),
            for the run's records.
        optimizer_states: per ``(client, stream)``, the optimiser state a client keeps between its local
            trainings (``optimizer_state="persistent"``): one dict of state tensors per model parameter.
    """

    def __init__(self, fed: Federation, mode: str = "auto", client_chunk: int | None = None):
        self.fed = fed
        self.mode = mode
        self.client_chunk = client_chunk
        self.paths: set[str] = set()
        self.optimizer_states: dict[tuple[int, int], list[dict[str, Tensor]]] = {}
        self._optimizers: dict[TrainConfig, torch.optim.Optimizer] = {}
        keep_freed_blocks()  # training allocates and frees the same large tensors at every step

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
        """The sequential loop: ``client`` trained from the row ``start``
        (:meth:`Federation.train <gflkit.federation.Federation.train>` says what each argument does)."""
        self.paths.add("sequential")
        fed = self.fed
        flat = fed.flat
        flat.load(start)
        seed_global_rng(derive_seed(fed.seed, round, client, stream, TORCH_GLOBAL), fed.device)
        config = config or fed.train_config
        order = generator(fed.seed, round, client, stream)
        optimizer = self.optimizer(config)
        persistent = config.optimizer_state == "persistent"
        if persistent:
            self._restore_optimizer_state(optimizer, (client, stream))
        if extra_parameters:
            optimizer.add_param_group({"params": list(extra_parameters)})
        try:
            loss = local_sgd(flat, fed.task.loss, lambda: fed.batches(client, "train", order, config.batch_size),
                             config, loss_term, client, round, optimizer, context, proximal)
        finally:
            if extra_parameters:
                del optimizer.param_groups[1:]
                for tensor in extra_parameters:
                    optimizer.state.pop(tensor, None)
        if persistent:
            self.optimizer_states[(client, stream)] = [dict(optimizer.state[p]) for p in flat.parameters]
        return LocalResult(flat.vector.detach().clone(), loss)

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
        """Several clients, batched where :attr:`mode` and :func:`~gflkit.batched.batching_obstacle`
        allow it, else one after the other (:meth:`Federation.train_clients
        <gflkit.federation.Federation.train_clients>` says what each argument does)."""
        fed = self.fed
        clients = [int(k) for k in clients]
        config = config or fed.train_config
        contexts = list(contexts) if contexts is not None else [{} for _ in clients]
        if self.mode not in LOCAL_TRAINING:
            raise ValueError(f"unknown local_training {self.mode!r}; choose one of {list(LOCAL_TRAINING)}")
        obstacle = batching_obstacle(fed, config, contexts) if batchable else "the method's local step is not batched"
        if obstacle is None and self.mode == "auto":
            obstacle = slower_than_sequential(fed, clients)
        if self.mode == "batched" and obstacle is not None:
            raise ValueError(f"local_training='batched' cannot apply: {obstacle}; use 'auto' to fall back to "
                             "sequential training where batching does not apply")
        if obstacle is not None or self.mode == "sequential":
            return [self.train(k, round, start, loss_term, stream, config, context=context, proximal=proximal)
                    for k, start, context in zip(clients, starts, contexts)]
        self.paths.add("batched")
        return train_batched(fed, clients, round, starts, loss_term, contexts, stream, config, self.client_chunk,
                             proximal)

    def optimizer(self, config: TrainConfig) -> torch.optim.Optimizer:
        """The optimiser of the federation's working module for ``config``, built once and emptied before each
        use."""
        if config not in self._optimizers:
            self._optimizers[config] = make_optimizer(self.fed.flat.parameters, config)
        optimizer = self._optimizers[config]
        optimizer.state.clear()
        return optimizer

    def _restore_optimizer_state(self, optimizer: torch.optim.Optimizer, owner: tuple[int, int]) -> None:
        """Load the state ``owner`` = (client, stream) kept after its previous training (copies: a
        training that fails half-way leaves the kept state untouched)."""
        for parameter, state in zip(self.fed.flat.parameters, self.optimizer_states.get(owner, ())):
            optimizer.state[parameter] = {name: value.clone() for name, value in state.items()}
