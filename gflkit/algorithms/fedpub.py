r"""FED-PUB (Baek, Jeong, Jin, Yoon and Hwang, "Personalized Subgraph Federated Learning", ICML 2023).

One round, for every sampled client :math:`i`:

1. **Personalised start** (client): the client's weights :math:`\theta_i` start from the personalised
   model :math:`\bar\theta_i` the server computed for it in the last round it took part in (the global
   model :math:`\bar\theta = \sum_j \frac{n_j}{\sum_l n_l} \theta_j` of the latest round before it has
   one; the common initial model before any aggregation).
2. **Local training with a personalised sparse mask**: the client keeps a mask :math:`\mu_i`, one entry
   per weight of every weight matrix / kernel (biases are not masked), and trains both on

   .. math:: \min_{\theta_i, \mu_i}\; \mathcal L(G_i;\, \theta_i \odot \mu_i)
             + \lambda_1 \lVert \mu_i \rVert_1 + \lambda_2 \lVert \theta_i - \bar\theta_i \rVert_2^2

   (:math:`\mathcal L`: the task loss plus the model's own term, e.g. the VGAE's KL; the proximal term is
   left out before the first aggregation, where :math:`\bar\theta_i` is the random initialisation, as in
   the authors' code). The mask is applied to the working module's weights in the forward pass
   (:func:`masked_weights`) and stepped by the same optimiser as the weights, in the same loop.
   Evaluation and the functional embedding use the pruned mask
   :math:`\tilde\mu = \mu \odot [\,|\mu| \ge \lambda_1]` (the authors prune below the value of
   ``l1``), i.e. the model :math:`\theta_i \odot \tilde\mu_i`; the mask never leaves the client.
3. **Functional embedding** (client): the masked model's node representations on one shared random
   graph :math:`\tilde G` (:func:`random_partition_graph`: ``n_proxy`` blocks of ``proxy_nodes`` nodes,
   edges inside a block with probability ``proxy_p``, none across, node features
   :math:`\mathcal N(0, I)`; drawn once from the run's seed), averaged over the nodes:

   .. math:: h_i = \frac{1}{|\tilde V|} \sum_{v \in \tilde V} f(\tilde G;\, \theta_i \odot \tilde\mu_i)_v

   (``features``: the VGAE's :math:`z = \mu`, in eval mode, via
   :meth:`~gflkit.federation.Federation.representations`). The client uploads :math:`\theta_i` (through
   the run's channel) and :math:`h_i`.
4. **Similarity-weighted personalised aggregation** (server), over the clients :math:`S` of the round:

   .. math:: S(i, j) = \frac{h_i^\top h_j}{\lVert h_i\rVert\,\lVert h_j\rVert}, \qquad
             \alpha_{ij} = \frac{\exp(\tau\, S(i, j))}{\sum_{k \in S} \exp(\tau\, S(i, k))}, \qquad
             \bar\theta_i = \sum_{j \in S} \alpha_{ij}\, \theta_j

   (:func:`similarity_weights`, :func:`personalised_aggregate`; ``size_weighted=True`` uses
   :math:`\alpha_{ij} \propto n_j \exp(\tau S(i,j))` instead). The global model is the size-weighted mean
   (step 1); it only serves clients without a personalised model yet.

Every client is evaluated with its masked local model :math:`\theta_i \odot \tilde\mu_i` after its latest
local training (the authors' "local" accuracy). :meth:`FedPub.artifacts` keeps the latest :math:`S` and
:math:`\alpha` (``K × K``, NaN for pairs never in a round together).

Choices where the paper and the authors' code (``models/fedpub/{client,server}.py``) differ or are
silent, documented:

* the authors add the :math:`\ell_1` and proximal terms on ``state_dict()`` tensors, which are detached,
  so in their code neither term has a gradient (and their proximal term is the unsquared norm); here
  both have the gradient of the objective above, the paper's formulation;
* the personalised aggregation weights only by :math:`\alpha` (their ``server.update``); weighting by
  training size is the option ``size_weighted``;
* masks start at one (``mask_init="ones"``: the ``--laye-mask-one --clsf-mask-one`` flags of every
  published run script; their parser's default is Xavier-uniform masks, ``"xavier"``); ``tau`` is the
  parser's ``norm_scale`` 10 (the Cora scripts use 3 for disjoint and 5 for overlapping clients);
* the functional embedding does not pass through the run's channel (it is ``feature_dim`` numbers that
  the client computes itself, as in the authors' code); only model uploads do;
* the mask is an entry-wise parametrisation of the working module's weight matrices, so any model whose
  layers read their weights as attributes works; recurrent layers (which cache flat weights) are left
  unmasked;
* sample (non-graph) federations are served with i.i.d. :math:`\mathcal N(0, I)` inputs of the data's
  shape as the random proxy input; federations whose inputs are not floating point (token ids) are
  rejected in :meth:`FedPub.setup`.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torch_geometric.data import Data

from gflkit.algorithms.base import Algorithm, weighted_mean
from gflkit.algorithms.terms import squared_distance
from gflkit.communication import Communication
from gflkit.federation import Federation, GraphFederation, LocalResult
from gflkit.seeding import FEDPUB_PROXY, generator
from gflkit.state import Entry, Layout
from gflkit.training import LocalStep

MASK_INITS = ("ones", "xavier")


@dataclass(frozen=True)
class FedPubParams:
    """Hyper-parameters of FED-PUB (defaults: the authors' code, ``parser.py`` and ``scripts/*.sh``).

    Attributes:
        tau: τ, the scale of the similarity in :math:`\\exp(\\tau S)` (``norm_scale``, 10; the Cora
            scripts use 3 / 5).
        l1: λ₁, weight of the masks' ℓ₁ term, also the threshold below which a mask entry is pruned in
            evaluation (``l1``, 1e-3).
        loc_l2: λ₂, weight of the proximal term to the personalised model (``loc_l2``, 1e-3).
        n_proxy: blocks of the random proxy graph (``n_proxy``, 5).
        proxy_nodes: nodes per block (100).
        proxy_p: edge probability inside a block (0.1; none across blocks).
        mask_init: ``"ones"`` (the published runs) or ``"xavier"`` (Xavier-uniform, the parser default).
        size_weighted: also weight the personalised aggregate by the clients' sizes (False, as the authors).
    """

    tau: float = 10.0
    l1: float = 1e-3
    loc_l2: float = 1e-3
    n_proxy: int = 5
    proxy_nodes: int = 100
    proxy_p: float = 0.1
    mask_init: str = "ones"
    size_weighted: bool = False

    def __post_init__(self) -> None:
        for name in ("tau", "l1", "loc_l2"):
            if getattr(self, name) < 0:
                raise ValueError(f"fedpub {name} must be >= 0, got {getattr(self, name)}")
        if self.n_proxy < 1 or self.proxy_nodes < 1:
            raise ValueError(f"fedpub needs n_proxy >= 1 and proxy_nodes >= 1, got {self.n_proxy}, {self.proxy_nodes}")
        if not 0 <= self.proxy_p <= 1:
            raise ValueError(f"fedpub proxy_p must lie in [0, 1], got {self.proxy_p}")
        if self.mask_init not in MASK_INITS:
            raise ValueError(f"fedpub mask_init must be one of {MASK_INITS}, got {self.mask_init!r}")


def random_partition_graph(num_blocks: int, block_size: int, p_in: float, num_features: int,
                           gen: torch.Generator) -> Data:
    """``num_blocks`` disjoint Erdős–Rényi blocks G(``block_size``, ``p_in``) (edges in both directions),
    node features N(0, I)."""
    n = num_blocks * block_size
    block = torch.arange(n) // block_size
    upper = torch.triu((torch.rand(n, n, generator=gen) < p_in) & (block[:, None] == block[None]), diagonal=1)
    edge_index = (upper | upper.T).nonzero().T.contiguous()
    return Data(x=torch.randn(n, num_features, generator=gen), edge_index=edge_index)


def similarity_weights(embeddings: Tensor, tau: float) -> tuple[Tensor, Tensor]:
    r"""Cosine similarities :math:`S` of the rows of ``embeddings``, and
    :math:`\alpha_{ij} = \mathrm{softmax}_j(\tau S_{ij})`.

    Rows of :math:`\alpha` sum to 1; identical embeddings give equal weights.
    """
    unit = F.normalize(embeddings, dim=1)
    similarity = unit @ unit.T
    return similarity, torch.softmax(tau * similarity, dim=1)


def personalised_aggregate(updates: Tensor, weights: Tensor) -> Tensor:
    r"""Row :math:`i` is :math:`\sum_j \alpha_{ij} \theta_j` (``weights`` rows sum to 1)."""
    return weights @ updates


def maskable_entries(module: nn.Module, layout: Layout) -> list[Entry]:
    """The weight matrices / kernels of ``module`` (parameters with >= 2 dimensions, outside recurrent layers)."""
    entries = []
    for entry in layout.entries:
        owner = module.get_submodule(entry.name.rpartition(".")[0])
        if not entry.is_buffer and len(entry.shape) >= 2 and not isinstance(owner, nn.RNNBase):
            entries.append(entry)
    return entries


class _Masked(nn.Module):
    """Parametrisation ``w ↦ w ⊙ mask`` (the mask is a view into the client's mask leaf)."""

    def __init__(self, mask: Tensor):
        super().__init__()
        self.mask = mask

    def forward(self, weight: Tensor) -> Tensor:
        return weight * self.mask


@contextlib.contextmanager
def masked_weights(module: nn.Module, entries: Sequence[Entry], mask: Tensor) -> Iterator[None]:
    """Within the block, every weight of ``entries`` reads as ``weight ⊙ mask`` (``mask``: the entries' masks,
    concatenated in layout order).

    The weights stay the same parameters (views into the flat vector, stepped by the optimiser); the
    mask gets its gradient through the product.
    """
    registered, offset = [], 0
    try:
        for entry in entries:
            owner_name, _, attr = entry.name.rpartition(".")
            owner = module.get_submodule(owner_name)
            view = mask[offset: offset + entry.numel].view(entry.shape)
            parametrize.register_parametrization(owner, attr, _Masked(view))
            registered.append((owner, attr))
            offset += entry.numel
        yield
    finally:
        for owner, attr in reversed(registered):
            parametrize.remove_parametrizations(owner, attr, leave_parametrized=False)


class FedPub(Algorithm):
    """Functional-embedding similarity aggregation with personalised sparse masks (see the module docstring)."""

    name = "fedpub"
    #: the attributes that make up the server's state (checkpointed)
    STATE = ("masks", "personal", "received", "embeddings", "similarity", "weights", "aggregations")
    client_step = "one_by_one"
    adds_local_loss = True
    Params = FedPubParams

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.proxy = self.proxy_input(fed)
        self.entries = maskable_entries(fed.flat.module, fed.layout)
        self.maskable = torch.zeros(fed.dim, dtype=torch.bool, device=fed.device)
        for entry in self.entries:
            self.maskable[entry.slice] = True
        self.masks = self.initial_masks(fed)
        k = fed.num_clients
        self.personal = fed.initial.repeat(k, 1)
        self.received = torch.zeros(k, dtype=torch.bool, device=fed.device)
        self.embeddings = self.embedding(fed, fed.initial, self.masks[0]).repeat(k, 1)  # h of the initial model
        self.similarity = torch.full((k, k), math.nan, device=fed.device)
        self.weights = torch.full((k, k), math.nan, device=fed.device)
        self.aggregations = 0

    def proxy_input(self, fed: Federation) -> Any:
        """The shared random input of the functional embeddings (a random graph for subgraph clients)."""
        p, gen = self.params, generator(fed.seed, FEDPUB_PROXY)
        if isinstance(fed, GraphFederation):
            num_features = fed.data.graphs[0].x.size(1)
            return random_partition_graph(p.n_proxy, p.proxy_nodes, p.proxy_p, num_features, gen).to(fed.device)
        x = getattr(fed.data, "x", None)
        if not isinstance(x, Tensor) or not x.is_floating_point():
            raise ValueError(f"fedpub feeds random inputs through the clients' models and needs subgraph clients "
                             f"(GraphFederation) or real-valued samples; got {type(fed).__name__} with inputs of "
                             f"dtype {getattr(x, 'dtype', None)}")
        return torch.randn(p.n_proxy * p.proxy_nodes, *x.shape[1:], generator=gen).to(fed.device)

    def initial_masks(self, fed: Federation) -> Tensor:
        """``K × m`` masks (m: the maskable weights): ones, or Xavier-uniform per weight matrix (the same for all
        clients)."""
        if self.params.mask_init == "ones":
            return torch.ones(fed.num_clients, int(self.maskable.sum()), device=fed.device)
        gen = generator(fed.seed, FEDPUB_PROXY, 1)
        parts = [nn.init.xavier_uniform_(torch.empty(entry.shape), generator=gen).flatten() for entry in self.entries]
        mask = torch.cat(parts) if parts else torch.empty(0)
        return mask.to(fed.device).repeat(fed.num_clients, 1)

    def state_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.STATE}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name in self.STATE:
            setattr(self, name, state[name])

    def artifacts(self) -> dict[str, Tensor]:
        """The latest cosine similarities :math:`S` and aggregation weights :math:`\\alpha` between clients."""
        return {"similarity": self.similarity, "weights": self.weights}

    # --- client ---------------------------------------------------------------------------------
    def masked(self, models: Tensor, masks: Tensor) -> Tensor:
        """``models ⊙ pruned masks`` on the maskable entries (rows of ``models`` with rows of ``masks``, or one
        vector of each)."""
        pruned = masks.masked_fill(masks.abs() < self.params.l1, 0.0)
        out = models.clone()
        out[..., self.maskable] = models[..., self.maskable] * pruned
        return out

    def configure(self, fed: Federation, client: int) -> Tensor:
        """The client's personalised model, or the global one before it has one."""
        return self.personal[client] if self.received[client] else fed.global_model

    def local_loss(self, fed: Federation, step: LocalStep) -> Tensor | None:
        r""":math:`\lambda_1 \lVert\mu_i\rVert_1 + \lambda_2 \lVert\theta_i - \bar\theta_i\rVert_2^2` (no proximal term
        before the first aggregation)."""
        terms = []
        if self.params.l1 > 0 and self._mask.numel():
            terms.append(self.params.l1 * self._mask.abs().sum())
        if self.params.loc_l2 > 0 and self.aggregations > 0:
            anchor = fed.flat.parameters_as_views(self._anchor)
            terms.append(self.params.loc_l2 * squared_distance(fed.flat.parameters, anchor))
        return sum(terms) if terms else None

    def client_update(self, fed: Federation, client: int, round: int) -> LocalResult:
        """Steps 1–3: masked local training from the personalised model; uploads θ_i, keeps μ_i, sends h_i."""
        self._anchor = self.configure(fed, client)
        self._mask = self.masks[client].clone().requires_grad_(True)
        extra = [self._mask] if self._mask.numel() else []
        with masked_weights(fed.flat.module, self.entries, self._mask):
            result = fed.train(client, round, self._anchor, lambda step: self.local_loss(fed, step),
                               extra_parameters=extra)
        self.masks[client] = self._mask.detach()
        fed.models[client] = result.vector
        self.embeddings[client] = self.embedding(fed, result.vector, self.masks[client])
        return result

    def embedding(self, fed: Federation, model: Tensor, mask: Tensor) -> Tensor:
        """The functional embedding :math:`h`: the mean representation of the proxy input under
        ``model ⊙`` pruned ``mask``."""
        return fed.representations(self.masked(model, mask), self.proxy).flatten(1).mean(0)

    # --- server ---------------------------------------------------------------------------------
    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        """Step 4 and the size-weighted global model."""
        similarity, weights = similarity_weights(self.embeddings[clients], self.params.tau)
        if self.params.size_weighted:
            weights = weights * fed.num_train[clients][None]
            weights = weights / weights.sum(dim=1, keepdim=True)
        self.personal[clients] = personalised_aggregate(updates, weights)
        self.received[clients] = True
        fed.global_model = weighted_mean(updates, fed.num_train[clients])
        pairs = torch.meshgrid(clients, clients, indexing="ij")
        self.similarity[pairs], self.weights[pairs] = similarity, weights
        self.aggregations += 1

    def communication(self, fed: Federation) -> Communication:
        r"""The personalised model :math:`\bar\theta_i` down; :math:`\theta_i` and the functional embedding
        :math:`h_i` up (the mask :math:`\mu_i` never leaves the client; the proxy input is drawn from the
        shared seed on both sides)."""
        return Communication(fed.dim + self.embeddings.shape[1], fed.dim)

    def evaluation_models(self, fed: Federation) -> Tensor:
        """Every client's masked local model :math:`\\theta_i \\odot \\tilde\\mu_i`."""
        return self.masked(fed.models, self.masks)

    def trained_model(self, fed: Federation, client: int, result: LocalResult) -> Tensor:
        """The client's masked model after its local training."""
        return self.masked(result.vector, self.masks[client])
