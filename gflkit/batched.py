r"""Batched local training: the participating clients' local SGD as one vectorised computation.

The rows :math:`W \in \mathbb{R}^{n \times d}` of the :math:`n` clients that train together are stepped
at once. At local step :math:`s`, every client :math:`k` that still has a batch :math:`b_{k,s}` takes it:

.. math::
    g_k = \nabla_w \big[\ell(f_{w_k}(x_{b_{k,s}}), y_{b_{k,s}}) + \text{term}_k(w_k)\big] + \lambda w_k, \qquad
    v_k \leftarrow \begin{cases} g_k & s = 0 \\ \mu v_k + g_k & s > 0 \end{cases}, \qquad
    w_k \leftarrow w_k - \eta_{k,s}\, v_k

(:class:`torch.optim.SGD` with momentum :math:`\mu`, weight decay :math:`\lambda`, no dampening; with
Nesterov momentum the step is :math:`g_k + \mu v_k` instead of :math:`v_k`). The rate :math:`\eta_{k,s}`
is ``lr``, or under a learning-rate schedule ``config.step_lr(s, n_k)``
(:meth:`~gflkit.training.TrainConfig.step_lr`, :math:`n_k` the client's batches per epoch), as in the
sequential loop. All gradients of a step are one call of ``torch.func.vmap(torch.func.grad(loss))``
over the rows: the model runs through :func:`torch.func.functional_call` with each client's row cut
into its parameters (the :class:`~gflkit.state.Layout` of the K×d state), so no per-client module exists.

**Same numbers as the sequential loop** (:func:`gflkit.training.local_sgd`), to floating-point tolerance:

* each client's batches come from its own ``(seed, round, client, stream)`` stream, in the same order;
* a client whose batches are used up takes no more steps (clients of unequal sizes);
* clients whose ``s``-th batches differ in size (a last partial batch) form separate groups, so every
  loss is a mean over the client's true batch; without a loss term, on a task with a masked loss, all
  batches of a step are one group padded to the widest, each loss a masked sum over the client's true
  samples divided by their number (:func:`masked_client_gradients`: the padding adds exact zeros);
* a client's loss term sees its own parameters and context (``LocalStep.params`` / ``.context``).

**What falls back to the sequential loop** (:func:`batching_obstacle` says why): models with buffers
(BatchNorm statistics), dropout or an auxiliary loss; parameters without gradient; Adam or a persistent
optimiser state; graph clients; per-client contexts whose shapes differ; a method whose local step is not
written for batching (``Algorithm.batchable``).

Under ``local_training="auto"`` batching is also skipped where it would be slower
(:func:`slower_than_sequential`: a single client, a recurrent model, a convolutional model on a CPU).

The clients are ordered so that each step's groups are contiguous rows (:func:`contiguous_order`), read as views
and updated in place: no step gathers or scatters parameter rows or allocates a fresh ``n × d`` tensor.

Clients are processed in chunks of ``client_chunk`` rows; by default as many as fit a memory budget
(:func:`auto_client_chunk`), so a large model or a small GPU still fits.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import torch
from torch import Tensor, nn

from gflkit.models.base import FeatureModel
from gflkit.seeding import generator
from gflkit.training import LocalResult, LocalStep, LossTerm, Proximal, TrainConfig, batch_positions, sgd_step_

if TYPE_CHECKING:  # pragma: no cover
    from gflkit.federation import Federation

#: how much memory the rows of one chunk may take on a CPU (on a GPU, half of what is free)
CPU_MEMORY_BUDGET = 2 * 2**30


# The :type: field names FeatureModel's full path for Sphinx: an annotation of a class's __init__ reaches the API
# reference as written, and ``FeatureModel`` is ambiguous there (gflkit.models re-exports it).
class FeaturesAndLogits(nn.Module):
    """``x ↦ (features(x), head(features(x)))`` of a :class:`~gflkit.models.base.FeatureModel`:
    what :func:`torch.func.functional_call` runs, so a loss term sees the representation too.

    :type model: ~gflkit.models.base.FeatureModel
    """

    def __init__(self, model: FeatureModel):
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        features = self.model.features(x)
        return features, self.model.head(features)


def has_dropout(module: nn.Module) -> bool:
    """Whether ``module`` contains a dropout layer that drops anything (``p > 0``)."""
    return any(isinstance(m, nn.modules.dropout._DropoutNd) and m.p > 0 for m in module.modules())


def batching_obstacle(fed: Federation, config: TrainConfig, contexts: Sequence[dict[str, Tensor]]) -> str | None:
    """Why ``fed``'s clients cannot train batched under ``config`` with these per-client ``contexts``;
    ``None`` when they can."""
    module = fed.flat.module
    if not fed.data.batchable:
        return f"{type(fed).__name__} clients train one graph at a time"
    if any(entry.is_buffer for entry in fed.layout.entries):
        return f"{type(module).__name__} has buffers (e.g. BatchNorm statistics)"
    if has_dropout(module):
        return f"{type(module).__name__} has dropout"
    if type(module).auxiliary_loss is not FeatureModel.auxiliary_loss:
        return f"{type(module).__name__} adds an auxiliary loss"
    if not all(p.requires_grad for p in fed.flat.parameters):
        return f"{type(module).__name__} has frozen parameters"
    if config.optimizer != "sgd":
        return f"optimizer={config.optimizer!r} (batched training implements SGD)"
    if config.optimizer_state != "fresh":
        return f"optimizer_state={config.optimizer_state!r} (batched training starts every client fresh)"
    first = {name: (tuple(t.shape), t.dtype) for name, t in contexts[0].items()} if contexts else {}
    if any({name: (tuple(t.shape), t.dtype) for name, t in c.items()} != first for c in contexts[1:]):
        return "the clients' loss-term contexts differ in shape"
    return None


def slower_than_sequential(fed: Federation, clients: Sequence[int]) -> str | None:
    """Why ``local_training="auto"`` keeps the sequential loop although batching would apply; None when it batches.

    A single client has nothing to batch. Recurrent layers (LSTM, GRU) have no ``vmap`` batching rule,
    so PyTorch would loop over the clients anyway. On a CPU a convolutional model stays sequential:
    ``vmap`` turns each convolution into a grouped convolution over the clients, which oneDNN runs
    1.7× slower than the clients' separate convolutions (``benchmarks/vectorised_clients.py``).
    """
    if len(clients) < 2:
        return "a single client trains"
    modules = list(fed.flat.module.modules())
    if any(isinstance(m, nn.RNNBase) for m in modules):
        return "recurrent layers have no batching rule (vmap would loop over the clients)"
    if fed.device.type == "cpu" and any(isinstance(m, nn.modules.conv._ConvNd) for m in modules):
        return "convolutions batch as grouped convolutions, slower than the sequential loop on a CPU"
    return None


def auto_client_chunk(fed: Federation, batch_size: int) -> int:
    """How many clients one vectorised step may hold: a memory budget over the bytes one client needs.

    One client needs its row, gradient, momentum and two temporaries (``5 d`` floats) plus, twice (forward
    and backward), the outputs of every leaf module on a batch, measured by a dry run on one sample.
    The budget is :data:`CPU_MEMORY_BUDGET` on a CPU and half of the free memory on a GPU.
    """
    outputs: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, out: outputs.append(out.numel() if isinstance(out, Tensor) else 0))
             for m in fed.flat.module.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            fed.flat.module(fed.data.x[:1])
    finally:
        for hook in hooks:
            hook.remove()
    per_client = fed.flat.vector.element_size() * (5 * fed.dim + 2 * batch_size * sum(outputs))
    budget = CPU_MEMORY_BUDGET
    if fed.device.type == "cuda":
        budget = torch.cuda.mem_get_info(fed.device)[0] // 2
    return max(1, budget // per_client)


def batch_schedule(fed: Federation, clients: Sequence[int], round: int, stream: int,
                   config: TrainConfig) -> tuple[Tensor, Tensor, Tensor]:
    """Every client's batches over its local epochs, padded into tensors.

    Returns ``positions`` (``n × S × B``: the batch's samples' positions in the client's training
    split), ``samples`` (the same as indices into the pooled ``fed.data.x``) and ``sizes`` (``n × S``: the
    true size of each batch, 0 where a client has no ``s``-th batch), with ``S`` the most batches any
    client has and ``B`` the batch size. The order is exactly the sequential loop's
    (:func:`~gflkit.training.batch_positions` on the client's own stream, epoch after epoch).
    """
    width = config.batch_size
    per_client = []
    for client in clients:
        order = generator(fed.seed, round, client, stream)
        epochs = [torch.cat(batch_positions(len(fed.data.train_indices[client]), width, order, fed.device) or
                            [torch.zeros(0, dtype=torch.long, device=fed.device)])
                  for _ in range(config.epochs)]
        per_client.append(epochs)
    steps = max(sum(-(-len(epoch) // width) for epoch in epochs) for epochs in per_client)
    positions = torch.zeros(len(clients), steps * width, dtype=torch.long, device=fed.device)
    sizes = torch.zeros(len(clients), steps, dtype=torch.long)
    for row, epochs in enumerate(per_client):
        offset = 0
        for epoch in epochs:
            batches = -(-len(epoch) // width)
            positions[row, offset * width : offset * width + len(epoch)] = epoch
            sizes[row, offset : offset + batches] = width
            if len(epoch) % width:
                sizes[row, offset + batches - 1] = len(epoch) % width
            offset += batches
    samples = torch.stack([fed.data.train_indices[client][row] if len(fed.data.train_indices[client]) else row
                           for client, row in zip(clients, positions)])
    return positions.view(len(clients), steps, width), samples.view(len(clients), steps, width), sizes


def parameter_views(matrix: Tensor, fed: Federation) -> list[Tensor]:
    """The trainable parameters of every row of ``matrix`` (``n × d``): one ``n × shape`` view per parameter."""
    return [matrix[:, e.slice].view(len(matrix), *e.shape) for e in fed.layout.entries if not e.is_buffer]


def step_rates(fed: Federation, clients: Sequence[int], config: TrainConfig, steps: int,
               dtype: torch.dtype) -> Tensor | None:
    """Under a learning-rate schedule, the rate of every client's every step (``n × steps``, on the
    device): :meth:`~gflkit.training.TrainConfig.step_lr` with the client's own batches per epoch;
    ``None`` without a schedule (every step uses ``lr``)."""
    if config.lr_schedule is None:
        return None
    per_epoch = [-(-len(fed.data.train_indices[client]) // config.batch_size) for client in clients]
    by_length = {n: [config.step_lr(step, n) if n else 0.0 for step in range(steps)] for n in set(per_epoch)}
    return torch.tensor([by_length[n] for n in per_epoch], dtype=dtype).reshape(len(clients), steps).to(fed.device)


def client_gradients(fed: Federation, round: int, loss_term: LossTerm | None):
    """``(parameters, x, y, positions, contexts) ↦ (gradients, task losses)``: one step's per-client
    gradients of ``task loss + term``, one tensor per parameter, vectorised over the clients."""
    forward = FeaturesAndLogits(fed.flat.module).train()
    names = [f"model.{e.name}" for e in fed.layout.entries if not e.is_buffer]

    def loss(params: tuple[Tensor, ...], x: Tensor, y: Tensor, positions: Tensor, context: dict[str, Tensor]):
        features, logits = torch.func.functional_call(forward, dict(zip(names, params)), (x,))
        task = fed.task.loss(logits, y)
        total = task
        if loss_term is not None:
            extra = loss_term(LocalStep(-1, round, fed.flat.module, x, y, features, logits, positions, params, context))
            if extra is not None:
                total = total + extra
        return total, task.detach()

    return torch.func.vmap(torch.func.grad(loss, has_aux=True))


def masked_client_gradients(fed: Federation):
    r"""``(parameters, x, y, mask, counts) ↦ (gradients, task losses)`` for clients whose batches differ in size,
    padded to one width: each loss is the task's mean over the client's true batch as a masked sum
    (:meth:`~gflkit.tasks.ClassificationTask.masked_loss`), so a padded sample adds an exact zero. For steps
    without a loss term, on tasks with a masked loss."""
    forward = FeaturesAndLogits(fed.flat.module).train()
    names = [f"model.{e.name}" for e in fed.layout.entries if not e.is_buffer]

    def loss(params: tuple[Tensor, ...], x: Tensor, y: Tensor, mask: Tensor, count: Tensor):
        _, logits = torch.func.functional_call(forward, dict(zip(names, params)), (x,))
        task = fed.task.masked_loss(logits, y, mask, count)
        return task, task.detach()

    return torch.func.vmap(torch.func.grad(loss, has_aux=True))


def contiguous_order(sizes: Tensor) -> Tensor:
    """A permutation of the clients (rows of the ``n × S`` batch ``sizes``) that keeps each step's groups together.

    Rows are sorted by their batch sizes step after step, largest first (a lexicographic sort, stable): the
    clients still training at a step are then a leading block, and with one local epoch each batch size of
    the step (the full batches, then every last partial batch) is one contiguous range of rows, whose
    parameters the loop reads and updates as views instead of gathering and scattering them.
    """
    order = torch.arange(len(sizes))
    for step in reversed(range(sizes.shape[1])):
        order = order[torch.sort(sizes[order, step], descending=True, stable=True).indices]
    return order


def step_groups(column: Sequence[int], chunk: int, pad: bool = False) -> Iterator[tuple[int, slice | list[int]]]:
    """The groups of one step: ``(width, rows)`` for each size > 0 in ``column`` (every client's batch size at the
    step), in parts of at most ``chunk`` rows; a part is a ``slice`` where its rows are contiguous, else a list of
    row numbers. With ``pad`` (a loop that pads batches to one width) all of the step's batches form one group,
    as wide as the largest."""
    by_size: dict[int, list[int]] = {}
    for row, size in enumerate(column):
        if size:
            by_size.setdefault(0 if pad else size, []).append(row)
    for size, rows in sorted(by_size.items()):
        width = max(column[row] for row in rows) if pad else size
        contiguous = rows[-1] - rows[0] + 1 == len(rows)
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            yield width, slice(part[0], part[-1] + 1) if contiguous else part


class SampleBuffer:
    """One preallocated block for the samples of a step's batches, filled by ``index_select`` at every step.

    A fresh ``n × B × features`` tensor per step is large enough that the allocator hands it back to the system
    when it is freed, and every new one page-faults in again: on a CPU that costs as much as copying the samples.
    """

    def __init__(self, pool: Tensor, capacity: int):
        self.pool = pool
        self.block = pool.new_empty(capacity, *pool.shape[1:])

    def gather(self, indices: Tensor) -> Tensor:
        """``pool[indices]`` (any shape of ``indices``) as a view of the block; valid until the next call."""
        count = indices.numel()
        flat = self.block[:count]
        torch.index_select(self.pool, 0, indices.reshape(-1), out=flat)
        return flat.view(*indices.shape, *self.pool.shape[1:])


def train_batched(
    fed: Federation,
    clients: Sequence[int],
    round: int,
    starts: Tensor,
    loss_term: LossTerm | None,
    contexts: Sequence[dict[str, Tensor]],
    stream: int,
    config: TrainConfig,
    client_chunk: int | None = None,
    proximal: Proximal | None = None,
) -> list[LocalResult]:
    """Local training of ``clients`` from the rows of ``starts`` (``n × d``), all at once.

    What :meth:`~gflkit.federation.Federation.train` does for each client, with the same minibatch
    streams and the same result (see the module docstring). ``contexts[i]`` is client ``clients[i]``'s
    loss-term context; a ``proximal`` term's gradient is added to every step's (its anchor from the contexts).
    Returns one :class:`~gflkit.training.LocalResult` per client, in order.

    Internally the clients are reordered (:func:`contiguous_order`) so that each step's groups are
    contiguous rows, updated in place (:func:`~gflkit.training.sgd_step_`).
    """
    positions, samples, sizes = batch_schedule(fed, clients, round, stream, config)
    order = contiguous_order(sizes)
    clients = [clients[i] for i in order.tolist()]
    positions, samples, sizes = positions[order.to(fed.device)], samples[order.to(fed.device)], sizes[order]
    weights = starts.detach()[order.to(starts.device)]
    params = parameter_views(weights, fed)
    velocity = parameter_views(torch.zeros_like(weights), fed) if config.momentum else [None] * len(params)
    ordered_contexts = [contexts[i] for i in order.tolist()] if contexts else []
    stacked = {name: torch.stack([c[name] for c in ordered_contexts]) for name in (contexts[0] if contexts else {})}
    anchors = parameter_views(stacked[proximal.anchor], fed) if proximal is not None else [None] * len(params)
    rates = step_rates(fed, clients, config, sizes.shape[1], weights.dtype)
    gradients_of = client_gradients(fed, round, loss_term)
    # without a loss term (which sees the whole batch), a step's batches train as one group, padded to the widest
    pad = loss_term is None and hasattr(fed.task, "masked_loss")
    padded_gradients_of = masked_client_gradients(fed) if pad else None
    chunk = client_chunk or auto_client_chunk(fed, config.batch_size)
    totals = torch.zeros(len(clients), device=fed.device)
    inputs = SampleBuffer(fed.data.x, min(chunk, len(clients)) * config.batch_size)
    for step, column in enumerate(sizes.t().tolist()):
        for size, part in step_groups(column, chunk, pad):
            rows = part if isinstance(part, slice) else torch.tensor(part, device=fed.device)
            batch = samples[rows, step, :size]
            true_sizes = sizes[part, step]
            if (true_sizes < size).any():
                mask = torch.arange(size) < true_sizes[:, None]
                gradients, task_losses = padded_gradients_of(
                    tuple(p[rows] for p in params), inputs.gather(batch), fed.data.y[batch],
                    mask.to(fed.device, weights.dtype), true_sizes.to(fed.device, weights.dtype))
            else:
                gradients, task_losses = gradients_of(
                    tuple(p[rows] for p in params), inputs.gather(batch), fed.data.y[batch],
                    positions[rows, step, :size], {name: value[rows] for name, value in stacked.items()})
            for param, gradient, momentum, anchor in zip(params, gradients, velocity, anchors):
                if anchor is not None:
                    gradient.add_(proximal.gradient(param[rows], anchor[rows]))
                rate = None if rates is None else rates[rows, step].view(-1, *[1] * (gradient.dim() - 1))
                param_rows = param[rows]  # a view of contiguous rows, else a copy written back below
                momentum_rows = None if momentum is None else momentum[rows]
                sgd_step_(param_rows, gradient, momentum_rows, step == 0, config, rate)
                if not isinstance(part, slice):
                    param[rows] = param_rows
                    if momentum is not None:
                        momentum[rows] = momentum_rows
            totals[rows] += task_losses
    steps = (sizes > 0).sum(dim=1).tolist()
    results: list[LocalResult] = [None] * len(clients)  # type: ignore[list-item]
    for i, original in enumerate(order.tolist()):
        results[original] = LocalResult(weights[i].clone(), float(totals[i]) / steps[i] if steps[i] else 0.0)
    return results


__all__ = ["CPU_MEMORY_BUDGET", "FeaturesAndLogits", "auto_client_chunk", "batch_schedule", "batching_obstacle",
           "contiguous_order", "has_dropout", "masked_client_gradients", "parameter_views", "slower_than_sequential",
           "step_groups", "step_rates", "train_batched"]
