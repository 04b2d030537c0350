r"""VGAE: the variational graph auto-encoder of FedVGAE (Kipf & Welling 2016), with an MLP readout for nodes.

Encoder (FedVGAE's Eq. 4): a shared GCN layer, then two GCN layers for the mean and the log standard
deviation of every node's latent Gaussian, and the reparametrisation

.. math::
    H = \mathrm{ReLU}(\hat A X W_1), \qquad
    \mu = \hat A H W_\mu, \qquad \log\sigma = \hat A H W_\sigma, \qquad
    z_u = \mu_u + \epsilon_u \odot \sigma_u,\ \epsilon_u \sim \mathcal N(0, I) \text{ (training; } z = \mu
    \text{ in evaluation)}

with :math:`\hat A = \tilde D^{-1/2}(A + I)\tilde D^{-1/2}` (``GCNConv``). Decoder (Eq. 5): the parameter-free
inner product :math:`\hat A_{uv} = \sigma(z_u^\top z_v)` (``InnerProductDecoder``; the link-prediction
task applies it to the pairs it scores). For node classification a 2-layer MLP readout maps each
node's representation to class scores; it reads :math:`\mu_u` (``readout_from="mu"``, default) or the
sample :math:`z_u` (``"sample"``). The paper does not say which; a classifier should be deterministic,
and the sample's noise (:math:`\sigma \approx 1` at initialisation) swamps :math:`\mu` (:math:`|\mu|
\approx 0.06`) for the first rounds, so the readout learns nothing until the KL term has shrunk
:math:`\sigma`. The model adds the KL term of the ELBO to its task loss (:meth:`VGAE.auxiliary_loss`),
weighted by ``kl_weight``:

.. math:: \ell_{KL} = c \cdot \frac{1}{n} \sum_u -\tfrac12 \sum_j
          \left(1 + 2\log\sigma_{uj} - \mu_{uj}^2 - \sigma_{uj}^2\right)

the KL per node averaged over the :math:`n` nodes, with :math:`c = 1/n` (``"per_node"``, default: Kipf's
reference code and PyG's VGAE example, so that it weighs like one pair of the reconstruction term) or
:math:`c = 1` (``"eq7"``: FedVGAE's Eq. 7 as printed, which divides the reconstruction sum over pairs by
:math:`n` and sums the KL over nodes, i.e. the KL per node against the reconstruction per pair).

Parts: ``vgae.encoder`` is the **encoder** that encoder-only sharing federates; ``vgae.decoder`` (no
parameters) and the readout (hidden layer ``readout``, output layer ``classifier``) stay local
(:meth:`~gflkit.models.base.FeatureModel.encoder_mask`); :meth:`VGAE.first_layer_mask` selects only
the common first GCN layer ``vgae.encoder.conv1`` (the μ / log σ layers excluded).
"""
from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv
from torch_geometric.nn import VGAE as PygVGAE

from gflkit.models.base import FeatureModel
from gflkit.state import Layout

READOUT_INPUTS = ("mu", "sample")
KL_WEIGHTS = ("per_node", "eq7")


class VariationalGCNEncoder(nn.Module):
    r"""``GCN_1`` then ``GCN_μ`` and ``GCN_σ`` (FedVGAE's Eq. 4): returns :math:`(\mu, \log\sigma)`."""

    def __init__(self, in_channels: int, hidden: int, out: int):
        super().__init__()
        self.conv1 = GCNConv(in_channels, hidden)
        self.conv_mu = GCNConv(hidden, out)
        self.conv_logstd = GCNConv(hidden, out)

    def forward(self, x: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
        """:math:`(\\mu, \\log\\sigma)`, each ``(n, out)``, of the nodes of the graph ``(x, edge_index)``."""
        h = torch.relu(self.conv1(x, edge_index))
        return self.conv_mu(h, edge_index), self.conv_logstd(h, edge_index)


class VGAE(FeatureModel):
    """VGAE over a client's graph; ``features`` are the node representations :math:`z` (see the module docstring).

    Inputs are :class:`torch_geometric.data.Data` graphs with ``x`` and ``edge_index``.

    Args:
        input_shape: ``(F,)``, the number of node features.
        num_classes: node classes of the readout (node classification); ``0`` builds no readout and the
            head is the identity (link prediction: the task decodes pairs of :math:`z`).
        hidden: width of the shared GCN layer (32, Kipf & Welling's default).
        out: latent dimension of :math:`z` (16).
        readout_hidden: hidden width of the 2-layer MLP readout (default: ``hidden``).
        readout_from: what the readout reads, ``"mu"`` (default) or ``"sample"`` (see the module docstring).
        kl_weight: ``"per_node"`` (Kipf's :math:`1/n`, default) or ``"eq7"`` (see the module docstring).
    """

    local_prefixes = ("vgae.decoder.", "readout.", "classifier.")
    first_layer_prefixes = ("vgae.encoder.conv1.",)

    def first_layer_mask(self, layout: Layout, device: torch.device | str | None = None) -> Tensor:
        """Boolean mask over the flat vector (``layout``): True on the common first GCN layer only (the
        μ / log σ layers and the readout excluded) — FedVGAE's ``share="first_layer"``."""
        return layout.mask(lambda entry: entry.name.startswith(self.first_layer_prefixes), device)

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 32, out: int = 16,
                 readout_hidden: int | None = None, readout_from: str = "mu", kl_weight: str = "per_node"):
        super().__init__()
        if readout_from not in READOUT_INPUTS:
            raise ValueError(f"VGAE readout_from must be one of {READOUT_INPUTS}, got {readout_from!r}")
        if kl_weight not in KL_WEIGHTS:
            raise ValueError(f"VGAE kl_weight must be one of {KL_WEIGHTS}, got {kl_weight!r}")
        if len(input_shape) != 1:
            raise ValueError(f"VGAE needs node features of shape (F,), got input_shape {tuple(input_shape)}")
        if min(hidden, out) < 1 or num_classes < 0:
            raise ValueError(f"VGAE needs hidden, out >= 1 and num_classes >= 0, got hidden={hidden}, out={out}, "
                             f"num_classes={num_classes}")
        self.vgae = PygVGAE(VariationalGCNEncoder(input_shape[0], hidden, out))
        width = readout_hidden or hidden
        self.readout = nn.Linear(out, width) if num_classes else None
        self.classifier = nn.Linear(width, num_classes) if num_classes else None
        self.feature_dim = out
        self.readout_from = readout_from
        self.kl_weight = kl_weight

    def features(self, graph: Data) -> Tensor:
        """Node representations (``(n, out)``): :math:`z`, sampled in training mode and :math:`\\mu` in eval
        mode; with a readout reading ``"mu"``, :math:`\\mu` in both (the KL term still sees :math:`\\sigma`)."""
        z = self.vgae.encode(graph.x, graph.edge_index)
        return self.vgae.__mu__ if self.classifier is not None and self.readout_from == "mu" else z

    def head(self, z: Tensor) -> Tensor:
        """Class scores ``(n, num_classes)`` of the readout, or :math:`z` itself without a readout."""
        return z if self.classifier is None else self.classifier(torch.relu(self.readout(z)))

    def auxiliary_loss(self) -> Tensor:
        r"""The ELBO's KL term of the latest forward pass: PyG's ``kl_loss()``, times :math:`\frac1n` for
        ``kl_weight="per_node"`` (module docstring)."""
        kl = self.vgae.kl_loss()
        return kl / self.vgae.__mu__.size(0) if self.kl_weight == "per_node" else kl
