r"""FedSKA (Structure Knowledge-Assisted personalised FL, ECAI 2023) — Algorithm 1 of the paper.

One round:

1. **Clients.** Client ``k`` starts from the global model (the paper's "optional FedAvg", on by
   default) and trains with (Eqs. 9–10)

   .. math:: f_k(w) = \mathcal{L}_C(w) + \lambda\,\frac{1}{N_k}\sum_{i=1}^{N_k}
             \big(1 - \cos(h^{i}_{c,k}, h^{i}_{g,k})\big)

   where :math:`h^{i}_{c,k}` is the model's representation of the client's training sample ``i`` and
   :math:`h^{i}_{g,k}` the structure feature the server sent for that sample last round (no term in
   the first round). It then sends up the representations :math:`H^c_k = (h^{i}_{c,k})_i` of its
   training samples (``N_k × h``, in the order of its training split) — representations, never data
   or labels.
2. **Server, structure learning** (Sec. 3.2): the node feature of client ``k`` is its mean
   representation :math:`h^c_k = \frac1{N_k}\sum_i h^{i}_{c,k}`; :math:`E_S` epochs of the denoising
   objective give the learned graph :math:`S = G_S(H^c)`, and bootstrapping mixes it with an initial
   graph, :math:`A = \tau A_0 + (1-\tau) S` (``init_graph``: ``"given"``, the authors' choice — the
   normalised given graph, e.g. clients linked when they share a label; ``"features"`` — the
   generator's graph at initialisation, the kNN cosine graph of the first round's client features,
   which needs no prior knowledge). With ``graph="given"`` the given graph (``given_graph``, with
   self-loops and symmetric normalisation) replaces :math:`A` (the paper's Table 3 ablation, Figure 6).
3. **Server, structure features** (Sec. 3.3, Eqs. 7–8), **per sample**: position ``i`` of every
   client forms one graph signal over the clients, and
   :math:`H^{g,i} = \mathrm{GNN}_E(A, H^{c,i})` for every position ``i`` (the authors' server stacks
   the clients' ``i``-th samples the same way; a client with fewer samples than the largest one
   repeats its own cyclically to fill the positions, so every position carries real representations).
   For :math:`E_g` epochs each client returns :math:`\nabla_{h^{i}_{g,k}} l_k` for its own positions,
   the gradient of its task loss when its own head predicts sample ``i``'s label from
   :math:`h^{i}_{g,k}` (Eq. 8a, mean over its samples); the server back-propagates the stacked
   gradients through :math:`\mathrm{GNN}_E` (8b–8c) and takes one full-batch Adam step (8d). The final
   :math:`H^g_k` (``N_k × h``) goes back to client ``k``, whose Eq. 10 pairs sample ``i`` with row ``i``.

Defaults follow the authors' MNIST scripts (NOTES.md): k = 30, r = 0.01 with N(0, 1) noise, τ = 0.9,
bootstrapping from the given graph, E_S = E_g = 10, server Adam lr 0.01 and weight decay 0.01,
hidden 64, λ = 0.01.

Deviations from the official code, on purpose: the authors' server runs the clients' encoders on their
raw data stacked on the server ("split learning"). Here, as in the paper, only representations travel
up and only gradients with respect to the structure features come back; :class:`StructureServer`
never sees client data or labels. The authors train :math:`\mathrm{GNN}_E` with Adam steps on
minibatches of 32 positions for :math:`E_g - 1` epochs; here each of the :math:`E_g` epochs is one
full-batch step (one round trip to the clients per step instead of one per minibatch).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from gflkit.algorithms.fedavg import FedAvg
from gflkit.communication import Communication
from gflkit.federation import Federation, LocalResult
from gflkit.graphs.adjacency import sym_normalize
from gflkit.graphs.gcn import DenseGCN
from gflkit.graphs.given import GIVEN_GRAPHS, given_graph
from gflkit.graphs.structure_learner import NOISE_KINDS, StructureLearner
from gflkit.seeding import FEDSKA_SERVER_INIT, FEDSKA_SERVER_NOISE, derive_seed
from gflkit.training import LocalStep

GRAPHS = ("learned", "given")
INIT_GRAPHS = ("given", "features")


@dataclass(frozen=True)
class FedSKAParams:
    """Hyper-parameters of FedSKA (defaults: the authors' MNIST setting)."""

    weight: float = 0.01  # λ of L_S: 0.01 MNIST / CIFAR-10, 0.1 Shakespeare, 1.0 METR-LA
    k: int = 30  # neighbours per client in the learned graph
    ratio: float = 0.01  # r: fraction of client-feature entries corrupted for self-supervision
    noise: str = "normal"  # "normal" (add N(0, 1)) or "mask" (zero the entries)
    tau: float = 0.9  # bootstrapping weight of the initial graph
    structure_epochs: int = 10  # E_S
    encoder_epochs: int = 10  # E_g
    server_lr: float = 0.01
    server_weight_decay: float = 0.01
    hidden: int = 64
    graph: str = "learned"  # "learned" or "given" (Table 3)
    init_graph: str = "given"  # A_0 of bootstrapping: "given" (the authors') or "features" (round-1 kNN graph)
    given_graph: str = "label_sharing"  # which given graph (gflkit.graphs.given.GIVEN_GRAPHS)
    fedavg: bool = True  # the "optional FedAvg of local models" of Algorithm 1

    def __post_init__(self) -> None:
        if self.weight < 0:
            raise ValueError(f"fedska weight (λ of the structure loss) must be >= 0, got {self.weight}")
        if self.k < 1:
            raise ValueError(f"fedska k must be >= 1 neighbour, got {self.k}")
        if not 0 < self.ratio <= 1:
            raise ValueError(f"fedska ratio r must lie in (0, 1], got {self.ratio}")
        if self.noise not in NOISE_KINDS:
            raise ValueError(f"fedska noise must be one of {NOISE_KINDS}, got {self.noise!r}")
        if not 0 <= self.tau <= 1:
            raise ValueError(f"fedska tau must lie in [0, 1], got {self.tau}")
        if self.structure_epochs < 1 or self.encoder_epochs < 1:
            raise ValueError("fedska structure_epochs (E_S) and encoder_epochs (E_g) must be >= 1")
        if self.graph not in GRAPHS:
            raise ValueError(f"fedska graph must be one of {GRAPHS}, got {self.graph!r}")
        if self.init_graph not in INIT_GRAPHS:
            raise ValueError(f"fedska init_graph must be one of {INIT_GRAPHS}, got {self.init_graph!r}")
        if self.given_graph not in GIVEN_GRAPHS:
            raise ValueError(f"fedska given_graph must be one of {list(GIVEN_GRAPHS)}, got {self.given_graph!r}")


class StructureServer:
    """FedSKA's server: structure learner, bootstrapped graph and GNN encoder.

    The structure learner takes the ``K × h`` matrix of mean client features; the encoder the
    ``P × K × h`` per-sample representations (position ``i`` of every client is one graph signal) and a
    function that stands for the round-trip to the clients. It holds no reference to client data.
    """

    def __init__(self, dim: int, params: FedSKAParams):
        self.params = params
        self.learner = StructureLearner(dim, params.k, params.ratio, params.noise, params.hidden,
                                        lr=params.server_lr)
        self.encoder = DenseGCN(dim, params.hidden, dim, layers=1)
        self.encoder_optimizer = torch.optim.Adam(
            self.encoder.parameters(), lr=params.server_lr, weight_decay=params.server_weight_decay
        )
        self.initial_graph: Tensor | None = None
        self.adjacency: Tensor | None = None
        self.denoising_losses: list[float] = []

    def to(self, device: torch.device) -> "StructureServer":
        """Move the learner and the encoder (their optimisers follow the parameters)."""
        self.learner.to(device)
        self.encoder.to(device)
        return self

    def learn_graph(self, features: Tensor, generator: torch.Generator) -> Tensor:
        """Step (2): fit the learner for E_S epochs on the ``K × h`` client features, then bootstrap with
        the initial graph (set beforehand for ``init_graph="given"``, else the generator's first graph)."""
        if self.initial_graph is None:
            with torch.no_grad():
                self.initial_graph = self.learner.generator(features)
        learned, losses = self.learner.fit(features, self.params.structure_epochs, generator)
        self.denoising_losses.extend(losses)
        self.adjacency = self.params.tau * self.initial_graph + (1 - self.params.tau) * learned
        return self.adjacency

    def train_encoder(self, features: Tensor, client_gradients: Callable[[Tensor], Tensor]) -> Tensor:
        """Step (3), Eq. 8: E_g Adam steps of GNN_E on the ``P × K × h`` representations, driven by the
        clients' gradients w.r.t. their entries of :math:`H^g`; returns the final :math:`H^g` (detached)."""
        for _ in range(self.params.encoder_epochs):
            structure = self.encoder(features, self.adjacency)
            gradients = client_gradients(structure.detach())
            self.encoder_optimizer.zero_grad()
            structure.backward(gradients)
            self.encoder_optimizer.step()
        with torch.no_grad():
            return self.encoder(features, self.adjacency)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume."""
        return {
            "learner": self.learner.state_dict(),
            "learner_optimizer": self.learner.optimizer.state_dict(),
            "encoder": self.encoder.state_dict(),
            "encoder_optimizer": self.encoder_optimizer.state_dict(),
            "initial_graph": self.initial_graph,
            "adjacency": self.adjacency,
            "denoising_losses": list(self.denoising_losses),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.learner.load_state_dict(state["learner"])
        self.learner.optimizer.load_state_dict(state["learner_optimizer"])
        self.encoder.load_state_dict(state["encoder"])
        self.encoder_optimizer.load_state_dict(state["encoder_optimizer"])
        self.initial_graph, self.adjacency = state["initial_graph"], state["adjacency"]
        self.denoising_losses = list(state["denoising_losses"])


@torch.no_grad()
def client_representations(fed: Federation, client: int, vector: Tensor, batch_size: int = 1024) -> Tensor:
    """Client side: :math:`H^c_k`, the representations of the client's training samples (``N_k × h``, in
    split order) under the model vector ``vector`` (its trained model)."""
    fed.flat.load(vector)
    model = fed.flat.module
    model.eval()
    indices = fed.data.train_indices[client]
    return torch.cat([model.features(fed.data.x[indices[i : i + batch_size]]) for i in range(0, len(indices), batch_size)])


def by_position(per_client: list[Tensor]) -> Tensor:
    """Server side: stack the clients' ``N_k × h`` rows into ``P × K × h`` (``P = max N_k``); a client with
    fewer rows repeats its own cyclically (position ``i`` holds its row ``i mod N_k``)."""
    positions = max(len(rows) for rows in per_client)
    return torch.stack([rows[torch.arange(positions, device=rows.device) % len(rows)] for rows in per_client], dim=1)


class HeadOf(torch.nn.Module):
    """``h ↦ head(h)`` of a wrapped model, for :func:`torch.func.functional_call`."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, h: Tensor) -> Tensor:
        return self.model.head(h)


