"""What a client optimises and measures.

A task turns model outputs into a training loss and into evaluation metrics. Classification covers
image classification and LEAF-style next-character prediction (a classification over the vocabulary);
forecasting covers traffic-speed prediction (METR-LA). Later papers add link prediction as a further task
with the same methods.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class ClassificationTask:
    r"""Cross-entropy training, accuracy and mean cross-entropy for evaluation.

    .. math:: \ell(\hat y, y) = -\log \mathrm{softmax}(\hat y)_y
    """

    name: str = "classification"

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of a batch."""
        return F.cross_entropy(logits, targets)

    def evaluate(self, logits: Tensor, targets: Tensor) -> dict[str, float]:
        """Sums over the batch (``correct``, ``loss_sum``, ``count``) so that batches can be added up."""
        return {
            "correct": float((logits.argmax(dim=1) == targets).sum()),
            "loss_sum": float(F.cross_entropy(logits, targets, reduction="sum")),
            "count": float(targets.numel()),
        }

    @staticmethod
    def finalize(sums: dict[str, float]) -> dict[str, float]:
        """Per-client metrics from accumulated sums: ``accuracy`` (in %) and mean ``loss``."""
        count = max(sums["count"], 1.0)
        return {"accuracy": 100.0 * sums["correct"] / count, "loss": sums["loss_sum"] / count}


@dataclass(frozen=True)
class ForecastingTask:
    r"""Masked MAE training and DCRNN's masked MAE / MAPE / RMSE at one horizon for evaluation.

    Targets :math:`y \in \mathbb{R}^{n \times T}` are *unscaled* readings (METR-LA: speed in mph) in which
    0 marks a missing reading; outputs :math:`\hat z` are predictions in the *scaled* space
    :math:`z = (y - \mu) / \sigma` of the dataset's training statistics (``mean``, ``std``). With the mask
    :math:`m = [y \ne 0]` (DCRNN's ``null_val = 0``):

    .. math::
        \ell = \frac{\sum_{i,\tau} m_{i\tau} \, |\hat z_{i\tau} - (y_{i\tau} - \mu)/\sigma|}
                     {\sum_{i,\tau} m_{i\tau}}

    over every horizon step (0 when a batch has no valid target). Evaluation unscales the predictions,
    :math:`\hat y = \sigma \hat z + \mu`, and measures the step :math:`h` = ``horizon_index`` (default
    the last, i.e. 60 minutes for 12 five-minute steps, FedSKA's Table 2) over valid targets:

    .. math::
        \mathrm{MAE} = \frac{\sum_i m_{ih} |\hat y_{ih} - y_{ih}|}{\sum_i m_{ih}}, \quad
        \mathrm{MAPE} = \frac{100}{\sum_i m_{ih}} \sum_i m_{ih} \frac{|\hat y_{ih} - y_{ih}|}{|y_{ih}|}, \quad
        \mathrm{RMSE} = \sqrt{\frac{\sum_i m_{ih} (\hat y_{ih} - y_{ih})^2}{\sum_i m_{ih}}}

    Attributes:
        mean, std: the scaler :math:`\mu, \sigma` (the dataset's ``info["task_options"]``); the defaults
            0 and 1 mean that outputs are in the targets' own units.
        horizon_index: which output step the metrics measure (``-1``: the last).
    """

    name: str = "forecasting"
    mean: float = 0.0
    std: float = 1.0
    horizon_index: int = -1

    def __post_init__(self) -> None:
        if not self.std > 0:
            raise ValueError(f"std must be positive, got {self.std}")

    def loss(self, outputs: Tensor, targets: Tensor) -> Tensor:
        """Masked MAE in the scaled space over every horizon step."""
        mask = targets != 0
        error = (outputs - (targets - self.mean) / self.std).abs()
        return (error * mask).sum() / mask.sum().clamp(min=1)

    def evaluate(self, outputs: Tensor, targets: Tensor) -> dict[str, float]:
        """Sums over the batch so that batches and clients add up.

        ``abs_sum``, ``sq_sum``, ``ape_sum`` and ``valid`` (number of valid targets) at ``horizon_index``
        on unscaled values; ``loss_sum`` / ``loss_valid`` of the training loss over all steps; ``count``,
        the number of samples.
        """
        mask = targets != 0
        loss_error = (outputs - (targets - self.mean) / self.std).abs()
        prediction = outputs[:, self.horizon_index] * self.std + self.mean
        target = targets[:, self.horizon_index]
        valid = mask[:, self.horizon_index]
        error = (prediction - target)[valid]
        return {
            "abs_sum": float(error.abs().sum()),
            "sq_sum": float(error.square().sum()),
            "ape_sum": float((error.abs() / target[valid].abs()).sum()),
            "valid": float(valid.sum()),
            "loss_sum": float((loss_error * mask).sum()),
            "loss_valid": float(mask.sum()),
            "count": float(len(targets)),
        }

    @staticmethod
    def finalize(sums: dict[str, float]) -> dict[str, float]:
        """``mae``, ``mape`` (in %), ``rmse`` at the horizon and the mean training ``loss``.

        A client without any valid target at the horizon gets NaN metrics (there is nothing to measure).
        """
        valid, loss_valid = sums["valid"], sums["loss_valid"]
        if valid == 0:
            mae = mape = rmse = math.nan
        else:
            mae, mape = sums["abs_sum"] / valid, 100.0 * sums["ape_sum"] / valid
            rmse = math.sqrt(sums["sq_sum"] / valid)
        return {"mae": mae, "mape": mape, "rmse": rmse,
                "loss": sums["loss_sum"] / loss_valid if loss_valid else math.nan}


Task = ClassificationTask | ForecastingTask


def add_sums(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    """Element-wise sum of two metric-sum dictionaries."""
    return {key: total.get(key, 0.0) + value for key, value in part.items()}


TASKS: dict[str, type[Task]] = {"classification": ClassificationTask, "forecasting": ForecastingTask}


def build_task(name: str, **options: Any) -> Task:
    """The registered task ``name`` with ``options`` (e.g. ``mean``, ``std`` for ``forecasting``)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    accepted = [f.name for f in dataclasses.fields(TASKS[name]) if f.name != "name"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f"task {name!r} got unknown option(s) {unknown}; accepted options: {accepted or 'none'}")
    return TASKS[name](**options)


__all__ = ["ClassificationTask", "ForecastingTask", "Task", "build_task", "add_sums", "TASKS"]
