"""The one local-training loop: SGD (or Adam) over a client's batches.

Every method trains through :func:`local_sgd` (or its batched twin, :mod:`gflkit.batched`, which trains
many clients at once with the same numbers). A method changes local training only by passing a
``loss_term`` (FedSKA's cosine term, MOON's contrastive term): a function of the current :class:`LocalStep`
returning an extra loss or ``None``, or a :class:`Proximal` term (FedProx, Ditto's personal objective, FedAMP,
JGESR's clients), whose gradient is added without differentiating it.
A term reads the client's parameters from ``step.params`` and anything per client from
``step.context``, so the same term runs in both loops.

What a batch is depends on the clients: shuffled minibatches of pooled samples (:func:`minibatches`,
image / text / sequence clients), or a client's whole subgraph, one full-batch step per local
iteration (graph clients, :class:`~gflkit.federation.GraphFederation`).
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sized
from dataclasses import dataclass, field
from math import isfinite
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence

import torch
from torch import Tensor

from gflkit.models.base import FeatureModel
from gflkit.state import FlatModule


OPTIMIZERS = ("sgd", "adam")
OPTIMIZER_STATES = ("fresh", "persistent")

#: a piecewise-linear learning-rate schedule — knots ``(epoch, learning rate)``, see :func:`scheduled_lr`
LearningRateSchedule = tuple[tuple[float, float], ...]


def scheduled_lr(knots: Sequence[Sequence[float]], epoch_time: float) -> float:
    r"""The learning rate of the piecewise-linear schedule ``knots`` at ``epoch_time`` (in epochs).

    With knots :math:`(e_0, \eta_0), \dots, (e_m, \eta_m)`, :math:`0 = e_0 \le e_1 \le \dots \le e_m`:

    .. math::
        \eta(t) = \eta_j + \frac{\eta_{j+1} - \eta_j}{e_{j+1} - e_j}\,(t - e_j)
        \quad \text{for } e_j \le t < e_{j+1}, \qquad \eta(t) = \eta_m \text{ for } t \ge e_m

    (and :math:`\eta_0` before :math:`e_0`): ``np.interp(t, epochs, lrs)``, computed the same way, so
    the same float64 value as the SFL authors' ``PiecewiseLinear``. Knots at one epoch make a jump
    there: at that time the last of them counts.
    """
    if epoch_time < knots[0][0]:
        return float(knots[0][1])
    if epoch_time >= knots[-1][0]:
        return float(knots[-1][1])
    j = bisect_right([float(epoch) for epoch, _ in knots], epoch_time) - 1  # e_j <= t < e_{j+1}
    (e0, lr0), (e1, lr1) = knots[j], knots[j + 1]
    if epoch_time == e0:
        return float(lr0)
    return (lr1 - lr0) / (e1 - e0) * (epoch_time - e0) + lr0


def check_lr_schedule(knots: Any) -> LearningRateSchedule:
    """``knots`` as a :data:`LearningRateSchedule` of floats, or ``ValueError`` saying what is wrong."""
    try:
        pairs = [tuple(knot) for knot in knots]
    except TypeError:
        raise ValueError(f"lr_schedule must be a sequence of (epoch, learning rate) pairs, got {knots!r}") from None
    if not pairs:
        raise ValueError("lr_schedule needs at least one (epoch, learning rate) knot")
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"lr_schedule knots must be (epoch, learning rate) pairs, got {knots!r}")
    try:
        schedule = tuple((float(epoch), float(lr)) for epoch, lr in pairs)
    except (TypeError, ValueError):
        raise ValueError(f"lr_schedule knots must be pairs of numbers, got {knots!r}") from None
    if not all(isfinite(epoch) and isfinite(lr) for epoch, lr in schedule):
        raise ValueError(f"lr_schedule knots must be finite, got {knots!r}")
    if schedule[0][0] != 0:
        raise ValueError(f"lr_schedule must start at epoch 0, got a first knot at epoch {schedule[0][0]}")
    if any(later[0] < earlier[0] for earlier, later in zip(schedule, schedule[1:])):
        raise ValueError(f"lr_schedule epochs must be non-decreasing, got {[epoch for epoch, _ in schedule]}")
    if any(lr < 0 for _, lr in schedule):
        raise ValueError(f"lr_schedule learning rates must be >= 0, got {[lr for _, lr in schedule]}")
    return schedule


@dataclass(frozen=True)
class TrainConfig:
    """Hyper-parameters of local training shared by all methods.

    Attributes:
        epochs, batch_size, lr, weight_decay: the local passes, minibatch size, step size and L2 penalty.
        momentum: SGD's momentum (ignored by Adam).
        nesterov: Nesterov momentum (``torch.optim.SGD(nesterov=True)``); needs SGD with momentum > 0.
        lr_schedule: ``None`` (default): every step uses ``lr``. Otherwise piecewise-linear knots
            ``((epoch, lr), ...)`` (epochs non-decreasing from 0, lrs >= 0; :func:`scheduled_lr`) that
            replace ``lr``, restarted at every local training: with ``n`` batches per epoch, the ``i``-th
            step of local epoch ``e`` (both from 0) uses the rate at the time the step completes,
            ``scheduled_lr(lr_schedule, (e n + i + 1) / n)`` (:meth:`step_lr`), as the SFL authors'
            optimiser wrapper does (it advances its step count before setting the rate): the first step
            already moves and the last of ``E`` epochs uses the rate at ``E``. Stored as a tuple of
            float pairs (any sequence of pairs is accepted).
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
    nesterov: bool = False
    lr_schedule: LearningRateSchedule | None = None

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; choose one of {list(OPTIMIZERS)}")
        if self.nesterov and (self.optimizer != "sgd" or self.momentum <= 0):
            raise ValueError(f"nesterov=True needs optimizer='sgd' with momentum > 0, got optimizer="
                             f"{self.optimizer!r} with momentum {self.momentum}")
        if self.lr_schedule is not None:
            object.__setattr__(self, "lr_schedule", check_lr_schedule(self.lr_schedule))
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

    def step_lr(self, step: int, steps_per_epoch: int) -> float:
        """The learning rate of a local training's ``step``-th step (from 0, counted over its epochs),
        with ``steps_per_epoch`` steps per epoch: ``lr``, or the schedule at ``(step + 1) / steps_per_epoch``."""
        if self.lr_schedule is None:
            return self.lr
        return scheduled_lr(self.lr_schedule, (step + 1) / steps_per_epoch)