def feature_gradients(fed: Federation, structure: Tensor, sizes: Sequence[int]) -> Tensor:
    r"""Client side, Eq. 8a per sample, every client at once: :math:`\nabla_{h^{i}_{g,k}} l_k` for the first
    ``sizes[k]`` rows of ``structure[:, k]`` (``P × K × h``; zero below them), where
    :math:`l_k = \frac1{N_k}\sum_i \ell(\mathrm{head}_k(h^{i}_{g,k}), y^i_k)` is the task loss of client
    ``k``'s own head (its row of ``fed.models``, in eval mode) predicting each training sample's label from
    its structure feature.

    On a task with a masked loss (:meth:`~gflkit.tasks.ClassificationTask.masked_loss`) all clients are one
    ``vmap`` over their model rows: each loss is the sum of the per-sample losses over the client's true
    samples divided by :math:`N_k` — the gradients of the task's mean, bit for bit — with the positions beyond
    them masked out. Otherwise (forecasting's masked MAE) clients of equal :math:`N_k` are one ``vmap`` each."""
    head = HeadOf(fed.flat.module).eval()
    structure = structure.detach()
    masked = hasattr(fed.task, "masked_loss")

    def loss(params: dict[str, Tensor], h: Tensor, y: Tensor, valid: Tensor, count: Tensor) -> Tensor:
        outputs = torch.func.functional_call(head, params, (h,))
        if masked:
            return fed.task.masked_loss(outputs, y, valid, count)
        return fed.task.loss(outputs, y)

    # the clients are the structure's dimension 1, read and written there (no transposed copies)
    per_client = torch.func.vmap(torch.func.grad(loss, argnums=1), in_dims=(0, 1, 0, 0, 0), out_dims=1)
    groups = [list(range(len(sizes)))] if masked else [[k for k, n in enumerate(sizes) if n == size]
                                                        for size in sorted(set(sizes))]
    # one group of every client, as wide as the structure, gives every gradient at once: nothing to scatter
    whole = len(groups) == 1 and max(sizes) == structure.shape[0]
    gradients = None if whole else torch.zeros_like(structure)
    for clients in groups:
        width = max(sizes[k] for k in clients)
        counts = torch.tensor([sizes[k] for k in clients], device=structure.device)
        valid = torch.arange(width, device=structure.device) < counts[:, None]  # clients × width
        labels = fed.data.y.new_zeros((len(clients), width, *fed.data.y.shape[1:]))
        for row, k in enumerate(clients):
            labels[row, : sizes[k]] = fed.data.y[fed.data.train_indices[k]]
        rows = fed.models[clients]
        params = {f"model.{e.name}": rows[:, e.slice].view(len(clients), *e.shape) for e in fed.layout.entries}
        found = per_client(params, structure[:width, slice(None) if whole else clients], labels,
                           valid.to(structure.dtype), counts.clamp(min=1).to(structure.dtype))
        found = torch.where(valid.t()[..., None], found, 0.0)
        if whole:
            return found
        gradients[:width, clients] = found
    return gradients


