"""The one local-training loop: SGD (or Adam) over a client's batches.

Every method trains through :func:`local_sgd` (or its batched twin, :mod:`gflkit.batched`, which trains
many clients at once with the same numbers). A method changes local training only by passing a
``loss_term`` (FedProx's proximal term, Ditto's personal objective, FedSKA's cosine term, MOON's
contrastive term): a function of the current :class:`LocalStep` returning an extra loss or ``None``.
A term reads the client's parameters from ``step.params`` and anything per client from
``step.context``, so the same term runs in both loops.

What a batch is depends on the clients: shuffled minibatches of pooled samples (:func:`minibatches`,
image / text / sequence clients), or a client's whole subgraph, one full-batch step per local
iteration (graph clients, :class:`~gflkit.federation.GraphFederation`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence

import torch
from torch import Tensor

from gflkit.models.base import FeatureModel
from gflkit.state import FlatModule


OPTIMIZERS = ("sgd", "adam")
OPTIMIZER_STATES = ("fresh", "persistent")


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of local training shared by all methods.

    Attributes:
        epochs, batch_size, lr, weight_decay: the local passes, minibatch size, step size and L2 penalty.
        momentum: SGD's momentum (ignored by Adam).
        optimizer: ``"sgd"`` or ``"adam"`` (PyTorch's defaults β = (0.9, 0.999), ε = 1e-8).
        optimizer_state: ``"fresh"``: every local training starts from an empty optimiser state (what
            a stateless client of a simulation does); ``"persistent"``: each client keeps its
            optimiser's state (momentum buffers, Adam's moments and step count) from one of its local
            trainings to the next, as the official codes of FED-PUB, FedSage+ and GCFL+, where every
            client object builds its optimiser once.
    """

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    optimizer_state: str = "fresh"

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {list(OPTIMIZERS)}")
        if self.optimizer_state not in OPTIMIZER_STATES:
            raise ValueError(f"unknown optimizer_state {self.optimizer_state!r}; choose one of "
                             f"{list(OPTIMIZER_STATES)} ('fresh': empty state at every local training, "
                             "'persistent': each client keeps its optimiser state across rounds)")
        if self.epochs < 1:
            raise ValueError(f"local epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass
class LocalStep:
    """What a loss term may look at: the batch, its representation and its predictions.

    ``x`` is the model input of the batch: a tensor of samples, or a graph
    (:class:`torch_geometric.data.Data`) for graph clients. ``positions`` are the batch's samples'
    positions in the client's training split (row ``i`` of the batch is the client's sample
    ``positions[i]``), so a term can pair each sample with something the server sent for it (FedSKA's
    per-sample structure features); ``None`` for graph clients.

    ``params`` are the trainable parameters of the model being trained, in registration order (the
    working module's parameters, or under batched training one client's slices of the stacked rows);
    a term differentiates through them. ``context`` holds the per-client tensors the method provided
    for this training (:meth:`~gflkit.algorithms.base.Algorithm.local_context`, e.g. FedProx's anchor);
    a term must take everything that differs between clients from it, since under batched training
    ``client`` is ``-1`` (the step belongs to many clients at once).
    """

    client: int
    round: int
    model: FeatureModel
    x: Any
    y: Tensor
    features: Tensor
    logits: Tensor
    positions: Tensor | None = None
    params: Sequence[Tensor] = ()
    context: dict[str, Tensor] = field(default_factory=dict)


LossTerm = Callable[[LocalStep], Optional[Tensor]]


class Batch(NamedTuple):
    """One batch: the model input, its targets and (sample clients) the samples' positions in the split."""

    input: Any
    targets: Tensor
    positions: Tensor | None = None


def batch_positions(num_samples: int, batch_size: int, generator: torch.Generator | None = None,
                    device: torch.device | str | None = None) -> list[Tensor]:
    """The positions ``0 .. num_samples - 1`` of one pass, cut into batches of ``batch_size``.

    With a ``generator`` the order is a fresh random permutation (one training epoch); without, the
    positions in order (evaluation). The last batch holds the remainder.
    """
    positions = torch.arange(num_samples, device=device)
    if generator is not None:
        positions = torch.randperm(num_samples, generator=generator).to(device)
    return list(positions.split(batch_size))


def minibatches(x: Tensor, y: Tensor, indices: Tensor, batch_size: int,
                generator: torch.Generator | None = None) -> Iterator[Batch]:
    """One pass over the samples ``x[indices]``, ``y[indices]`` in batches of ``batch_size``.

    The order is :func:`batch_positions`'. Batches are gathered straight from the pooled tensors, so a
    client's data is never copied as a whole; each carries its samples' positions in ``indices``.
    """
    for chosen in batch_positions(len(indices), batch_size, generator, indices.device):
        batch = indices[chosen]
        yield Batch(x[batch], y[batch], chosen)


def make_optimizer(parameters: list[torch.nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    """The configured optimiser over ``parameters``: SGD (with momentum / weight decay) or Adam."""
    if config.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


def local_sgd(
    flat: FlatModule,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    epoch: Callable[[], Iterable[Batch]],
    config: TrainConfig,
    loss_term: LossTerm | None = None,
    client: int = -1,
    round: int = -1,
    optimizer: torch.optim.Optimizer | None = None,
    context: dict[str, Tensor] | None = None,
) -> float:
    r"""Train ``flat.module`` in place for ``config.epochs`` passes over ``epoch()``.

    ``epoch()`` yields the ``(input, targets)`` batches of one pass (e.g. :func:`minibatches`; a graph
    client yields its whole subgraph once, so an epoch is one full-batch step). Each step minimises

    .. math:: \ell(f(x_b), y_b) + \ell_{\text{model}} + \text{loss\_term}(\cdot)

    on a batch :math:`b`, where :math:`\ell_{\text{model}}` is the model's own
    :meth:`~gflkit.models.base.FeatureModel.auxiliary_loss` (VGAE's KL term; none for most models).
    The trained weights are left in ``flat.vector``. Returns the mean of
    :math:`\ell + \ell_{\text{model}}` over all steps. ``optimizer`` lets a caller re-use one optimiser
    (with empty state) across clients, since building one costs more than a few training steps of a
    small model. ``context`` is handed to the loss term as ``step.context``.
    """
    model = flat.module
    context = context or {}
    model.train()
    optimizer = optimizer or make_optimizer(flat.parameters, config)
    total, steps = None, 0
    for _ in range(config.epochs):
        for xb, yb, positions in epoch():
            features = model.features(xb)
            logits = model.head(features)
            loss = loss_fn(logits, yb)
            auxiliary = model.auxiliary_loss()
            if auxiliary is not None:
                loss = loss + auxiliary
            total = loss.detach() if total is None else total + loss.detach()
            if loss_term is not None:
                extra = loss_term(LocalStep(client, round, model, xb, yb, features, logits, positions,
                                            flat.parameters, context))
                if extra is not None:
                    loss = loss + extra
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
    return float(total) / steps if steps else 0.0
