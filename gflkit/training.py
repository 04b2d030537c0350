"""The one local-training loop: minibatch SGD over a client's samples.

Every method trains through :func:`local_sgd`. A method changes local training only by passing a
``loss_term`` (FedProx's proximal term, Ditto's personal objective, FedSKA's cosine term, MOON's
contrastive term): a function of the current :class:`LocalStep` returning an extra loss or ``None``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
from torch import Tensor

from gflkit.models.base import FeatureModel
from gflkit.state import FlatModule


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of local training shared by all methods."""

    epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"local epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


@dataclass
class LocalStep:
    """What a loss term may look at: the batch, its representation and its predictions."""

    client: int
    round: int
    model: FeatureModel
    x: Tensor
    y: Tensor
    features: Tensor
    logits: Tensor


LossTerm = Callable[[LocalStep], Optional[Tensor]]


def make_sgd(parameters: list[torch.nn.Parameter], config: TrainConfig) -> torch.optim.SGD:
    """Plain SGD (optionally with momentum / weight decay) as configured."""
    return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


def local_sgd(
    flat: FlatModule,
    loss_fn: Callable[[Tensor, Tensor], Tensor],
    x: Tensor,
    y: Tensor,
    indices: Tensor,
    config: TrainConfig,
    generator: torch.Generator,
    loss_term: LossTerm | None = None,
    client: int = -1,
    round: int = -1,
    optimizer: torch.optim.SGD | None = None,
) -> float:
    r"""Train ``flat.module`` in place for ``config.epochs`` epochs of shuffled minibatch SGD.

    The samples are ``x[indices]``, ``y[indices]``: minibatches are gathered straight from the pooled
    tensors, so a client's data is never copied as a whole. Each step minimises
    :math:`\ell(f(x_b), y_b) + \text{loss\_term}(\cdot)` on a batch :math:`b`.
    The trained weights are left in ``flat.vector``. Returns the mean task loss over all steps.
    ``optimizer`` lets a caller re-use one optimiser (with empty state) across clients, since building
    one costs more than a few training steps of a small model.
    """
    model = flat.module
    model.train()
    optimizer = optimizer or make_sgd(flat.parameters, config)
    n = indices.shape[0]
    total, steps = torch.zeros((), device=x.device), 0
    for _ in range(config.epochs):
        order = indices[torch.randperm(n, generator=generator).to(indices.device)]
        for start in range(0, n, config.batch_size):
            batch = order[start : start + config.batch_size]
            xb, yb = x[batch], y[batch]
            features = model.features(xb)
            logits = model.head(features)
            loss = loss_fn(logits, yb)
            total += loss.detach()
            if loss_term is not None:
                extra = loss_term(LocalStep(client, round, model, xb, yb, features, logits))
                if extra is not None:
                    loss = loss + extra
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            steps += 1
    return float(total) / max(steps, 1)
