"""What a client optimises and measures.

A task turns model outputs into a training loss and into evaluation metrics. Classification covers
image classification and LEAF-style next-character prediction (a classification over the vocabulary);
forecasting covers traffic-speed prediction (METR-LA). Link prediction and node classification are the
tasks of subgraph clients (:class:`~gflkit.federation.GraphFederation`); a graph task also says what a
client's model input is (its message-passing graph) and what the targets of each split are.

``score`` names the metric that measures a model's quality on a task (higher is better), e.g. for the
validation check of FedVGAE's fine-tuning.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import InnerProductDecoder

from gflkit.data.subgraphs import ClientGraph, sample_non_edges
from gflkit.metrics import average_precision, roc_auc


@dataclass(frozen=True)
class ClassificationTask:
    r"""Cross-entropy training, accuracy and mean cross-entropy for evaluation.

    .. math:: \ell(\hat y, y) = -\log \mathrm{softmax}(\hat y)_y
    """

    name: str = "classification"
    score: ClassVar[str] = "accuracy"
    #: the values each evaluation metric can take (a checkpoint's records are checked against them)
    ranges: ClassVar[dict[str, tuple[float, float]]] = {"accuracy": (0.0, 100.0), "loss": (0.0, math.inf)}

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of a batch."""
        return F.cross_entropy(logits, targets)

    def masked_loss(self, logits: Tensor, targets: Tensor, mask: Tensor, count: Tensor) -> Tensor:
        r""":meth:`loss` over the ``count`` samples whose ``mask`` is 1, in a batch padded to a common width:
        :math:`\frac{1}{n}\sum_i m_i \ell_i` with :math:`\ell_i` each sample's cross-entropy, so a padded sample
        (:math:`m_i = 0`) adds an exact zero (it can change the sum's rounding, not its value)."""
        return (F.cross_entropy(logits, targets, reduction="none") * mask).sum() / count

    def evaluate(self, logits: Tensor, targets: Tensor) -> dict[str, float]:
        """Sums over the batch (``correct``, ``loss_sum``, ``count``) so that batches can be added up."""
        return {
            "correct": float((logits.argmax(dim=1) == targets).sum()),
            "loss_sum": float(F.cross_entropy(logits, targets, reduction="sum")),
            "count": float(targets.numel()),
        }

    @staticmethod
    def finalize(sums: dict[str, float]) -> dict[str, float]:
        """Per-client metrics from accumulated sums: ``accuracy`` (in %) and mean ``loss``; NaN for a client
        without a sample in the split (there is nothing to score: never 0 %)."""
        count = sums["count"]
        if not count:
            return {"accuracy": math.nan, "loss": math.nan}
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
    #: the values each evaluation metric can take (a checkpoint's records are checked against them)
    ranges: ClassVar[dict[str, tuple[float, float]]] = {name: (0.0, math.inf) for name in ("mae", "mape", "rmse", "loss")}

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


GRAPH_SPLITS = ("train", "val", "test")
RECONSTRUCTIONS = ("dense", "sampled")


def _check_split(split: str) -> None:
    if split not in GRAPH_SPLITS:
        raise ValueError(f"unknown split {split!r}; graph clients have the splits {list(GRAPH_SPLITS)}")


