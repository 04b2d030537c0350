r"""FedSKA's client-structure learner (Sec. 3.2): metric-based generator, post-processor, and
denoising self-supervision. It sees only the ``K × d`` client-feature matrix — never client data.

Generator and post-processor (Eq. 4–6), as in the authors' code:

.. math::
    E = \mathrm{MLP}(H^c), \quad
    \tilde S = \mathrm{ReLU}\big(\mathrm{topk}_{k+1}(\cos(E_i, E_j))\big), \quad
    S = D^{-1/2}\, \tfrac12(\tilde S + \tilde S^\top)\, D^{-1/2}

where top-k keeps, per row, the node itself and its ``k`` most similar clients. The MLP is
initialised to the identity, so for non-negative client features (post-ReLU representations, as all
gflkit models produce) the very first graph is the kNN cosine graph of the client features.

Denoising self-supervision (Sec. 3.2.3): a random fraction ``r`` of the entries of :math:`H^c` is
corrupted (Gaussian noise added, or zeroed), a GCN :math:`\mathrm{GNN}_D` maps the corrupted features
over :math:`S` back, and the loss is the MSE on the corrupted entries only:

.. math:: \mathcal{L}_D = \mathrm{MSE}\big(H^c_{pos},\ \mathrm{GNN}_D(\tilde H, S)_{pos}\big)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gflkit.graphs.adjacency import cosine_similarity_matrix, knn_sparsify, sym_normalize, symmetrize
from gflkit.graphs.gcn import DenseGCN

NOISE_KINDS = ("normal", "mask")


class MetricGenerator(nn.Module):
    """Identity-initialised MLP embedding followed by the cosine / kNN / ReLU / sym / norm post-processor."""

    def __init__(self, dim: int, k: int, layers: int = 2):
        super().__init__()
        self.k = k
        self.mlp = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))
        for layer in self.mlp:
            nn.init.eye_(layer.weight)
            nn.init.zeros_(layer.bias)

    def embed(self, features: Tensor) -> Tensor:
        """The MLP embedding :math:`E` (ReLU between layers)."""
        h = features
        for i, layer in enumerate(self.mlp):
            h = layer(h)
            if i < len(self.mlp) - 1:
                h = torch.relu(h)
        return h

    def forward(self, features: Tensor) -> Tensor:
        similarity = cosine_similarity_matrix(self.embed(features))
        sparse = torch.relu(knn_sparsify(similarity, self.k, keep_self=True))
        return sym_normalize(symmetrize(sparse))


def corrupt(features: Tensor, ratio: float, noise: str, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(corrupted features, boolean mask of the corrupted entries): each entry is picked with
    probability ``ratio`` (at least one entry always), then gets N(0, 1) noise added or is zeroed."""
    mask = torch.rand(features.shape, generator=generator) < ratio
    if not mask.any():
        mask.view(-1)[torch.randint(mask.numel(), (1,), generator=generator)] = True
    mask = mask.to(features.device)
    if noise == "normal":
        corrupted = features + torch.randn(features.shape, generator=generator).to(features.device) * mask
    else:
        corrupted = features * ~mask
    return corrupted, mask


def denoising_loss(features: Tensor, reconstructed: Tensor, mask: Tensor) -> Tensor:
    """MSE between the original and reconstructed features on the corrupted entries only."""
    return F.mse_loss(reconstructed[mask], features[mask])


class StructureLearner(nn.Module):
    """Generator + denoising GCN, trained jointly with Adam on :math:`\\mathcal{L}_D`.

    Args:
        dim: client-feature dimension d.
        k: neighbours kept per client (besides itself); must be smaller than the number of clients.
        ratio: fraction r of feature entries corrupted per epoch, in (0, 1].
        noise: ``"normal"`` (add N(0,1)) or ``"mask"`` (zero the entries).
        hidden: width of the denoising GCN; ``denoiser_layers``: its depth (3 in the authors' code).
        lr, weight_decay: Adam's.
    """

    def __init__(self, dim: int, k: int, ratio: float = 0.01, noise: str = "normal", hidden: int = 64,
                 generator_layers: int = 2, denoiser_layers: int = 3, lr: float = 0.01, weight_decay: float = 0.0):
        super().__init__()
        if not 0 < ratio <= 1:
            raise ValueError(f"the corruption ratio r must lie in (0, 1], got {ratio}")
        if noise not in NOISE_KINDS:
            raise ValueError(f"noise must be one of {NOISE_KINDS}, got {noise!r}")
        self.ratio, self.noise = ratio, noise
        self.generator = MetricGenerator(dim, k, generator_layers)
        self.denoiser = DenseGCN(dim, hidden, dim, denoiser_layers)
        self.optimizer = torch.optim.Adam(self.parameters(), lr=lr, weight_decay=weight_decay)

    def fit(self, features: Tensor, epochs: int, generator: torch.Generator) -> tuple[Tensor, list[float]]:
        """``epochs`` Adam steps on the denoising loss; returns the final graph (detached) and the losses."""
        features = features.detach()
        losses = []
        for _ in range(epochs):
            adjacency = self.generator(features)
            corrupted, mask = corrupt(features, self.ratio, self.noise, generator)
            loss = denoising_loss(features, self.denoiser(corrupted, adjacency), mask)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            losses.append(float(loss.detach()))
        with torch.no_grad():
            return self.generator(features), losses
