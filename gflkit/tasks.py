"""What a client optimises and measures.

A task turns model outputs into a training loss and into evaluation metrics. Classification covers
image classification and LEAF-style next-character prediction (a classification over the vocabulary).
Later papers add forecasting and link prediction as further tasks with the same two methods.
"""
from __future__ import annotations

from dataclasses import dataclass

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


def add_sums(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    """Element-wise sum of two metric-sum dictionaries."""
    return {key: total.get(key, 0.0) + value for key, value in part.items()}


TASKS = {"classification": ClassificationTask}


def build_task(name: str) -> ClassificationTask:
    """The registered task ``name``."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    return TASKS[name]()


__all__ = ["ClassificationTask", "build_task", "add_sums", "TASKS"]