@dataclass(frozen=True)
class NodeClassificationTask(ClassificationTask):
    r"""Semi-supervised node classification on a client's subgraph (FedVGAE's Eq. 8 without the KL term,
    which the VGAE adds itself as its :meth:`~gflkit.models.base.FeatureModel.auxiliary_loss`).

    The model sees the whole subgraph :math:`G[V_k]` (transductive); the targets of a split are the labels
    with ``-1`` on every node outside the split's mask, and only the split's nodes :math:`S` count:

    .. math:: \ell = -\frac{1}{|S|} \sum_{u \in S} \log \mathrm{softmax}(\hat y_u)_{y_u}

    Evaluation: ``accuracy`` (in %) and mean cross-entropy ``loss`` over the split's nodes.
    """

    name: str = "node_classification"

    def inputs(self, client: ClientGraph) -> Data:
        """The model input: the client's node features and all of its subgraph's edges."""
        return Data(x=client.data.x, edge_index=client.data.edge_index)

    def targets(self, client: ClientGraph, split: str) -> Tensor:
        """``(n_k,)`` labels on the nodes of ``split`` (``train`` / ``val`` / ``test``), ``-1`` elsewhere."""
        _check_split(split)
        return torch.where(client.data[f"{split}_mask"], client.data.y, -1)

    def training_targets(self, targets: Tensor, num_nodes: int, generator: torch.Generator) -> Tensor:
        """The targets of a training step: the training labels themselves."""
        return targets

    @staticmethod
    def count(targets: Tensor) -> int:
        """Number of labelled nodes in ``targets``."""
        return int((targets >= 0).sum())

    @staticmethod
    def resize_targets(targets: Tensor, num_nodes: int) -> Tensor:
        """``targets`` over a graph of ``num_nodes`` nodes whose first nodes are the client's own: the
        labels of the nodes both graphs share, ``-1`` (no target) on any further node (e.g. FedSage+'s
        generated neighbours)."""
        resized = targets.new_full((num_nodes,), -1)
        kept = min(num_nodes, targets.numel())
        resized[:kept] = targets[:kept]
        return resized

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy over the labelled nodes (0 when there are none)."""
        valid = targets >= 0
        if not valid.any():
            return logits.sum() * 0.0
        return super().loss(logits[valid], targets[valid])

    def evaluate(self, logits: Tensor, targets: Tensor) -> dict[str, float]:
        """``correct``, ``loss_sum`` and ``count`` over the labelled nodes."""
        valid = targets >= 0
        return super().evaluate(logits[valid], targets[valid])


@dataclass(frozen=True)
class LinkPredictionTask:
    r"""VGAE link prediction on a client's subgraph (Kipf & Welling 2016; FedVGAE's Eq. 5 and 7).

    The model input is the client's graph with its **training edges only**
    (:attr:`~gflkit.data.subgraphs.LinkSplit.train_edge_index`); its outputs are node representations
    :math:`z`. A pair's score is the inner-product decoder :math:`\hat A_{uv} = \sigma(z_u^\top z_v)`.
    Targets are labelled pairs, a ``(3, m)`` tensor: rows 0–1 the nodes :math:`(u, v)`, row 2 the label
    :math:`a_{uv}` (1: edge, 0: non-edge).

    Training (``reconstruction``):

    * ``"dense"`` (default; FedVGAE's Eq. 7 and Kipf & Welling's reference code): the whole adjacency
      matrix of the client's :math:`n` own nodes is reconstructed. The labels are Kipf's
      :math:`A^{lab} = A_{train} + I` and the positives are re-weighted by the pair imbalance:

      .. math:: \ell = \frac{n^2}{2 (n^2 - E)} \cdot \frac{1}{n^2} \sum_{u, v}
                \Big[ w\, A^{lab}_{uv} \big(-\log \hat A_{uv}\big)
                      + (1 - A^{lab}_{uv}) \big(-\log (1 - \hat A_{uv})\big) \Big],
                \qquad w = \frac{n^2 - E}{E}

      with :math:`E` the directed training edges (:math:`2|P|`). :meth:`training_targets` returns the
      pairs labelled 1 in :math:`A^{lab}` (both directions of every training edge, then every
      :math:`(u, u)`); :meth:`loss` reads :math:`n` as the number of :math:`(u, u)` pairs. Eq. 7 as
      printed sums the pairs unweighted and divides by :math:`n`; we follow the reference code's
      weighting (the scale of Eq. 7 against the KL term is the VGAE's ``kl_weight``).
    * ``"sampled"`` (PyG's ``VGAE.recon_loss``): the positives :math:`P` are the training edges; every
      step draws as many negatives :math:`N` anew, uniformly among the node pairs that are not training
      edges, and

      .. math:: \ell = -\frac{1}{|P|} \sum_{(u,v) \in P} \log \hat A_{uv}
                       -\frac{1}{|N|} \sum_{(u,v) \in N} \log (1 - \hat A_{uv})

      (a part without pairs contributes 0).

    The VGAE adds its KL term itself. Evaluation on the held-out
    positive and negative pairs of ``val`` / ``test``: ``auc`` and ``ap`` (in %; NaN without both kinds
    of pairs) and the mean binary cross-entropy ``loss``. AUC and AP are not sums over batches: graph
    clients are evaluated in one full batch.
    """

    name: str = "link_prediction"
    reconstruction: str = "dense"
    score: ClassVar[str] = "auc"
    #: the values each evaluation metric can take (a checkpoint's records are checked against them)
    ranges: ClassVar[dict[str, tuple[float, float]]] = {"auc": (0.0, 100.0), "ap": (0.0, 100.0),
                                                        "loss": (0.0, math.inf)}
    decoder: ClassVar[InnerProductDecoder] = InnerProductDecoder()

    def __post_init__(self) -> None:
        if self.reconstruction not in RECONSTRUCTIONS:
            raise ValueError(f"unknown reconstruction {self.reconstruction!r}; choose one of {list(RECONSTRUCTIONS)} "
                             "('dense': the whole adjacency matrix as in Eq. 7, 'sampled': one non-edge per edge)")

    def inputs(self, client: ClientGraph) -> Data:
        """The model input: the client's node features and both directions of its training edges."""
        if client.links is None:
            raise ValueError(f"client {client.client} has no link split: build the clients with links=True")
        return Data(x=client.data.x, edge_index=client.links.train_edge_index)

    def targets(self, client: ClientGraph, split: str) -> Tensor:
        """``(3, m)`` labelled pairs of ``split``: training edges (label 1), or held-out edges and non-edges."""
        _check_split(split)
        links = client.links
        if links is None:
            raise ValueError(f"client {client.client} has no link split: build the clients with links=True")
        if split == "train":
            return _labelled(links.train_pos, torch.empty(2, 0, dtype=torch.long))
        positives, negatives = (links.val_pos, links.val_neg) if split == "val" else (links.test_pos, links.test_neg)
        return _labelled(positives, negatives)

    def training_targets(self, targets: Tensor, num_nodes: int, generator: torch.Generator) -> Tensor:
        """``"dense"``: the pairs labelled 1 in :math:`A_{train} + I` over the ``num_nodes`` own nodes;
        ``"sampled"``: the training edges of ``targets`` plus as many fresh non-edges (from ``generator``)."""
        positives = targets[:2, targets[2] == 1]
        if self.reconstruction == "dense":
            nodes = torch.arange(num_nodes, device=targets.device)
            return _labelled(torch.cat([positives, positives.flip(0), torch.stack([nodes, nodes])], dim=1),
                             targets.new_empty(2, 0))
        rng = np.random.default_rng(int(torch.randint(2**62, (1,), generator=generator)))
        negatives = sample_non_edges(num_nodes, positives.cpu(), positives.size(1), rng).to(targets.device)
        return _labelled(positives, negatives)

    @staticmethod
    def count(targets: Tensor) -> int:
        """Number of labelled pairs in ``targets``."""
        return int(targets.size(1))

    @staticmethod
    def resize_targets(targets: Tensor, num_nodes: int) -> Tensor:
        """The pairs unchanged: they name the client's own nodes, which stay first in a larger graph."""
        return targets

    def _logits(self, z: Tensor, targets: Tensor) -> Tensor:
        return self.decoder(z, targets[:2], sigmoid=False)

    def loss(self, z: Tensor, targets: Tensor) -> Tensor:
        """The reconstruction loss of the training ``targets`` (see the class docstring)."""
        if self.reconstruction == "dense":
            return self._dense_loss(z, targets)
        logits, labels = self._logits(z, targets), targets[2].to(z.dtype)
        total = z.sum() * 0.0
        for part in (labels == 1, labels == 0):
            if part.any():
                total = total + F.binary_cross_entropy_with_logits(logits[part], labels[part])
        return total

    @staticmethod
    def _dense_loss(z: Tensor, targets: Tensor) -> Tensor:
        """Kipf's weighted BCE over all pairs of the own nodes; ``targets``: the 1-labelled pairs of
        :math:`A_{train} + I` (:meth:`training_targets`)."""
        pairs = targets[:2]
        self_pairs = pairs[0] == pairs[1]
        n, edges = int(self_pairs.sum()), int((~self_pairs).sum())
        if n == 0:
            return z.sum() * 0.0
        own = z[:n]
        labels = torch.zeros(n, n, dtype=z.dtype, device=z.device)
        labels[pairs[0], pairs[1]] = 1.0
        non_edges = n * n - edges
        pos_weight = torch.tensor(non_edges / max(edges, 1), dtype=z.dtype, device=z.device)
        bce = F.binary_cross_entropy_with_logits(own @ own.t(), labels, pos_weight=pos_weight)
        return n * n / (2.0 * non_edges) * bce

    def evaluate(self, z: Tensor, targets: Tensor) -> dict[str, float]:
        """``auc``, ``ap`` (in %), ``loss_sum`` (BCE summed over pairs) and ``count`` (pairs) of one full batch."""
        logits, labels = self._logits(z, targets), targets[2]
        return {
            "auc": roc_auc(logits, labels),
            "ap": average_precision(logits, labels),
            "loss_sum": float(F.binary_cross_entropy_with_logits(logits, labels.to(z.dtype), reduction="sum")),
            "count": float(labels.numel()),
        }

    @staticmethod
    def finalize(sums: dict[str, float]) -> dict[str, float]:
        """``auc``, ``ap`` (in %) and the mean BCE ``loss`` per pair."""
        count = sums["count"]
        return {"auc": sums.get("auc", math.nan), "ap": sums.get("ap", math.nan),
                "loss": sums["loss_sum"] / count if count else math.nan}


def _labelled(positives: Tensor, negatives: Tensor) -> Tensor:
    """``(3, m)`` pairs: the positives with label 1, then the negatives with label 0."""
    labels = torch.cat([positives.new_ones(positives.size(1)), negatives.new_zeros(negatives.size(1))])
    return torch.cat([torch.cat([positives, negatives], dim=1), labels[None]])


GraphTask = LinkPredictionTask | NodeClassificationTask
Task = ClassificationTask | ForecastingTask | GraphTask


def add_sums(total: dict[str, float], part: dict[str, float]) -> dict[str, float]:
    """Element-wise sum of two metric-sum dictionaries."""
    return {key: total.get(key, 0.0) + value for key, value in part.items()}


TASKS: dict[str, type[Task]] = {"classification": ClassificationTask, "forecasting": ForecastingTask,
                                "link_prediction": LinkPredictionTask, "node_classification": NodeClassificationTask}
GRAPH_TASKS = ("link_prediction", "node_classification")


def build_task(name: str, **options: Any) -> Task:
    """The registered task ``name`` with ``options`` (e.g. ``mean``, ``std`` for ``forecasting``)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; choose one of {sorted(TASKS)}")
    accepted = [f.name for f in dataclasses.fields(TASKS[name]) if f.name != "name"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise TypeError(f"task {name!r} got unknown option(s) {unknown}; accepted options: {accepted or 'none'}")
    return TASKS[name](**options)


__all__ = ["ClassificationTask", "ForecastingTask", "LinkPredictionTask", "NodeClassificationTask", "GraphTask", "Task",
           "build_task", "add_sums", "TASKS", "GRAPH_TASKS", "GRAPH_SPLITS"]
