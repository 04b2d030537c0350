"""ClassificationTask: the training loss, its masked form for padded batches, and the evaluation sums."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from gflkit.tasks import ClassificationTask


def test_the_masked_loss_of_a_padded_batch_is_the_loss_of_its_true_samples_with_the_same_gradient():
    task = ClassificationTask()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 2, 1, 1, 0])
    true = 3  # the last two rows are padding, with labels and logits that must not count
    mask = (torch.arange(5) < true).to(torch.float64)
    masked = task.masked_loss(logits, targets, mask, torch.tensor(float(true)))
    (masked_gradient,) = torch.autograd.grad(masked, logits)
    plain = task.loss(logits[:true], targets[:true])
    (plain_gradient,) = torch.autograd.grad(plain, logits)
    assert torch.allclose(masked, plain, rtol=1e-15, atol=0)
    assert torch.allclose(masked_gradient, plain_gradient, rtol=1e-15, atol=0)
    assert not masked_gradient[true:].any(), "padded samples get no gradient"


def test_evaluation_sums_add_up_over_batches_and_an_empty_split_scores_nan():
    task = ClassificationTask()
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]])
    targets = torch.tensor([0, 0, 0])
    halves = [task.evaluate(logits[:2], targets[:2]), task.evaluate(logits[2:], targets[2:])]
    sums = {key: sum(half[key] for half in halves) for key in halves[0]}
    metrics = task.finalize(sums)
    assert metrics["accuracy"] == 100.0 * 2 / 3
    assert math.isclose(metrics["loss"], float(F.cross_entropy(logits, targets)), rel_tol=1e-6)
    assert all(math.isnan(value) for value in task.finalize({"correct": 0.0, "loss_sum": 0.0, "count": 0.0}).values())
