r"""FedSage and FedSage+ (Zhang, Yang, Chen, Yiu and Wang, "Subgraph Federated Learning with Missing Neighbor
Generation", NeurIPS 2021).

**FedSage** (``plus=False``) is FedAvg of the GNN over the clients' subgraphs: every round each client
trains the global model on its own subgraph and the server averages (weighted by the clients' numbers
of nodes :math:`|V_k|`, as every subgraph method here). It is :class:`~gflkit.algorithms.fedavg.FedAvg`
exactly.

**FedSage+** (``plus=True``) first mends each client's subgraph with generated neighbours standing for
the ones cut off with the other clients, then runs FedSage on the mended subgraphs:

1. **Impairment.** Client :math:`k` hides :math:`\lfloor h\,|V_k| \rfloor` random nodes of its
   input graph :math:`G_k` (:func:`hide_nodes`, :math:`h` = ``hidden_portion``) with all their edges. On
   the impaired graph :math:`\bar G_k` every kept node :math:`v` has a known number of missing neighbours
   :math:`n_v` (its hidden neighbours) and their features :math:`x_{v,1..\min(n_v,P)}`, the first
   :math:`P` = ``num_pred`` in ascending node id, zero-padded (:func:`impair`).
2. **NeighGen** (:class:`NeighGen`): a 2-layer GraphSAGE encoder :math:`z = H^e(\bar G_k)`,
   dGen :math:`\tilde n_v = \mathrm{ReLU}(w^\top z_v + b)` and fGen, an MLP with Gaussian noise on its
   input, :math:`\tilde x_{v,1..P} = \tanh(\mathrm{MLP}(z_v + \epsilon))`. Its loss on :math:`\bar G_k`
   (:func:`neighgen_loss`) is

   .. math:: L_k = a\, \frac{1}{|\bar V_k|}\sum_v \mathrm{SmoothL1}(\tilde n_v, n_v)
                 + b\, L^f_k, \qquad
             L^f_k = \frac{1}{|\bar V_k| P} \sum_v [n_v > 0] \sum_{j < \min(P, \lfloor\tilde n_v\rfloor)}
                     \min_{i < \min(P, n_v)} \tfrac1F \lVert \tilde x_{v,j} - x_{v,i} \rVert^2

   (the greedy matching loss, :func:`greedy_feature_loss`).
3. **Federated NeighGen**: ``gen_rounds`` rounds of FedAvg of the whole NeighGen (weighted by
   :math:`|V_k|`, every client each round), each client running ``gen_epochs`` full-batch Adam steps
   (``gen_lr``, ``gen_weight_decay``) from the averaged NeighGen. This phase runs once, before the
   engine's first round, and is not counted in the engine's rounds.
4. **Mending**: the trained NeighGen runs (eval mode, seeded noise) on each client's *whole*
   input graph :math:`G_k`; node :math:`v` gets :math:`\min(P, \lfloor\tilde n_v\rfloor)` new neighbours
   with features :math:`\tilde x_{v,1..}`, each linked to :math:`v` in both directions
   (:func:`generated_neighbours`, :func:`mend`). The mended graph replaces the client's model input
   (:meth:`~gflkit.federation.GraphFederation.replace_graph`); generated nodes come after the client's
   own nodes and are never targets of any split.
5. FedSage (FedAvg) on the mended graphs for the engine's rounds.

Documented simplifications and choices:

* **Cross-client fGen loss.** The paper trains fGen with a cross-subgraph term (each client's fGen
  also matches neighbours of random nodes of the other clients, through exchanged gradients; the authors'
  code reads the other clients' features directly). Here NeighGen is federated by **FedAvg of its
  weights only**: no client ever sees another's features or gradients.
* **No classifier term** (the paper's :math:`c\, L^c`): the authors train a classifier on the impaired,
  mended graph jointly with NeighGen; here NeighGen is trained by :math:`a L^d + b L^f` alone, so that it
  is independent of the task (link prediction has no labels) and of the federation's model. The
  classifier of step 5 is the federation's model (e.g. the VGAE with its readout), not GraphSAGE.
* **Which nodes.** Any node may be hidden (a random :math:`h` of the nodes; the authors' code hides
  only nodes outside its train and test splits, OpenFGL only validation nodes) and the NeighGen losses
  run over all kept nodes (no labels are involved; the authors' code uses its training nodes). Mending
  predicts on the client's whole graph, whereas the authors' code predicts on the impaired graph and
  attaches the generated nodes to the whole graph.
* **No separate local pre-training**: the authors' code first trains each NeighGen alone for
  ``gen_epochs`` epochs, then ``gen_epochs`` federated epochs; here all of it is the federated phase.
* **Link prediction.** The input graph, and so everything above, is the client's *training* edges only,
  so held-out edges never inform NeighGen. Generated nodes only take part in message passing: positive
  and negative training pairs are drawn among the client's own nodes
  (:meth:`~gflkit.federation.GraphFederation.batches`) and evaluation pairs are unchanged.
  (The VGAE's KL term averages over all nodes of the mended graph.)
* The matching loss takes the minimum over the true missing neighbours only (OpenFGL's ``greedy_loss``;
  the authors' also compares with the zero vector).

Randomness (hidden nodes, NeighGen's initialisation, its noise and dropout, the mending noise) comes
from streams derived from ``(seed, FEDSAGE, purpose, …)``. The generated neighbours are part of
:meth:`FedSage.state_dict`, so a resumed run neither repeats the NeighGen phase nor differs from the
uninterrupted one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.nn import SAGEConv
from torch_geometric.utils import subgraph

from gflkit.algorithms.fedavg import FedAvg
from gflkit.federation import Federation, GraphFederation, LocalResult
from gflkit.seeding import FEDSAGE, derive_seed, generator, seed_global_rng
from gflkit.state import FlatModule

_HIDE, _INIT, _NOISE, _DROPOUT, _MEND = range(5)


@dataclass(frozen=True)
class FedSageParams:
    """Hyper-parameters of FedSage / FedSage+ (defaults: the authors' code, ``src/utils/config.py``).

    Attributes:
        plus: FedSage+ (missing-neighbour generation) or plain FedSage (FedAvg on the subgraphs).
        hidden_portion: :math:`h`, the fraction of a client's nodes hidden to train NeighGen (0.5;
            also OpenFGL's).
        num_pred: :math:`P`, the most neighbours generated per node (``num_pred`` 5; OpenFGL's ``max_pred``).
        gen_rounds: FedAvg rounds of NeighGen (20, the authors' ``gen_epochs`` of federated training; OpenFGL's
            ``gen_rounds``: 10).
        gen_epochs: local full-batch steps of NeighGen per round (1: one step per federated epoch, as the
            authors' loop).
        gen_lr, gen_weight_decay: NeighGen's Adam (0.001, 1e-4).
        hidden, latent_dim: widths of the encoder's two layers (32, 128); fGen's hidden layers are the
            authors' 256 and 2048.
        dropout: NeighGen's dropout (0.5).
        a, b: weights of dGen's and fGen's losses (1, 1; the classifier term c is not used, see the module
            docstring).
    """

    plus: bool = True
    hidden_portion: float = 0.5
    num_pred: int = 5
    gen_rounds: int = 20
    gen_epochs: int = 1
    gen_lr: float = 1e-3
    gen_weight_decay: float = 1e-4
    hidden: int = 32
    latent_dim: int = 128
    dropout: float = 0.5
    a: float = 1.0
    b: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.hidden_portion < 1:
            raise ValueError(f"fedsage hidden_portion must lie in [0, 1), got {self.hidden_portion}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"fedsage dropout must lie in [0, 1), got {self.dropout}")
        for name in ("num_pred", "gen_rounds", "gen_epochs", "hidden", "latent_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"fedsage {name} must be >= 1, got {getattr(self, name)}")
        if self.gen_lr <= 0 or self.gen_weight_decay < 0 or min(self.a, self.b) < 0:
            raise ValueError(f"fedsage needs gen_lr > 0 and gen_weight_decay, a, b >= 0, got gen_lr={self.gen_lr}, "
                             f"gen_weight_decay={self.gen_weight_decay}, a={self.a}, b={self.b}")


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
    """

    graph: Data
    kept: Tensor
    missing: Tensor
    missing_features: Tensor


def hide_nodes(num_nodes: int, portion: float, rng: torch.Generator) -> Tensor:
    r"""A ``(num_nodes,)`` mask of :math:`\lfloor \text{portion} \cdot n \rfloor` uniformly random hidden nodes."""
    hidden = torch.zeros(num_nodes, dtype=torch.bool)
    hidden[torch.randperm(num_nodes, generator=rng)[:int(portion * num_nodes)]] = True
    return hidden


def impair(x: Tensor, edge_index: Tensor, hidden: Tensor, num_pred: int) -> Impaired:
    """Remove the ``hidden`` nodes (a boolean mask) and their edges; count and collect each kept node's
    hidden neighbours (``edge_index``: both directions of every edge, no self-loops)."""
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
    return Impaired(Data(x=x[kept], edge_index=kept_edges), kept, missing, missing_features)


# ------------------------------------------------------------------------------------------- NeighGen
class NeighGen(nn.Module):
    """Encoder (2-layer GraphSAGE), dGen (missing-neighbour count) and fGen (their features); module docstring."""

    def __init__(self, num_features: int, num_pred: int, hidden: int = 32, latent_dim: int = 128,
                 dropout: float = 0.5, fgen_widths: tuple[int, int] = (256, 2048)):
        super().__init__()
        self.num_features, self.num_pred, self.dropout = num_features, num_pred, dropout
        self.conv1 = SAGEConv(num_features, hidden)
        self.conv2 = SAGEConv(hidden, latent_dim)
        self.dgen = nn.Linear(latent_dim, 1)
        self.fgen = nn.Sequential(nn.Linear(latent_dim, fgen_widths[0]), nn.ReLU(),
                                  nn.Linear(fgen_widths[0], fgen_widths[1]), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(fgen_widths[1], num_pred * num_features), nn.Tanh())

    def forward(self, x: Tensor, edge_index: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """Predicted counts ``(n,)`` (real, >= 0) and neighbour features ``(n, P, F)``; ``noise``: fGen's ε."""
        h = F.dropout(F.relu(self.conv1(x, edge_index)), self.dropout, self.training)
        z = F.relu(self.conv2(h, edge_index))
        counts = F.relu(self.dgen(z)).squeeze(-1)
        return counts, self.fgen(z + noise).view(-1, self.num_pred, self.num_features)


def predicted_counts(counts: Tensor, num_pred: int) -> Tensor:
    r""":math:`\min(P, \lfloor \tilde n_v \rfloor)` as integers."""
    return counts.detach().floor().long().clamp(0, num_pred)


def greedy_feature_loss(features: Tensor, counts: Tensor, true_features: Tensor, missing: Tensor) -> Tensor:
    """fGen's greedy matching loss :math:`L^f` (module docstring): each of a node's first
    ``floor(counts)`` generated neighbours against the nearest of its true missing neighbours."""
    num_pred = features.size(1)
    distance = (features[:, :, None] - true_features[:, None]).square().mean(-1)  # (n, P generated, P true)
    slots = torch.arange(num_pred, device=features.device)
    true_slot = slots[None] < missing.clamp(max=num_pred)[:, None]
    nearest = distance.masked_fill(~true_slot[:, None], float("inf")).min(-1).values
    generated = (slots[None] < predicted_counts(counts, num_pred)[:, None]) & (missing[:, None] > 0)
    return torch.where(generated, nearest, 0.0).sum() / max(nearest.numel(), 1)


def neighgen_loss(model: NeighGen, impaired: Impaired, noise: Tensor, a: float, b: float) -> Tensor:
    """:math:`a L^d + b L^f` of ``model`` on one client's impaired graph."""
    counts, features = model(impaired.graph.x, impaired.graph.edge_index, noise)
    count_loss = F.smooth_l1_loss(counts, impaired.missing.to(counts.dtype))
    return a * count_loss + b * greedy_feature_loss(features, counts, impaired.missing_features, impaired.missing)


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


def impair_clients(fed: GraphFederation, params: FedSageParams) -> list[Impaired]:
    """Step 1 for every client: its input graph with ``hidden_portion`` of its nodes hidden (seeded per client)."""
    hidden = [hide_nodes(g.num_nodes, params.hidden_portion, generator(fed.seed, FEDSAGE, _HIDE, k))
              for k, g in enumerate(fed.graphs)]
    return [impair(g.x, g.edge_index, mask, params.num_pred) for g, mask in zip(fed.graphs, hidden)]


def init_neighgen(fed: GraphFederation, params: FedSageParams) -> NeighGen:
    """The common initial NeighGen (seeded; torch's global generator is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(fed.seed, FEDSAGE, _INIT))
        model = NeighGen(fed.graphs[0].x.size(1), params.num_pred, params.hidden, params.latent_dim, params.dropout)
    return model.to(fed.device)


def _noise(fed: GraphFederation, num_nodes: int, latent_dim: int, *keys: int) -> Tensor:
    return torch.randn(num_nodes, latent_dim, generator=generator(fed.seed, FEDSAGE, *keys)).to(fed.device)


def train_neighgen(fed: GraphFederation, impaired: list[Impaired], params: FedSageParams) -> NeighGen:
    """Steps 2–3: ``gen_rounds`` rounds of FedAvg of NeighGen over every client's impaired graph."""
    model = init_neighgen(fed, params)
    flat = FlatModule(model)
    weights = fed.num_train / fed.num_train.sum()
    average = flat.vector.detach().clone()
    for round in range(params.gen_rounds):
        total = torch.zeros_like(average)
        for k, data in enumerate(impaired):
            flat.load(average)
            model.train()
            optimizer = torch.optim.Adam(flat.parameters, lr=params.gen_lr, weight_decay=params.gen_weight_decay)
            for epoch in range(params.gen_epochs):
                seed_global_rng(derive_seed(fed.seed, FEDSAGE, _DROPOUT, round, k, epoch), fed.device)
                noise = _noise(fed, data.graph.num_nodes, params.latent_dim, _NOISE, round, k, epoch)
                loss = neighgen_loss(model, data, noise, params.a, params.b)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            total += weights[k] * flat.vector.detach()
        average = total
    flat.load(average)
    return model.eval()


@torch.no_grad()
def generate(fed: GraphFederation, model: NeighGen, params: FedSageParams) -> list[tuple[Tensor, Tensor]]:
    """Step 4's generation: every client's generated neighbours ``(anchors, features)`` on its whole input graph."""
    model.eval()
    return [generated_neighbours(*model(g.x, g.edge_index, _noise(fed, g.num_nodes, params.latent_dim, _MEND, k)))
            for k, g in enumerate(fed.graphs)]


# ------------------------------------------------------------------------------------------ the method
class FedSage(FedAvg):
    """FedSage (FedAvg on the subgraphs) and FedSage+ (FedAvg on subgraphs mended by a federated NeighGen);
    see the module docstring.

    The NeighGen phase runs at the first client update of a run rather than in :meth:`setup`, so that a run
    resumed from a checkpoint takes the generated neighbours from :meth:`state_dict` instead of training
    NeighGen again.
    """

    name = "fedsage"
    Params = FedSageParams

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.generated: list[tuple[Tensor, Tensor]] | None = None
        self.mended = False
        if not self.params.plus:
            return
        if not isinstance(fed, GraphFederation):
            raise ValueError("fedsage with plus=True generates missing neighbours of subgraph clients; "
                             "use a graph task, or plus=False (plain FedSage, i.e. FedAvg)")
        if any(g.num_nodes != n for g, n in zip(fed.graphs, fed.num_nodes)):
            raise ValueError("fedsage+ needs the clients' own subgraphs: this federation's inputs were already "
                             "enlarged (mended by an earlier run); build a fresh federation")

    def state_dict(self) -> dict[str, Any]:
        return {"generated": self.generated}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generated = state["generated"]

    def artifacts(self) -> dict[str, Tensor]:
        if self.generated is None:
            return {}
        return {"generated_neighbours": torch.tensor([anchors.numel() for anchors, _ in self.generated])}

    def client_update(self, fed: Federation, client: int, round: int) -> LocalResult:
        if self.params.plus and not self.mended:
            self.mend(fed)
        return super().client_update(fed, client, round)

    def mend(self, fed: GraphFederation) -> None:
        """Steps 1–4 (once per run; kept in the state) and the swap of every client's input for its mended graph."""
        if self.generated is None:
            neighgen = train_neighgen(fed, impair_clients(fed, self.params), self.params)
            self.generated = generate(fed, neighgen, self.params)
        for k, (anchors, features) in enumerate(self.generated):
            fed.replace_graph(k, mend(fed.graphs[k], anchors.to(fed.device), features.to(fed.device)))
        self.mended = True


__all__ = ["FedSage", "FedSageParams", "Impaired", "NeighGen", "generate", "generated_neighbours",
           "greedy_feature_loss", "hide_nodes", "impair", "impair_clients", "init_neighgen", "mend", "neighgen_loss",
           "predicted_counts", "train_neighgen"]
