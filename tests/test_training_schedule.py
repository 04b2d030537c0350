"""Nesterov momentum and the piecewise-linear learning-rate schedule of local training (the SFL authors'
optimiser: SGD, Nesterov momentum 0.9, weight decay 5e-4, lr knots (0, 0), (5, 0.4), (20, 0.001))."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gflkit.experiment import RunConfig
from gflkit.options import added_fields
from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.results import config_key
from gflkit.seeding import generator
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig, local_sgd, make_optimizer, minibatches, scheduled_lr

from conftest import make_federation

SFL = ((0, 0), (5, 0.4), (20, 0.001))


def test_scheduled_lr_interpolates_the_knots_linearly_and_stays_at_the_last():
    assert [scheduled_lr(SFL, t) for t in (0, 5, 20)] == [0.0, 0.4, 0.001]
    assert scheduled_lr(SFL, 2.5) == pytest.approx(0.2)
    assert scheduled_lr(SFL, 12.5) == pytest.approx(0.4 + (0.001 - 0.4) * 7.5 / 15)
    assert scheduled_lr(SFL, 1 / 3) == pytest.approx(0.4 / 15)
    assert scheduled_lr(SFL, 25) == 0.001
    # the very float64 values of the authors' PiecewiseLinear (np.interp)
    times = np.random.default_rng(0).uniform(0, 22, 1000).tolist() + [k / 7 for k in range(150)]
    assert [scheduled_lr(SFL, t) for t in times] == [float(np.interp(t, [0, 5, 20], [0, 0.4, 0.001])) for t in times]
    # two knots at one epoch: a jump, the later knot counting from that time on
    assert [scheduled_lr(((0, 1), (2, 1), (2, 0.1)), t) for t in (1.9, 2, 3)] == [1.0, 0.1, 0.1]


def test_train_config_validates_the_schedule_and_nesterov():
    assert TrainConfig(lr_schedule=[[0, 0], [5, 0.4]]).lr_schedule == ((0.0, 0.0), (5.0, 0.4))
    assert hash(TrainConfig(lr_schedule=[[0, 0], [5, 0.4]])) == hash(TrainConfig(lr_schedule=((0.0, 0.0), (5, 0.4))))
    for schedule, problem in [([], "at least one"), ([(1, 0.1), (2, 0.2)], "start at epoch 0"),
                              ([(0, 0.1), (3, 0.2), (2, 0.1)], "non-decreasing"), ([(0, 0.1), (1, -0.1)], ">= 0"),
                              ([(0, 0.1, 3)], "pairs"), (0.1, "sequence"), ([(0, "fast")], "numbers"),
                              ([(0, float("nan"))], "finite")]:
        with pytest.raises(ValueError, match="lr_schedule") as error:
            TrainConfig(lr_schedule=schedule)
        assert problem in str(error.value)
    with pytest.raises(ValueError, match="nesterov.*momentum > 0"):
        TrainConfig(nesterov=True)
    with pytest.raises(ValueError, match="nesterov.*'sgd'"):
        TrainConfig(nesterov=True, momentum=0.9, optimizer="adam")


def test_nesterov_reaches_torch_sgd():
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    nesterov = make_optimizer(parameters, TrainConfig(lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True))
    assert isinstance(nesterov, torch.optim.SGD) and nesterov.param_groups[0]["nesterov"] is True
    assert make_optimizer(parameters, TrainConfig(momentum=0.9)).param_groups[0]["nesterov"] is False


def tiny_client(samples: int = 9):
    """A federation's working module and one client's samples: ``samples`` of them, in batches of 3."""
    fed = make_federation()
    fed.flat.load(fed.initial)
    return fed, fed.data.x, fed.data.y, fed.data.train_indices[0][:samples]


def recorded_rates(fed, epoch, config, optimizer=None):
    """The learning rate of every step of one ``local_sgd`` call, read as the optimiser steps."""
    optimizer = optimizer or make_optimizer(fed.flat.parameters, config)
    rates = []
    handle = optimizer.register_step_pre_hook(lambda opt, args, kwargs: rates.append(opt.param_groups[0]["lr"]))
    try:
        local_sgd(fed.flat, fed.task.loss, epoch, config, optimizer=optimizer)
    finally:
        handle.remove()
    return rates


def test_local_sgd_sets_the_scheduled_rate_of_every_step_and_restarts_it_at_every_call():
    fed, x, y, idx = tiny_client()
    config = TrainConfig(epochs=2, batch_size=3, momentum=0.9, nesterov=True, lr_schedule=((0, 0), (1, 0.3), (2, 0.1)))
    order = generator(0, 1)
    optimizer = make_optimizer(fed.flat.parameters, config)
    first = recorded_rates(fed, lambda: minibatches(x, y, idx, 3, order), config, optimizer)
    # step i (over both epochs) of 3 per epoch: the schedule at the time the step completes, (i + 1) / 3
    assert first == [scheduled_lr(config.lr_schedule, (i + 1) / 3) for i in range(6)]
    assert first == pytest.approx([0.1, 0.2, 0.3, 0.3 - 0.2 / 3, 0.3 - 0.4 / 3, 0.1])
    assert recorded_rates(fed, lambda: minibatches(x, y, idx, 3, order), config, optimizer) == first, "restarted"
    # an epoch without a length (a generator) is counted first: the same rates
    unsized = recorded_rates(fed, lambda: iter(list(minibatches(x, y, idx, 3, order))), config)
    assert unsized == first
    # a last partial batch is a batch: 7 samples are 3 batches per epoch too
    assert recorded_rates(fed, lambda: minibatches(x, y, idx[:7], 3, order), config) == first


def plain_torch_sgd(fed, batches, lr, momentum, weight_decay, nesterov=False, rate=None):
    """A hand-written loop over ``batches`` with ``torch.optim.SGD``; ``rate(step_number)`` sets the lr the
    way the SFL authors' ``TorchOptimiser`` does (count the step first, then set the lr, then step)."""
    optimizer = torch.optim.SGD(fed.flat.parameters, lr=lr, momentum=momentum, weight_decay=weight_decay,
                                nesterov=nesterov)
    for step_number, (xb, yb, _) in enumerate(batches, start=1):
        loss = fed.task.loss(fed.flat.module(xb), yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if rate is not None:
            optimizer.param_groups[0].update(lr=rate(step_number))
        optimizer.step()
    return fed.flat.vector.detach().clone()


def test_without_a_schedule_local_sgd_is_plain_torch_sgd_bit_for_bit():
    fed, x, y, idx = tiny_client(30)
    config = TrainConfig(epochs=2, batch_size=8, lr=0.05, momentum=0.9, weight_decay=5e-4)
    order = generator(0, 7)
    local_sgd(fed.flat, fed.task.loss, lambda: minibatches(x, y, idx, 8, order), config)
    ours = fed.flat.vector.detach().clone()
    fed.flat.load(fed.initial)
    order = generator(0, 7)
    batches = [batch for _ in range(2) for batch in minibatches(x, y, idx, 8, order)]
    assert torch.equal(ours, plain_torch_sgd(fed, batches, 0.05, 0.9, 5e-4))
    # a constant schedule at the same rate changes nothing either
    fed.flat.load(fed.initial)
    order = generator(0, 7)
    local_sgd(fed.flat, fed.task.loss, lambda: minibatches(x, y, idx, 8, order),
              TrainConfig(epochs=2, batch_size=8, lr=0.01, momentum=0.9, weight_decay=5e-4, lr_schedule=((0, 0.05),)))
    assert torch.equal(ours, fed.flat.vector)


def test_the_schedule_with_nesterov_is_the_sfl_authors_optimiser_bit_for_bit():
    fed, x, y, idx = tiny_client(30)
    epochs, per_epoch = 4, 4  # 30 samples in batches of 8
    knots = ((0, 0), (1, 0.4), (epochs, 0.001))
    config = TrainConfig(epochs=epochs, batch_size=8, momentum=0.9, weight_decay=5e-4, nesterov=True, lr_schedule=knots)
    order = generator(0, 3)
    local_sgd(fed.flat, fed.task.loss, lambda: minibatches(x, y, idx, 8, order), config)
    ours = fed.flat.vector.detach().clone()
    fed.flat.load(fed.initial)
    order = generator(0, 3)
    batches = [batch for _ in range(epochs) for batch in minibatches(x, y, idx, 8, order)]
    authors = plain_torch_sgd(fed, batches, 0.0, 0.9, 5e-4, nesterov=True,
                              rate=lambda step: np.interp([step / per_epoch], [0, 1, epochs], [0, 0.4, 0.001])[0])
    assert torch.equal(ours, authors)


def unequal_federation(**train) -> Federation:
    """Three clients of 21, 13 and 30 training samples (5 batches of 5 per epoch for the first)."""
    gen = torch.Generator().manual_seed(5)
    sizes = (21, 13, 30)
    x = torch.randn(sum(sizes) + 9, 2, 4, 4, generator=gen)
    y = (x[:, 0, 0, 0] > 0).long() + (x[:, 1, 0, 0] > 0).long()
    starts = torch.tensor((0,) + sizes).cumsum(0).tolist()
    train_indices = [torch.arange(a, a + n) for a, n in zip(starts, sizes)]
    test_indices = [torch.arange(sum(sizes) + 3 * k, sum(sizes) + 3 * k + 3) for k in range(3)]
    torch.manual_seed(0)
    model = build_model("mclr", (2, 4, 4), 3)
    return Federation(x, y, train_indices, test_indices, model, ClassificationTask(), TrainConfig(**train))


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_batched_training_follows_the_schedule_and_nesterov_of_the_sequential_loop(one_thread):
    config = dict(epochs=3, batch_size=5, momentum=0.9, weight_decay=5e-4, nesterov=True,
                  lr_schedule=((0, 0), (1, 0.4), (3, 0.01)))
    results = {}
    for mode in ("sequential", "batched"):
        fed = unequal_federation(**config)
        fed.trainer.mode = mode
        starts = fed.initial.expand(3, -1).clone()
        results[mode] = fed.train_clients([0, 1, 2], 1, starts)
        assert fed.trainer.paths == {mode}
    sequential = torch.stack([r.vector for r in results["sequential"]])
    batched = torch.stack([r.vector for r in results["batched"]])
    assert float((sequential - batched).abs().max() / sequential.abs().max()) <= 1e-5
    assert [r.loss for r in results["batched"]] == pytest.approx([r.loss for r in results["sequential"]], rel=1e-5)
    assert not torch.allclose(sequential[0], unequal_federation(**{**config, "nesterov": False}).train_clients(
        [0], 1, fed.initial[None])[0].vector), "nesterov changes the numbers"


def test_a_persistent_optimiser_keeps_its_momentum_but_restarts_the_schedule():
    fed = make_federation()
    config = TrainConfig(epochs=2, batch_size=8, momentum=0.9, nesterov=True, optimizer_state="persistent",
                         lr_schedule=((0, 0), (1, 0.2), (2, 0.05)))
    optimizer = fed.trainer.optimizer(config)
    rates = []
    optimizer.register_step_pre_hook(lambda opt, args, kwargs: rates.append(opt.param_groups[0]["lr"]))
    first = fed.train(0, 1, fed.initial, config=config).vector
    kept = [state["momentum_buffer"].clone() for state in fed.trainer.optimizer_states[(0, 0)]]
    fed.train(0, 2, first, config=config)
    assert len(rates) == 2 * 2 * 4 and rates[:8] == rates[8:], "30 samples: 4 batches per epoch, restarted"
    assert rates[:8] == [scheduled_lr(config.lr_schedule, (i + 1) / 4) for i in range(8)]
    assert not torch.equal(kept[0], fed.trainer.optimizer_states[(0, 0)][0]["momentum_buffer"])
    assert torch.isfinite(fed.train(1, 1, fed.initial, config=config).vector).all()


def test_run_config_passes_the_schedule_and_nesterov_and_stores_them_as_json():
    base = dict(dataset="digits", num_clients=4, rounds=1, momentum=0.9)
    sfl = RunConfig(**base, nesterov=True, lr_schedule=((0, 0), (5, 0.4), (20, 0.001)))
    assert sfl.lr_schedule == [[0.0, 0.0], [5.0, 0.4], [20.0, 0.001]]
    assert sfl.train_config().lr_schedule == ((0.0, 0.0), (5.0, 0.4), (20.0, 0.001))
    assert sfl.train_config().nesterov is True
    # however the knots are written (tuples or lists, ints or floats), one run, one stored key
    as_lists = RunConfig(**base, nesterov=True, lr_schedule=[[0, 0.0], [5, 0.4], [20.0, 0.001]])
    assert as_lists == sfl and config_key(as_lists.to_dict()) == config_key(sfl.to_dict())
    # JSON round trip
    data = json.loads(json.dumps(sfl.to_dict()))
    assert data["lr_schedule"] == [[0.0, 0.0], [5.0, 0.4], [20.0, 0.001]] and data["nesterov"] is True
    assert RunConfig(**data) == sfl
    # the defaults leave the dict, hence the stored key of earlier runs, as they were
    plain = RunConfig(**base)
    assert "nesterov" not in plain.to_dict() and "lr_schedule" not in plain.to_dict()
    assert added_fields(RunConfig)["nesterov"] is False and added_fields(RunConfig)["lr_schedule"] is None
    assert RunConfig(**plain.to_dict()) == plain
    assert plain.train_config() == TrainConfig(1, 32, 0.01, 0.9)
    with pytest.raises(ValueError, match="lr_schedule must start at epoch 0"):
        RunConfig(**base, lr_schedule=[[1, 0.1]])
    with pytest.raises(ValueError, match="nesterov"):
        RunConfig(**{**base, "momentum": 0.0}, nesterov=True)