def sgd_step_(param: Tensor, gradient: Tensor, velocity: Tensor | None, first: bool, config: TrainConfig,
              rate: Tensor | None = None) -> None:
    r"""One step of :class:`torch.optim.SGD` (no dampening), in place: ``param`` and ``velocity`` are updated.

    .. math::
        g \leftarrow \nabla + \lambda w, \qquad
        v \leftarrow \begin{cases} g & \text{first step} \\ \mu v + g & \text{else} \end{cases}, \qquad
        w \leftarrow w - \eta\,(v \text{, or } g + \mu v \text{ with Nesterov momentum})

    with momentum :math:`\mu`, weight decay :math:`\lambda` and rate :math:`\eta` = ``config.lr``, or ``rate``
    (broadcast against ``param``: e.g. one rate per row of a stack of clients' parameters). ``velocity`` is the
    momentum buffer (None without momentum); ``gradient`` is scratch space, overwritten. Updating in place keeps
    the batched loop (:mod:`gflkit.batched`) from allocating a fresh ``n × d`` tensor per step, which on a CPU
    costs more than the arithmetic (the allocator returns large blocks to the system, and every new one
    page-faults in again). The sequential loop runs :class:`torch.optim.SGD`, which ``tests/test_training.py``
    checks this against for every option.
    """
    if config.weight_decay:
        gradient.add_(param, alpha=config.weight_decay)
    if config.momentum:
        if first:
            velocity.copy_(gradient)
        else:
            velocity.mul_(config.momentum).add_(gradient)
        if config.nesterov:
            gradient.add_(velocity, alpha=config.momentum)
        else:
            gradient = velocity
    if rate is not None:
        param.sub_(gradient * rate)
    else:
        param.add_(gradient, alpha=-config.lr)


def plain_sgd_obstacle(config: TrainConfig) -> str | None:
    """Why local training under ``config`` is not plain SGD at one constant rate, or None when it is.

    Methods whose server divides a displacement by the step size (SCAFFOLD, FedCG's student) need plain SGD."""
    if config.optimizer != "sgd" or config.momentum != 0:
        return f"optimizer {config.optimizer!r} with momentum {config.momentum}"
    if config.lr_schedule is not None:
        return f"a learning-rate schedule {list(config.lr_schedule)}"
    return None

@dataclass
class LocalResult:
    """A client's trained model vector and its mean training loss."""

    vector: Tensor
    loss: float


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


@dataclass(frozen=True)
class Proximal:
    r"""A proximal term :math:`\frac{\rho}{2}\lVert w - a\rVert_2^2` of a client's local objective, added as its
    gradient.

    Both loops add :math:`\rho\,(w - a)` to the gradient of the rest of the loss at every step instead of
    differentiating the term through autograd (FedProx, Ditto's personal objective, FedAMP, JGESR's clients):
    the same numbers — autograd's gradient of :math:`c\,\lVert w - a\rVert^2` is :math:`c \cdot 2(w - a)`,
    which equals :math:`(w - a) \cdot 2c` exactly in floating point — for one operation per parameter instead
    of a backward pass through the term.

    Attributes:
        weight: :math:`\rho \ge 0`.
        anchor: the key of the client's context (``step.context``) that holds :math:`a`, a model vector.
    """

    weight: float
    anchor: str = "anchor"

    def __post_init__(self) -> None:
        if not self.weight >= 0:
            raise ValueError(f"a proximal term's weight must be >= 0, got {self.weight}")

    def gradient(self, param: Tensor, anchor: Tensor) -> Tensor:
        r""":math:`\rho\,(w - a)` for one parameter tensor ``param`` and its anchor (a new tensor)."""
        return (param.detach() - anchor).mul_(self.weight)


