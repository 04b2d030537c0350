r"""FedSage and FedSage+ (Zhang, Yang, Chen, Yiu and Wang, "Subgraph Federated Learning with Missing Neighbor
Generation", NeurIPS 2021), as the authors' code runs them (github.com/zkhku/fedsage).

**FedSage** (``plus=False``) is FedAvg of the GNN over the clients' subgraphs: every round each client
trains the global model on its own subgraph and the server averages (weighted by the clients' numbers
of nodes :math:`|V_k|`, as every subgraph method here). It is :class:`~gflkit.algorithms.fedavg.FedAvg`
exactly.

**FedSage+** (``plus=True``) first mends each client's subgraph with generated neighbours standing for
the ones cut off with the other clients, then runs FedSage on the mended subgraphs. Each client has its
own NeighGen (:mod:`gflkit.algorithms.neighgen`: GCN encoder, dGen, fGen and, for node classification,
a classifier on the mended graph), all starting from one common initialisation:

1. **Impairment.** Client :math:`k` hides :math:`\lfloor h\,|V_k| \rfloor` random nodes of its input graph
   (:func:`~gflkit.algorithms.neighgen.hide_nodes`, :math:`h` = ``hidden_portion``).
2. **Local NeighGen training**: ``local_gen_epochs`` full-batch Adam steps of the whole NeighGen on
   :math:`a L^d + b L^f + c L^c` (the authors' ``LocalOwner.train``).
3. **Federated fGen training** (the authors' ``train_fedgen``): the encoder, dGen and classifier are
   frozen; only fGen takes ``gen_rounds`` × ``gen_epochs`` further Adam steps (a new optimiser, kept
   through the phase), on :math:`\frac1K (a L^d + b L^f + c L^c + b \sum_{j\ne k} L^f(x^{(j)}))`, the
   cross-client terms matching the generated features against neighbours of random nodes of every other
   client (:func:`~gflkit.algorithms.neighgen.cross_client_targets`, drawn anew at every step).
4. **Mending**: each client's NeighGen runs (eval mode, seeded noise) on its *whole* input graph; node
   :math:`v` gets :math:`\min(P, \lfloor\tilde n_v\rfloor)` new neighbours with features
   :math:`\tilde x_{v,1..}`, each linked to :math:`v` in both directions. The mended graph replaces the
   client's model input (:meth:`~gflkit.federation.GraphFederation.replace_graph`); generated nodes come
   after the client's own nodes and are never targets of any split. The number each client generated is
   the ``generated_neighbours`` artifact.
5. FedSage (FedAvg of the federation's model) on the mended graphs for the engine's rounds.

Documented choices where this differs from the authors' code:

* **Cross-client terms in simulation.** The paper computes them with gradients exchanged between
  clients (client :math:`j` evaluates the term on its own features); here the simulation reads client
  :math:`j`'s features directly, which gives the same gradient.
* **Which nodes.** Any node may be hidden (the authors hide only nodes outside their train and test
  splits) and dGen / fGen's losses run over all kept nodes (the authors': their training nodes); the
  classifier term over the kept nodes with a training label. Link prediction has no labels: its
  NeighGen has no classifier (:math:`c` unused). Mending predicts on the client's whole graph, whereas
  the authors predict on the impaired graph and attach the generated nodes to the whole graph.
* **The classifier of step 5** is the federation's model (e.g. the VGAE with its readout), trained by
  the engine's optimiser, not the authors' GraphSAGE.
* **dGen's bias starts at 0** (:mod:`gflkit.algorithms.neighgen`): with PyTorch's default NeighGen could
  start dead and generate nothing.
* **Link prediction.** The input graph, and so everything above, is the client's *training* edges only,
  so held-out edges never inform NeighGen. Generated nodes only take part in message passing: positive
  and negative training pairs are drawn among the client's own nodes and evaluation pairs are unchanged
  (the VGAE's KL term averages over all nodes of the mended graph).
* The matching loss takes the minimum over the true missing neighbours only (OpenFGL's ``greedy_loss``;
  the authors' also compares with the zero vector).

Randomness (hidden nodes, NeighGen's initialisation, its noise and dropout, the cross-client draws, the
mending noise) comes from streams derived from ``(seed, FEDSAGE, purpose, …)``. The generated neighbours
are part of :meth:`FedSage.state_dict`, so a resumed run neither repeats the NeighGen phase nor differs
from the uninterrupted one.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.algorithms.neighgen import (Impaired, NeighGen, cross_client_targets, generated_neighbours, hide_nodes,
                                        impair, mend, neighgen_loss)
from gflkit.federation import Federation, GraphFederation, LocalResult
from gflkit.seeding import FEDSAGE, derive_seed, generator, seed_global_rng
from gflkit.state import FlatModule

_HIDE, _INIT, _NOISE, _DROPOUT, _MEND, _LOCAL, _FEDERATED, _CROSS = range(8)


@dataclass(frozen=True)
class FedSageParams:
    """Hyper-parameters of FedSage / FedSage+ (defaults: the authors' code, ``src/utils/config.py``).

    Attributes:
        plus: FedSage+ (missing-neighbour generation) or plain FedSage (FedAvg on the subgraphs).
        hidden_portion: :math:`h`, the fraction of a client's nodes hidden to train NeighGen (0.5;
            also OpenFGL's).
        num_pred: :math:`P`, the most neighbours generated per node (``num_pred`` 5; OpenFGL's ``max_pred``).
        local_gen_epochs: full-batch steps of each client's whole NeighGen alone (20, the authors'
            ``gen_epochs`` of ``LocalOwner.train``); 0 skips the local phase.
        gen_rounds: federated epochs of fGen with the cross-client loss (20, the authors' ``gen_epochs``
            of ``train_fedgen``; OpenFGL's ``gen_rounds``: 10).
        gen_epochs: fGen steps per federated epoch (1, as the authors' loop).
        gen_lr, gen_weight_decay: NeighGen's Adam (0.001, 1e-4).
        hidden, latent_dim: widths of the encoder's two layers (32, 128; the classifier's hidden layer is
            ``hidden`` too); fGen's hidden layers are the authors' 256 and 2048.
        dropout: NeighGen's dropout (0.5).
        a, b, c: weights of dGen's, fGen's and the classifier's losses (1, 1, 1; ``c`` only with labels).
    """

    plus: bool = True
    hidden_portion: float = 0.5
    num_pred: int = 5
    local_gen_epochs: int = 20
    gen_rounds: int = 20
    gen_epochs: int = 1
    gen_lr: float = 1e-3
    gen_weight_decay: float = 1e-4
    hidden: int = 32
    latent_dim: int = 128
    dropout: float = 0.5
    a: float = 1.0
    b: float = 1.0
    c: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.hidden_portion < 1:
            raise ValueError(f"fedsage hidden_portion must lie in [0, 1), got {self.hidden_portion}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"fedsage dropout must lie in [0, 1), got {self.dropout}")
        for name in ("num_pred", "gen_rounds", "gen_epochs", "hidden", "latent_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"fedsage {name} must be >= 1, got {getattr(self, name)}")
        if self.local_gen_epochs < 0:
            raise ValueError(f"fedsage local_gen_epochs must be >= 0, got {self.local_gen_epochs}")
        if self.gen_lr <= 0 or self.gen_weight_decay < 0 or min(self.a, self.b, self.c) < 0:
            raise ValueError(f"fedsage needs gen_lr > 0 and gen_weight_decay, a, b, c >= 0, got gen_lr={self.gen_lr}, "
                             f"gen_weight_decay={self.gen_weight_decay}, a={self.a}, b={self.b}, c={self.c}")


def training_labels(fed: GraphFederation, client: int) -> Tensor | None:
    """The client's node-classification training labels (``-1``: none), or None for other tasks."""
    return fed.data.targets["train"][client] if fed.task.name == "node_classification" else None


def impair_clients(fed: GraphFederation, params: FedSageParams) -> list[Impaired]:
    """Step 1 for every client: its input graph with ``hidden_portion`` of its nodes hidden (seeded per client)."""
    hidden = [hide_nodes(g.num_nodes, params.hidden_portion, generator(fed.seed, FEDSAGE, _HIDE, k))
              for k, g in enumerate(fed.data.graphs)]
    return [impair(g.x, g.edge_index, mask, params.num_pred, training_labels(fed, k))
            for k, (g, mask) in enumerate(zip(fed.data.graphs, hidden))]


def init_neighgen(fed: GraphFederation, params: FedSageParams) -> NeighGen:
    """The common initial NeighGen (seeded; torch's global generator is left as it was), with a classifier
    over the federation's classes for node classification."""
    labels = [training_labels(fed, k) for k in range(fed.num_clients)]
    num_classes = 0 if labels[0] is None else int(max(int(y.max()) for y in labels)) + 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(fed.seed, FEDSAGE, _INIT))
        model = NeighGen(fed.data.graphs[0].x.size(1), params.num_pred, params.hidden, params.latent_dim, params.dropout,
                         num_classes)
    return model.to(fed.device)


def _noise(fed: GraphFederation, num_nodes: int, latent_dim: int, *keys: int) -> Tensor:
    return torch.randn(num_nodes, latent_dim, generator=generator(fed.seed, FEDSAGE, *keys)).to(fed.device)


def _step(fed: GraphFederation, model: NeighGen, optimizer: torch.optim.Optimizer, impaired: list[Impaired],
          client: int, params: FedSageParams, *keys: int, cross_client: bool = False) -> None:
    """One full-batch step of ``client``'s NeighGen; the federated phase's loss (``cross_client``) adds the
    cross-client terms and is divided by the number of clients, as the authors'."""
    data = impaired[client]
    seed_global_rng(derive_seed(fed.seed, FEDSAGE, _DROPOUT, *keys), fed.device)
    noise = _noise(fed, data.graph.num_nodes, params.latent_dim, _NOISE, *keys)
    cross = (cross_client_targets(fed.data.graphs, client, data.graph.num_nodes, params.num_pred,
                                  generator(fed.seed, FEDSAGE, _CROSS, *keys)) if cross_client else ())
    loss = neighgen_loss(model, data, noise, params.a, params.b, params.c, cross)
    if cross_client:
        loss = loss / fed.num_clients
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def train_neighgen(fed: GraphFederation, impaired: list[Impaired], params: FedSageParams) -> Tensor:
    """Steps 2–3: every client's trained NeighGen, the rows of a ``(K, d)`` matrix over one flat NeighGen.

    A client's federated phase reads only the other clients' features, never their NeighGens, so each
    client's two phases run one after the other.
    """
    flat = FlatModule(init_neighgen(fed, params))
    model, initial = flat.module.train(), flat.vector.detach().clone()
    rows = initial.repeat(fed.num_clients, 1)
    for k in range(fed.num_clients):
        flat.load(initial)
        optimizer = torch.optim.Adam(flat.parameters, lr=params.gen_lr, weight_decay=params.gen_weight_decay)
        for step in range(params.local_gen_epochs):
            _step(fed, model, optimizer, impaired, k, params, _LOCAL, k, step)
        fgen = torch.optim.Adam(model.fgen.parameters(), lr=params.gen_lr, weight_decay=params.gen_weight_decay)
        for round in range(params.gen_rounds):
            for step in range(params.gen_epochs):
                _step(fed, model, fgen, impaired, k, params, _FEDERATED, k, round, step, cross_client=True)
        rows[k] = flat.vector.detach()
    return rows


@torch.no_grad()
def generate(fed: GraphFederation, neighgens: Tensor, params: FedSageParams) -> list[tuple[Tensor, Tensor]]:
    """Step 4's generation: every client's generated neighbours ``(anchors, features)`` on its whole input
    graph, by its own NeighGen (row ``k`` of ``neighgens``, from :func:`train_neighgen`)."""
    flat = FlatModule(init_neighgen(fed, params).eval())
    generated = []
    for k, g in enumerate(fed.data.graphs):
        flat.load(neighgens[k])
        counts, features = flat.module(g.x, g.edge_index, _noise(fed, g.num_nodes, params.latent_dim, _MEND, k))
        generated.append(generated_neighbours(counts, features))
    return generated


# ------------------------------------------------------------------------------------------ the method
class FedSage(FedAvg):
    """FedSage (FedAvg on the subgraphs) and FedSage+ (FedAvg on subgraphs mended by a federated NeighGen);
    see the module docstring.

    The NeighGen phase runs at the first client update of a run rather than in :meth:`setup`, so that a run
    resumed from a checkpoint takes the generated neighbours from :meth:`state_dict` instead of training
    NeighGen again.
    """

    name = "fedsage"
    varying_state = ("generated",)
    client_step = "one_by_one"
    share = "all"  # FedAvg's whole-model sharing; no share option
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
        if any(g.num_nodes != n for g, n in zip(fed.data.graphs, fed.data.num_nodes)):
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
            fed.data.replace_graph(k, mend(fed.data.graphs[k], anchors.to(fed.device), features.to(fed.device)))
        self.mended = True


__all__ = ["FedSage", "FedSageParams", "generate", "impair_clients", "init_neighgen", "train_neighgen",
           "training_labels"]
