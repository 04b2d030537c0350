r"""NeighGen, FedSage+'s missing-neighbour generator (Zhang et al., NeurIPS 2021), and the impaired graphs
it learns from. The training protocol is :mod:`gflkit.algorithms.fedsage`'s.

**Impairment** (:func:`impair`): a client hides some of its nodes with all their edges; on the impaired
graph :math:`\bar G_k` every kept node :math:`v` has a known number of missing neighbours :math:`n_v`
(its hidden neighbours) and their features :math:`x_{v,1..\min(n_v,P)}`, the first :math:`P` in ascending
node id, zero-padded.

**NeighGen** (:class:`NeighGen`), as the authors' ``LocalSage_Plus``:

* encoder :math:`H^e`, a 2-layer GCN with the authors' row-normalised propagation
  :math:`\hat A = D^{-1}(A + I)` (:class:`MeanGCN`): :math:`z = \mathrm{ReLU}(\hat A\, \mathrm{dropout}(
  \mathrm{ReLU}(\hat A X W_1)) W_2)`, widths ``hidden`` 32 and ``latent_dim`` 128;
* dGen :math:`\tilde n_v = \mathrm{ReLU}(w^\top z_v + b)`, its bias initialised at 0 (PyTorch's uniform
  default drew a negative bias on PolBlogs, where the one-hot inputs make :math:`w^\top z_v` tiny: every
  :math:`\tilde n_v` was 0 with zero gradient, and no neighbour was ever generated);
* fGen :math:`\tilde x_{v,1..P} = \tanh(\mathrm{MLP}(z_v + \epsilon))`, :math:`\epsilon \sim N(0, I)`,
  hidden widths 256 and 2048, dropout before the output layer; computed only for the nodes with
  :math:`\lfloor\tilde n_v\rfloor \ge 1`, the only ones whose features any loss or the mending reads;
* for node classification a classifier :math:`H^c` (a 2-layer GCN of the same form, ReLU on its output as
  the authors') on the impaired graph **mended** with the generated neighbours
  (:meth:`NeighGen.classify_mended`).

**Loss** on :math:`\bar G_k` (:func:`neighgen_loss`):

.. math:: L_k = a\, \frac{1}{|\bar V_k|}\sum_v \mathrm{SmoothL1}(\tilde n_v, n_v) + b\, L^f(x) + c\, L^c
              + b \sum_{j \ne k} L^f(x^{(j)}),
          \qquad L^f(x) = \frac{1}{|\bar V_k| P} \sum_v [n_v > 0] \sum_{p < \min(P, \lfloor\tilde n_v\rfloor)}
                     \min_{i < \min(P, n_v)} \tfrac1F \lVert \tilde x_{v,p} - x_{v,i} \rVert^2

(the greedy matching loss, :func:`greedy_feature_loss`; the minimum is over the true missing neighbours
only, as OpenFGL's ``greedy_loss``). :math:`L^c` is the cross-entropy of :math:`H^c` on the kept labelled
nodes. The cross-client terms match the generated features against :math:`x^{(j)}`, features of ``P``
random neighbours (drawn with replacement) of random nodes of client :math:`j`'s graph
(:func:`cross_client_targets`); they are only used in FedSage+'s federated phase.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.nn import SimpleConv
from torch_geometric.utils import subgraph


# ----------------------------------------------------------------------------------------- impairment
@dataclass
class Impaired:
    """A client's impaired graph and NeighGen's targets on it.

    Attributes:
        graph: the graph without the hidden nodes (``x``, ``edge_index``), kept nodes relabelled in order.
        kept: ``(n',)`` ids of the kept nodes in the original graph.
        missing: ``(n',)`` number of hidden neighbours of each kept node, :math:`n_v`.
        missing_features: ``(n', P, F)`` features of the first :math:`\\min(n_v, P)` hidden neighbours
            (ascending id), zeros after.
        labels: ``(n',)`` training labels of the kept nodes (``-1``: none), or None (no labels: link prediction).
    """

    graph: Data
    kept: Tensor
    missing: Tensor
    missing_features: Tensor
    labels: Tensor | None = None


def hide_nodes(num_nodes: int, portion: float, rng: torch.Generator) -> Tensor:
    r"""A ``(num_nodes,)`` mask of :math:`\lfloor \text{portion} \cdot n \rfloor` uniformly random hidden nodes."""
    hidden = torch.zeros(num_nodes, dtype=torch.bool)
    hidden[torch.randperm(num_nodes, generator=rng)[:int(portion * num_nodes)]] = True
    return hidden


def impair(x: Tensor, edge_index: Tensor, hidden: Tensor, num_pred: int, labels: Tensor | None = None) -> Impaired:
    """Remove the ``hidden`` nodes (a boolean mask) and their edges; count and collect each kept node's
    hidden neighbours (``edge_index``: both directions of every edge, no self-loops); keep the kept
    nodes' ``labels`` (``(n,)``, ``-1`` for none) when given."""
    hidden = hidden.to(x.device)
    num_nodes = x.size(0)
    kept = torch.nonzero(~hidden).flatten()
    new_id = torch.full((num_nodes,), -1, dtype=torch.long, device=x.device)
    new_id[kept] = torch.arange(kept.numel(), device=x.device)
    source, target = edge_index
    lost = ~hidden[source] & hidden[target] & (source != target)
    order = torch.argsort(source[lost] * num_nodes + target[lost])
    owner, neighbour = new_id[source[lost][order]], target[lost][order]
    missing = torch.bincount(owner, minlength=kept.numel())
    rank = torch.arange(owner.numel(), device=x.device) - (missing.cumsum(0) - missing)[owner]
    first = rank < num_pred
    missing_features = x.new_zeros(kept.numel(), num_pred, x.size(1))
    missing_features[owner[first], rank[first]] = x[neighbour[first]]
    kept_edges, _ = subgraph(kept, edge_index, relabel_nodes=True, num_nodes=num_nodes)
    return Impaired(Data(x=x[kept], edge_index=kept_edges), kept, missing, missing_features,
                    None if labels is None else labels[kept])


# ------------------------------------------------------------------------------------------- NeighGen
class MeanGCN(nn.Module):
    r"""One GCN layer with row-normalised propagation, :math:`\hat A X W + b`, :math:`\hat A = D^{-1}(A + I)`
    (the mean over a node and its neighbours; the authors' ``GraphConvolution`` with their ``normalize``)."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.linear = nn.Linear(in_channels, out_channels)
        self.propagate = SimpleConv(aggr="mean", combine_root="self_loop")

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """``(n, out_channels)``; the bias may come before the mean, whose weights sum to 1."""
        return self.propagate(self.linear(x), edge_index)


class TwoLayerGCN(nn.Module):
    """``ReLU(gcn2(dropout(ReLU(gcn1(x)))))``, the authors' ``GNN`` (encoder and classifier alike)."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int, dropout: float):
        super().__init__()
        self.conv1, self.conv2, self.dropout = MeanGCN(in_channels, hidden), MeanGCN(hidden, out_channels), dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        """``(n, out_channels)``, non-negative."""
        h = F.dropout(F.relu(self.conv1(x, edge_index)), self.dropout, self.training)
        return F.relu(self.conv2(h, edge_index))


class NeighGen(nn.Module):
    """Encoder, dGen (missing-neighbour counts), fGen (their features) and, with ``num_classes``, the classifier
    on the mended graph; see the module docstring."""

    def __init__(self, num_features: int, num_pred: int, hidden: int = 32, latent_dim: int = 128,
                 dropout: float = 0.5, num_classes: int = 0, fgen_widths: tuple[int, int] = (256, 2048)):
        super().__init__()
        self.num_features, self.num_pred = num_features, num_pred
        self.encoder = TwoLayerGCN(num_features, hidden, latent_dim, dropout)
        self.dgen = nn.Linear(latent_dim, 1)
        nn.init.zeros_(self.dgen.bias)  # PyTorch's uniform default can start dGen's ReLU dead (module docstring)
        self.fgen = nn.Sequential(nn.Linear(latent_dim, fgen_widths[0]), nn.ReLU(),
                                  nn.Linear(fgen_widths[0], fgen_widths[1]), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(fgen_widths[1], num_pred * num_features), nn.Tanh())
        self.classifier = TwoLayerGCN(num_features, hidden, num_classes, dropout) if num_classes else None

    def forward(self, x: Tensor, edge_index: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """Predicted counts ``(n,)`` (real, >= 0) and neighbour features ``(n, P, F)``; ``noise``: fGen's ε.

        fGen runs only on the nodes predicted to have a missing neighbour: no loss and no mending reads the
        features of the others (left at 0), and fGen's ``2048 × P·F`` output layer is NeighGen's main cost.
        """
        z = self.encoder(x, edge_index)
        counts = F.relu(self.dgen(z)).squeeze(-1)
        active = torch.nonzero(predicted_counts(counts, self.num_pred) > 0).flatten()
        generated = self.fgen(z[active] + noise[active]).view(-1, self.num_pred, self.num_features)
        features = z.new_zeros(z.size(0), self.num_pred, self.num_features).index_put((active,), generated)
        return counts, features

    def classify_mended(self, graph: Data, counts: Tensor, features: Tensor) -> Tensor:
        """Class scores ``(n, C)`` of ``graph``'s own nodes by the classifier on ``graph`` mended with the
        generated neighbours (gradients reach fGen through the generated features)."""
        if self.classifier is None:
            raise ValueError("this NeighGen has no classifier: build it with num_classes > 0")
        mended = mend(graph, *generated_neighbours(counts, features))
        return self.classifier(mended.x, mended.edge_index)[:graph.num_nodes]


def predicted_counts(counts: Tensor, num_pred: int) -> Tensor:
    r""":math:`\min(P, \lfloor \tilde n_v \rfloor)` as integers."""
    return counts.detach().floor().long().clamp(0, num_pred)


def greedy_feature_loss(features: Tensor, counts: Tensor, true_features: Tensor, missing: Tensor) -> Tensor:
    """fGen's greedy matching loss :math:`L^f` (module docstring): each of a node's first
    ``floor(counts)`` generated neighbours against the nearest of its first ``min(P, missing)`` true ones."""
    num_pred = features.size(1)
    distance = (features[:, :, None] - true_features[:, None]).square().mean(-1)  # (n, P generated, P true)
    slots = torch.arange(num_pred, device=features.device)
    true_slot = slots[None] < missing.clamp(max=num_pred)[:, None]
    nearest = distance.masked_fill(~true_slot[:, None], float("inf")).min(-1).values
    generated = (slots[None] < predicted_counts(counts, num_pred)[:, None]) & (missing[:, None] > 0)
    return torch.where(generated, nearest, 0.0).sum() / max(nearest.numel(), 1)


def neighgen_loss(model: NeighGen, impaired: Impaired, noise: Tensor, a: float, b: float, c: float = 0.0,
                  cross_targets: list[Tensor] | tuple[Tensor, ...] = ()) -> Tensor:
    """:math:`L_k` of the module docstring for one client's impaired graph: the classifier term when ``c`` > 0
    and the model has a classifier and the graph labelled nodes; one cross-client term per ``cross_targets``."""
    graph = impaired.graph
    counts, features = model(graph.x, graph.edge_index, noise)
    missing = impaired.missing
    loss = a * F.smooth_l1_loss(counts, missing.to(counts.dtype))
    loss = loss + b * greedy_feature_loss(features, counts, impaired.missing_features, missing)
    for targets in cross_targets:
        loss = loss + b * greedy_feature_loss(features, counts, targets, missing)
    labelled = None if impaired.labels is None else impaired.labels >= 0
    if c > 0 and model.classifier is not None and labelled is not None and bool(labelled.any()):
        scores = model.classify_mended(graph, counts, features)
        loss = loss + c * F.cross_entropy(scores[labelled], impaired.labels[labelled])
    return loss


def cross_client_targets(graphs: list[Data], client: int, num_nodes: int, num_pred: int,
                         rng: torch.Generator) -> list[Tensor]:
    """For every client ``j`` other than ``client`` whose graph has an edge: ``(num_nodes, P, F)`` features of
    ``P`` random neighbours (with replacement) of ``num_nodes`` random non-isolated nodes of ``graphs[j]``."""
    targets = []
    for j, graph in enumerate(graphs):
        if j == client or graph.edge_index.size(1) == 0:
            continue
        source, neighbour = graph.edge_index.cpu()
        order = torch.argsort(source, stable=True)
        degree = torch.bincount(source, minlength=graph.num_nodes)
        start = degree.cumsum(0) - degree
        candidates = torch.nonzero(degree > 0).flatten()
        nodes = candidates[torch.randint(candidates.numel(), (num_nodes,), generator=rng)]
        offsets = (torch.rand(num_nodes, num_pred, generator=rng) * degree[nodes, None]).long()
        chosen = neighbour[order][start[nodes, None] + offsets]
        targets.append(graph.x[chosen.to(graph.x.device)])
    return targets


# -------------------------------------------------------------------------------------------- mending
def generated_neighbours(counts: Tensor, features: Tensor) -> tuple[Tensor, Tensor]:
    """The generated neighbours as ``(anchors, features)``: node ``v`` gets ``min(P, floor(counts_v))`` of
    them, its first generated feature vectors; ``anchors`` ``(G,)`` names the node each one attaches to."""
    num_pred = features.size(1)
    chosen = torch.arange(num_pred, device=counts.device)[None] < predicted_counts(counts, num_pred)[:, None]
    return torch.nonzero(chosen)[:, 0], features[chosen]


def mend(graph: Data, anchors: Tensor, features: Tensor) -> Data:
    """``graph`` plus one node per generated neighbour (after the graph's own nodes), linked both ways to its anchor."""
    new = graph.num_nodes + torch.arange(anchors.numel(), device=anchors.device)
    edges = torch.cat([graph.edge_index, torch.stack([anchors, new]), torch.stack([new, anchors])], dim=1)
    return Data(x=torch.cat([graph.x, features.to(graph.x.dtype)]), edge_index=edges)


__all__ = ["Impaired", "MeanGCN", "NeighGen", "TwoLayerGCN", "cross_client_targets", "generated_neighbours",
           "greedy_feature_loss", "hide_nodes", "impair", "mend", "neighgen_loss", "predicted_counts"]