class FedSKA(FedAvg):
    """FedSKA (see the module docstring for the round and its equations)."""

    name = "fedska"
    varying_state = ("server.learner_optimizer", "server.encoder_optimizer", "server.denoising_losses",
                     "server.initial_graph", "server.adjacency", "structure")
    adds_local_loss = True
    share = "all"  # FedAvg's whole-model sharing; no share option
    Params = FedSKAParams

    def check(self, num_clients: int) -> None:
        if self.params.graph == "learned" and self.params.k >= num_clients:
            raise ValueError(
                f"fedska k={self.params.k} must be smaller than the number of clients ({num_clients}): "
                "each client keeps itself and k others"
            )

    def setup(self, fed: Federation) -> None:
        self.check(fed.num_clients)
        super().setup(fed)
        dim = fed.flat.module.feature_dim
        torch.manual_seed(derive_seed(fed.seed, FEDSKA_SERVER_INIT))
        self.server = StructureServer(dim, self.params).to(fed.device)
        self.representations = [torch.zeros(len(idx), dim, device=fed.device) for idx in fed.data.train_indices]
        self.structure: list[Tensor] | None = None
        if self.params.graph == "given":
            self.server.adjacency = self.given(fed)
        elif self.params.init_graph == "given":
            self.server.initial_graph = self.given(fed)

    def given(self, fed: Federation) -> Tensor:
        """The given graph with self-loops, symmetrically normalised (:math:`D^{-1/2}(A + I)D^{-1/2}`)."""
        eye = torch.eye(fed.num_clients, device=fed.device)
        return sym_normalize(given_graph(fed, self.params.given_graph) + eye)

    def configure(self, fed: Federation, client: int) -> Tensor:
        return fed.global_model if self.params.fedavg else fed.models[client]

    def local_context(self, fed: Federation, client: int) -> dict[str, Tensor]:
        """The client's structure features, one row per training sample, zero-padded to the largest client
        (the term reads only its own samples' rows) so that the clients' contexts stack."""
        if self.structure is None:
            return {}
        rows = max(len(features) for features in self.structure)
        own = self.structure[client]
        return {"structure": torch.cat([own, own.new_zeros(rows - len(own), own.shape[1])])}

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        if self.structure is None or self.params.weight == 0:
            return None
        target = step.context["structure"][step.positions]
        return self.params.weight * (1 - F.cosine_similarity(step.features, target, dim=1)).mean()

    def finish_client(self, fed: Federation, client: int, result: LocalResult) -> LocalResult:
        result = super().finish_client(fed, client, result)
        self.representations[client] = client_representations(fed, client, result.vector)  # sent up besides w_k
        return result

    def client_features(self) -> Tensor:
        """:math:`H^c`: each client's mean representation (``K × h``), the structure learner's node features."""
        return torch.stack([rows.mean(0) for rows in self.representations])

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        if self.params.fedavg:
            super().aggregate(fed, clients, updates, round)
        else:
            fed.models[clients] = updates
        if self.params.graph == "learned":
            generator = torch.Generator().manual_seed(derive_seed(fed.seed, round, FEDSKA_SERVER_NOISE))
            self.server.learn_graph(self.client_features(), generator)
        sizes = [len(rows) for rows in self.representations]

        structure = self.server.train_encoder(by_position(self.representations),
                                              lambda structure: feature_gradients(fed, structure, sizes))
        self.structure = [structure[:size, k] for k, size in enumerate(sizes)]

    def communication(self, fed: Federation) -> Communication:
        r"""FedAvg's model each way (none with ``fedavg=False``: the client keeps its model), plus ``N_k × h``
        matrices (``N_k`` training samples, ``h`` the representation width): up :math:`H^c_k` once and
        :math:`\nabla_{H^g_k} l_k` in each of the :math:`E_g` encoder epochs; down :math:`H^g_k` in each
        epoch (for the gradient) and its final value — :math:`(E_g + 1) N_k h` each way, ``N_k`` averaged
        over the training clients. The server sends every client, sampled or not, the :math:`E_g`
        gradient requests (:func:`feature_gradients` runs over all clients); the count is a participating
        client's."""
        samples = sum(len(fed.data.train_indices[k]) for k in fed.training_clients.tolist()) / len(fed.training_clients)
        features = (self.params.encoder_epochs + 1) * samples * fed.flat.module.feature_dim
        model = super().communication(fed) if self.params.fedavg else Communication(0, 0)
        return model + Communication.both(features)

    def evaluation_models(self, fed: Federation) -> Tensor:
        return fed.models

    def state_dict(self) -> dict[str, Any]:
        return {"server": self.server.state_dict(), "representations": self.representations,
                "structure": self.structure}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.server.load_state_dict(state["server"])
        self.representations, self.structure = state["representations"], state["structure"]

    def artifacts(self) -> dict[str, Tensor]:
        return {"adjacency": self.server.adjacency, "features": self.client_features(),
                "denoising_losses": torch.tensor(self.server.denoising_losses)}