class Batch(NamedTuple):
    """One batch: the model input, its targets and (sample clients) the samples' positions in the split."""

    input: Any
    targets: Tensor
    positions: Tensor | None = None


def batch_positions(num_samples: int, batch_size: int, generator: torch.Generator | None = None,
                    device: torch.device | str | None = None) -> list[Tensor]:
    """The positions 0 to ``num_samples - 1`` of one pass, cut into batches of ``batch_size``.

    With a ``generator`` the order is a fresh random permutation (one training epoch); without, the
    positions in order (evaluation). The last batch holds the remainder.
    """
    positions = torch.arange(num_samples, device=device)
    if generator is not None:
        positions = torch.randperm(num_samples, generator=generator).to(device)
    return list(positions.split(batch_size))


class Minibatches(Iterator[Batch]):
    """One pass of :func:`minibatches`: an iterator over its batches whose ``len`` is the number of
    batches of the pass, known before the order is drawn (at the first ``next``, as a generator would)."""

    def __init__(self, x: Tensor, y: Tensor, indices: Tensor, batch_size: int,
                 generator: torch.Generator | None = None):
        self.x, self.y, self.indices, self.batch_size, self.generator = x, y, indices, batch_size, generator
        self._positions: Iterator[Tensor] | None = None

    def __len__(self) -> int:
        return -(-len(self.indices) // self.batch_size)

    def __next__(self) -> Batch:
        if self._positions is None:
            self._positions = iter(batch_positions(len(self.indices), self.batch_size, self.generator,
                                                   self.indices.device))
        chosen = next(self._positions)
        batch = self.indices[chosen]
        return Batch(self.x[batch], self.y[batch], chosen)


def minibatches(x: Tensor, y: Tensor, indices: Tensor, batch_size: int,
                generator: torch.Generator | None = None) -> Minibatches:
    """One pass over the samples ``x[indices]``, ``y[indices]`` in batches of ``batch_size``.

    The order is :func:`batch_positions`'. Batches are gathered straight from the pooled tensors, so a
    client's data is never copied as a whole; each carries its samples' positions in ``indices``. The
    pass knows its number of batches (``len``), which a learning-rate schedule needs.
    """
    return Minibatches(x, y, indices, batch_size, generator)


def make_optimizer(parameters: list[torch.nn.Parameter], config: TrainConfig) -> torch.optim.Optimizer:
    """The configured optimiser over ``parameters``: SGD (with momentum / Nesterov / weight decay) or Adam."""
    if config.optimizer == "adam":
        return torch.optim.Adam(parameters, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(parameters, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay,
                           nesterov=config.nesterov, foreach=True)


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
    proximal: Proximal | None = None,
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
    small model. ``context`` is handed to the loss term as ``step.context``. A ``proximal`` term's gradient
    is added to the loss's after the backward pass (:class:`Proximal`; its anchor is read from ``context``).

    With ``config.lr_schedule`` every step first sets the learning rate of all of the optimiser's
    parameter groups to :meth:`TrainConfig.step_lr`, the schedule restarting at this call. The number of
    batches per epoch is the ``len`` of each ``epoch()`` (:func:`minibatches` has one); an ``epoch()``
    without a length (a generator, e.g. a graph client's one batch) is first gathered into a list.
    """
    model = flat.module
    context = context or {}
    model.train()
    optimizer = optimizer or make_optimizer(flat.parameters, config)
    total, steps = None, 0
    anchor = flat.parameters_as_views(context[proximal.anchor]) if proximal is not None else ()
    for e in range(config.epochs):
        batches = epoch()
        if config.lr_schedule is not None:
            batches = batches if isinstance(batches, Sized) else list(batches)
            per_epoch = len(batches)
        for i, (xb, yb, positions) in enumerate(batches):
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
            for param, param_anchor in zip(flat.parameters, anchor):
                term = proximal.gradient(param, param_anchor)
                param.grad = term if param.grad is None else param.grad.add_(term)
            if config.lr_schedule is not None:
                lr = config.step_lr(e * per_epoch + i, per_epoch)
                for group in optimizer.param_groups:
                    group["lr"] = lr
            optimizer.step()
            steps += 1
    return float(total) / steps if steps else 0.0
