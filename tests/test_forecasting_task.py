"""ForecastingTask: masked loss in the scaled space, masked MAE / MAPE / RMSE on unscaled values, sums that add
up over batches, build_task options, and a forecasting federation end to end."""
from __future__ import annotations

import math

import pytest
import torch

from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.tasks import TASKS, ClassificationTask, ForecastingTask, add_sums, build_task
from gflkit.training import TrainConfig

MEAN, STD = 50.0, 10.0
# 3 samples × 2 steps of unscaled targets; 0 = missing
TARGETS = torch.tensor([[60.0, 40.0], [0.0, 50.0], [55.0, 0.0]])
# predictions in mph, then as the model outputs them (scaled)
PREDICTIONS = torch.tensor([[62.0, 44.0], [30.0, 45.0], [50.0, 99.0]])
OUTPUTS = (PREDICTIONS - MEAN) / STD


def test_loss_is_masked_mae_in_scaled_space():
    task = ForecastingTask(mean=MEAN, std=STD)
    # valid entries: (0,0) 2 mph, (0,1) 4, (1,1) 5, (2,0) 5 → scaled errors 0.2, 0.4, 0.5, 0.5
    assert float(task.loss(OUTPUTS, TARGETS)) == pytest.approx((0.2 + 0.4 + 0.5 + 0.5) / 4)


def test_loss_ignores_missing_targets_in_the_gradient():
    task = ForecastingTask(mean=MEAN, std=STD)
    outputs = OUTPUTS.clone().requires_grad_(True)
    task.loss(outputs, TARGETS).backward()
    assert outputs.grad[1, 0] == 0 and outputs.grad[2, 1] == 0
    assert outputs.grad[0, 0] == pytest.approx(0.25)  # sign(+0.2) / 4 valid entries
    empty = torch.zeros(2, 2, requires_grad=True)
    loss = task.loss(empty, torch.zeros(2, 2))
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(empty.grad, torch.zeros(2, 2))


def test_metrics_at_the_last_step_hand_computed():
    task = ForecastingTask(mean=MEAN, std=STD)
    sums = task.evaluate(OUTPUTS, TARGETS)
    # last step: valid targets 40 (pred 44) and 50 (pred 45); the 0 target is excluded
    assert sums["valid"] == 2 and sums["count"] == 3
    assert sums["abs_sum"] == pytest.approx(4 + 5) and sums["sq_sum"] == pytest.approx(16 + 25)
    assert sums["ape_sum"] == pytest.approx(4 / 40 + 5 / 50)
    metrics = task.finalize(sums)
    assert list(metrics) == ["mae", "mape", "rmse", "loss"]  # mae is the headline metric
    assert metrics["mae"] == pytest.approx(4.5)
    assert metrics["mape"] == pytest.approx(100 * (0.1 + 0.1) / 2)
    assert metrics["rmse"] == pytest.approx(math.sqrt(41 / 2))
    assert metrics["loss"] == pytest.approx(float(task.loss(OUTPUTS, TARGETS)))


def test_horizon_index_selects_the_step():
    metrics = ForecastingTask(mean=MEAN, std=STD, horizon_index=0).finalize(
        ForecastingTask(mean=MEAN, std=STD, horizon_index=0).evaluate(OUTPUTS, TARGETS))
    # first step: targets 60 (pred 62), 55 (pred 50); the 0 target (pred 30) is excluded
    assert metrics["mae"] == pytest.approx(3.5) and metrics["rmse"] == pytest.approx(math.sqrt((4 + 25) / 2))


def test_sums_add_up_over_batches():
    gen = torch.Generator().manual_seed(0)
    targets = torch.rand(50, 12, generator=gen) * 60
    targets[torch.rand(50, 12, generator=gen) < 0.2] = 0.0
    outputs = torch.randn(50, 12, generator=gen)
    task = ForecastingTask(mean=MEAN, std=STD)
    total: dict[str, float] = {}
    for start in range(0, 50, 7):
        total = add_sums(total, task.evaluate(outputs[start:start + 7], targets[start:start + 7]))
    whole = task.evaluate(outputs, targets)
    assert total.keys() == whole.keys() and all(total[k] == pytest.approx(whole[k], rel=1e-5) for k in whole)


def test_no_valid_target_gives_nan():
    task = ForecastingTask()
    metrics = task.finalize(task.evaluate(torch.ones(2, 3), torch.zeros(2, 3)))
    assert all(math.isnan(v) for v in metrics.values())


def test_build_task():
    assert build_task("classification") == ClassificationTask()
    assert set(TASKS) >= {"classification", "forecasting"}
    task = build_task("forecasting", mean=MEAN, std=STD)
    assert isinstance(task, ForecastingTask) and (task.mean, task.std, task.horizon_index) == (MEAN, STD, -1)
    with pytest.raises(TypeError, match="unknown option.*'mean'.*accepted options: none"):
        build_task("classification", mean=1.0)
    with pytest.raises(TypeError, match="unknown option.*'scale'"):
        build_task("forecasting", scale=1.0)
    with pytest.raises(ValueError, match="unknown task 'regression'"):
        build_task("regression")
    with pytest.raises(ValueError, match="std must be positive"):
        ForecastingTask(std=0.0)


def test_forecasting_federation_trains_and_evaluates():
    gen = torch.Generator().manual_seed(0)
    speed = 50 + 10 * torch.sin(torch.arange(0, 300, dtype=torch.float32) / 10)
    windows = speed.unfold(0, 24, 1)  # (277, 24)
    x = torch.stack([(windows[:, :12] - MEAN) / STD, torch.zeros(len(windows), 12)], dim=-1)
    y = windows[:, 12:].clone()
    y[torch.rand(y.shape, generator=gen) < 0.1] = 0.0
    clients = torch.arange(len(x)).chunk(2)
    torch.manual_seed(0)
    model = build_model("gru_seq2seq", (12, 2), 12)
    task = build_task("forecasting", mean=MEAN, std=STD)
    fed = Federation(x, y, [c[:100] for c in clients], [c[100:] for c in clients], model, task,
                     TrainConfig(epochs=5, batch_size=16, lr=0.1), seed=0)
    metrics = fed.evaluate(fed.models)
    assert [list(m) for m in metrics] == [["mae", "mape", "rmse", "loss", "num_samples"]] * 2
    assert [m["num_samples"] for m in metrics] == [len(clients[0]) - 100, len(clients[1]) - 100]
    assert all(math.isfinite(v) for m in metrics for v in m.values())
    losses = []
    for round in range(6):
        results = [fed.train(k, round, fed.models[k]) for k in range(2)]
        fed.models[:] = torch.stack([r.vector for r in results])
        losses.append([r.loss for r in results])
    assert all(last < 0.85 * first for first, last in zip(losses[0], losses[-1]))  # the masked MAE is learned
