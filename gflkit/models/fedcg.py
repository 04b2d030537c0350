r"""FedCG's network (Caporali et al., "Cluster-driven Graph Federated Learning over Multiple Domains",
CVPR-W 2021): a base CNN whose chosen convolutions get domain-specific residuals (Eq. 4) produced by a
GCN over the domains' parameters (Eqs. 5–6), and the teacher / student domain classifiers (Sec. 3.1).

Forward pass of a batch :math:`x`:

1. domain weights :math:`w \in \mathbb R^{n \times D}`: in training, the teacher's hard pseudo-label
   :math:`\hat d` one-hot (Sec. 3.2); at test time the student's probabilities
   :math:`g_\varphi(x)` (``test_domains="soft"``, the paper's choice) or their arg-max (``"hard"``, Table 4);
2. every domain convolution :math:`\ell` outputs (Eq. 4, ``residual=True``)

   .. math:: z^\ell = f^\ell_{\theta_a}(z) + \lambda_\ell \sum_{d=1}^D w_d\, f^\ell_{\hat\theta^d_s}(z),
      \qquad \hat\theta_s = \sigma(\mathbf A \mathbf V \mathbf W)

   (:class:`~gflkit.graphs.domain_gcn.DomainGCN`), or only the domain part (``residual=False``, Table 3's
   "GCN" rows);
3. in training the model adds the student's distillation loss (Eq. 3), the cross-entropy between the
   student's scores and the teacher's pseudo-labels, as its :meth:`auxiliary_loss`.

**Pseudo-labels: the paper's arg-max collapses; we centre the teacher (``pseudo_labels``).** Eq. 3 labels
an image with :math:`\hat d = \arg\max_d g_\phi^d(x)` of a randomly initialised teacher. A random network's
scores are dominated by a part common to all images (ReLU features are positive, so every image's scores
share the direction of the mean feature): on the offline FEMNIST writers the image-dependent part is
0.3–1.5 % of each score, and the literal arg-max puts 3,000 of 3,000 images in one domain (CelebA: one or
two of four, by seed). The student then learns a constant, the teacher copies it, and FedCG is FedAvg with a
wider last layer — a clustering that never splits. ``pseudo_labels="centred"`` (default) takes the arg-max
of the teacher's scores minus their running mean :math:`c` over the images seen,
:math:`\hat d = \arg\max_d (g_\phi^d(x) - c_d)` — the centring that keeps DINO's teacher (Caron et al.,
ICCV 2021) from collapsing — with :math:`c` a buffer that FedAvg averages like BatchNorm's statistics
(a cumulative mean over the first ten batches, then an exponential one with momentum 0.9; reset when the
teacher is refreshed). It splits the same images into all four domains. ``"argmax"`` is the literal rule.

**Choices where the paper is silent** (all options): the student's separate learning rate
(10⁻⁴ vs the network's 10⁻³) is realised as a loss weight ``student_weight = 0.1`` on Eq. 3, which is
the same update for plain SGD (the FedCG method refuses momentum and Adam); :math:`\lambda_\ell` starts
at ``lambda_init = 1``; each domain's parameters start from an independent default initialisation of the
convolution (identical copies would make Eq. 6's distances zero); BatchNorm layers stay domain-agnostic;
the teacher is never trained (its parameters have no gradient; the server copies the student into it).
Each domain convolution keeps its own adjacency ``A`` (a buffer the server recomputes, Eq. 6), which
starts as ``adjacency_init``: ``"eye"``, ``"uniform"`` or ``"random"`` (Table 4's "A init").

**Where the training domains come from** (``domains``): the teacher (``"classifier"``, Sec. 3.1); the
image's oracle attribute code (``"oracle"``, Table 3); or the domain the method assigned to the client now
training (``"assigned"``, :attr:`FedCGNet.assigned_domain`: Table 4's K-means rows, one cluster per
client, :class:`~gflkit.algorithms.fedcg.FedCGKMeans`), which the student learns in place of the teacher's
pseudo-labels — at test time it is the student that assigns an unseen client's images.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gflkit.graphs.adjacency import self_weighted
from gflkit.graphs.domain_gcn import DomainGCN
from gflkit.models.base import FeatureModel
from gflkit.models.domain_classifier import DomainClassifier

DOMAIN_LAYERS = ("last", "all")
PSEUDO_LABELS = ("centred", "argmax")
TEST_DOMAINS = ("soft", "hard")
ADJACENCY_INITS = ("eye", "uniform", "random", "hamming")
DOMAIN_SOURCES = ("classifier", "oracle", "assigned")


def initial_adjacency(num_domains: int, kind: str, generator: torch.Generator | None = None,
                      beta: float = 0.5) -> Tensor:
    """``A`` before any domain parameters are compared: identity, uniform (Eq. 6 with equal similarities),
    random (Eq. 6 with uniform random similarities) or ``"hamming"`` (Table 3's H: Eq. 6 with the inverse
    Hamming distance between the domains' binary codes, for oracle domains numbered as
    :func:`~gflkit.data.loaders.celeba.domain_ids`; D must be a power of two)."""
    if kind not in ADJACENCY_INITS:
        raise ValueError(f"unknown adjacency_init {kind!r}; choose one of {list(ADJACENCY_INITS)}")
    if kind == "eye":
        return torch.eye(num_domains)
    if kind == "hamming":
        return self_weighted(inverse_hamming_similarity(num_domains), beta)
    similarity = torch.ones(num_domains, num_domains) if kind == "uniform" else \
        torch.rand(num_domains, num_domains, generator=generator)
    return self_weighted(similarity, beta)


def inverse_hamming_similarity(num_domains: int) -> Tensor:
    r""":math:`h_{ij} = 1 / \mathrm{Hamming}(i, j)` between the binary codes of domains 0 to D − 1
    (``D = 2^n``; the diagonal, distance 0, is set to 0 and replaced by Eq. 6's :math:`\beta`)."""
    bits = max(num_domains - 1, 1).bit_length()
    if num_domains < 2 or num_domains != 2 ** bits:
        raise ValueError(f"hamming adjacency needs D = 2^n domains (binary attribute codes), got {num_domains}")
    codes = (torch.arange(num_domains).unsqueeze(1) >> torch.arange(bits)) & 1
    distance = (codes.unsqueeze(1) != codes.unsqueeze(0)).sum(dim=2).float()
    return torch.where(distance > 0, 1.0 / distance.clamp(min=1), torch.zeros(()))


class DomainConv2d(nn.Module):
    """A convolution with ``D`` domain-specific residual convolutions linked by a GCN (Eqs. 4–5).

    ``domain_weights`` (``(n, D)``) must be set before each forward pass (:class:`FedCGNet` does).
    The domain parameters ``values`` are ``(D, C_out, C_in·k·k + 1)``: one row per output filter
    (weights and bias).
    """

    def __init__(self, conv: nn.Conv2d, num_domains: int, gcn: DomainGCN, residual: bool = True,
                 lambda_init: float = 1.0, adjacency: Tensor | None = None):
        super().__init__()
        if conv.groups != 1 or conv.bias is None:
            raise ValueError("a domain convolution needs an ungrouped convolution with a bias")
        self.agnostic = conv
        self.residual = residual
        domains = [nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size) for _ in range(num_domains)]
        self.values = nn.Parameter(torch.stack([
            torch.cat([c.weight.detach().flatten(1), c.bias.detach().unsqueeze(1)], dim=1) for c in domains]))
        self.scale = nn.Parameter(torch.tensor(float(lambda_init)))  # λ_ℓ
        self.gcn = gcn
        self.register_buffer("adjacency", torch.eye(num_domains) if adjacency is None else adjacency.clone())
        self.domain_weights: Tensor | None = None

    @property
    def num_domains(self) -> int:
        """The number of domains D."""
        return self.values.shape[0]

    def domain_parameters(self) -> Tensor:
        r""":math:`\hat\theta_s = \sigma(\mathbf A \mathbf V \mathbf W)`, ``(D, C_out, C_in·k·k + 1)``."""
        return self.gcn(self.values, self.adjacency)

    def forward(self, z: Tensor) -> Tensor:
        if self.domain_weights is None or self.domain_weights.shape != (len(z), self.num_domains):
            raise RuntimeError("set domain_weights, one row of D weights per sample, before the forward pass")
        conv, n = self.agnostic, len(z)
        if n == 0:  # an empty batch (a client without samples in a split)
            return conv(z)
        # Σ_d w_d conv(z; θ_d) = conv(z; Σ_d w_d θ_d): one convolution per sample with its mixed filters
        # (a grouped convolution over the batch), instead of D convolutions of every sample
        params = torch.einsum("nd,dcf->ncf", self.domain_weights, self.domain_parameters())
        weight = params[..., :-1].reshape(n * conv.out_channels, conv.in_channels, *conv.kernel_size)
        mixed = F.conv2d(z.reshape(1, n * conv.in_channels, *z.shape[-2:]), weight, params[..., -1].reshape(-1),
                         conv.stride, conv.padding, conv.dilation, groups=n)
        mixed = mixed.view(n, conv.out_channels, *mixed.shape[-2:])
        return conv(z) + self.scale * mixed if self.residual else mixed


class FedCGNet(FeatureModel):
    """A registered base CNN with FedCG's domain convolutions and domain classifiers.

    Args:
        input_shape, num_classes: as every model.
        base: the registered model whose ``conv`` stack gets domain convolutions (``leaf_celeba_cnn``;
            ``mcmahan_cnn`` with ``hidden=2048`` is LEAF's FEMNIST CNN); ``base_options`` its options.
        num_domains: D.
        layers: ``"last"`` (the paper's best, Table 4) or ``"all"`` convolutions get domain residuals.
        gcn_layers, reduction, projection, activation: the :class:`~gflkit.graphs.domain_gcn.DomainGCN`.
        residual: Eq. 4 (True) or the domain part alone (Table 3's "GCN" rows).
        lambda_init: the initial λ of every domain convolution.
        test_domains: ``"soft"`` (student probabilities) or ``"hard"`` (their arg-max) at test time.
        student_weight: weight of the student's distillation loss (Eq. 3); see the module docstring.
        adjacency_init, beta: ``A`` before the server's first update (Eq. 6's self weight ``beta``).
        domains: ``"classifier"`` (the teacher / student domains, Sec. 3.1) or ``"oracle"`` (Table 3: each
            image's domain is given as the input's last, constant channel, e.g. CelebA's
            ``domain_channel``; the model reads and removes it, in training and at test time, and the
            domain classifiers are never used) or ``"assigned"`` (every training image of a client is in
            the domain :attr:`assigned_domain` that the method sets before the client trains; ``None``: no
            domain, the domain residuals are off and the network is its domain-agnostic part alone).
    """

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, base: str = "leaf_celeba_cnn",
                 base_options: dict | None = None, num_domains: int = 4, layers: str = "last",
                 gcn_layers: int = 1, reduction: int = 1, projection: bool = True, activation: str = "relu",
                 residual: bool = True, lambda_init: float = 1.0, test_domains: str = "soft",
                 student_weight: float = 0.1, adjacency_init: str = "eye", beta: float = 0.5,
                 pseudo_labels: str = "centred", domains: str = "classifier"):
        super().__init__()
        from gflkit.models import build_model  # the registry imports this module

        if layers not in DOMAIN_LAYERS:
            raise ValueError(f"unknown layers {layers!r}; choose one of {list(DOMAIN_LAYERS)}")
        if test_domains not in TEST_DOMAINS:
            raise ValueError(f"unknown test_domains {test_domains!r}; choose one of {list(TEST_DOMAINS)}")
        if pseudo_labels not in PSEUDO_LABELS:
            raise ValueError(f"unknown pseudo_labels {pseudo_labels!r}; choose one of {list(PSEUDO_LABELS)}")
        if student_weight < 0:
            raise ValueError(f"student_weight must be >= 0, got {student_weight}")
        if domains not in DOMAIN_SOURCES:
            raise ValueError(f"unknown domains {domains!r}; choose one of {list(DOMAIN_SOURCES)}")
        if domains == "assigned" and not residual:
            raise ValueError("domains='assigned' first trains the clients apart on the domain-agnostic network "
                             "(no domain), which residual=False does not have: use residual=True")
        self.domains = domains
        if domains == "oracle":  # the last channel is the domain, not an image channel
            input_shape = (input_shape[0] - 1, *input_shape[1:])
        self.base = build_model(base, input_shape, num_classes, **(base_options or {}))
        if not isinstance(getattr(self.base, "conv", None), nn.Sequential):
            raise ValueError(f"base model {base!r} has no `conv` stack of convolutions to make domain-specific")
        self.test_domains, self.student_weight, self.num_domains, self.beta = test_domains, student_weight, num_domains, beta
        self.feature_dim = self.base.feature_dim
        self.domain_layers = self._replace_convolutions(layers, num_domains, gcn_layers, reduction, projection,
                                                        activation, residual, lambda_init,
                                                        initial_adjacency(num_domains, adjacency_init, beta=beta))
        self.teacher = DomainClassifier(input_shape[0], num_domains).requires_grad_(False)
        self.student = DomainClassifier(input_shape[0], num_domains)
        self.pseudo_labels = pseudo_labels
        # running mean of the teacher's scores and the number of batches behind it (float: FedAvg averages it)
        self.register_buffer("teacher_center", torch.zeros(num_domains))
        self.register_buffer("teacher_center_batches", torch.zeros(()))
        self._student_loss: Tensor | None = None
        #: the training domain of the client now training (``domains="assigned"``), None for none
        self.assigned_domain: int | None = None

    def _replace_convolutions(self, layers: str, num_domains: int, gcn_layers: int, reduction: int,
                              projection: bool, activation: str, residual: bool, lambda_init: float,
                              adjacency: Tensor) -> list[DomainConv2d]:
        stack = self.base.conv
        positions = [i for i, m in enumerate(stack) if isinstance(m, nn.Conv2d)]
        chosen = positions[-1:] if layers == "last" else positions
        replaced = []
        for i in chosen:
            conv = stack[i]
            features = conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1] + 1
            gcn = DomainGCN(features, gcn_layers, reduction, projection, activation)
            stack[i] = DomainConv2d(conv, num_domains, gcn, residual, lambda_init, adjacency)
            replaced.append(stack[i])
        return replaced

    def domain_weights(self, x: Tensor) -> Tensor:
        """The ``(n, D)`` domain weights of a batch: in training the one-hot of the teacher's pseudo-labels (or
        of the assigned domain; zeros without one), at test time the student's; in training also records
        the student's distillation loss against those training domains (Eq. 3)."""
        if self.training:
            if self.domains == "assigned" and self.assigned_domain is None:  # the domain-agnostic network alone
                self._student_loss = None
                return x.new_zeros(len(x), self.num_domains)
            pseudo = self.teacher_labels(x) if self.domains == "classifier" else self.assigned_labels(x)
            self._student_loss = self.student_weight * F.cross_entropy(self.student(x), pseudo)
            return F.one_hot(pseudo, self.num_domains).to(x.dtype)
        self._student_loss = None
        with torch.no_grad():
            probabilities = torch.softmax(self.student(x), dim=1)
        if self.test_domains == "hard":
            return F.one_hot(probabilities.argmax(dim=1), self.num_domains).to(x.dtype)
        return probabilities

    CENTER_MOMENTUM = 0.9

    @torch.no_grad()
    def teacher_labels(self, x: Tensor) -> Tensor:
        """The teacher's pseudo-labels of a training batch (``pseudo_labels``: centred or literal arg-max);
        centring first updates the running mean of the teacher's scores with this batch."""
        scores = self.teacher(x)
        if self.pseudo_labels == "argmax":
            return scores.argmax(dim=1)
        seen = float(self.teacher_center_batches)
        rate = max(1.0 / (seen + 1.0), 1.0 - self.CENTER_MOMENTUM)
        self.teacher_center.mul_(1.0 - rate).add_(rate * scores.mean(dim=0))
        self.teacher_center_batches.add_(1.0)
        return (scores - self.teacher_center).argmax(dim=1)

    def assigned_labels(self, x: Tensor) -> Tensor:
        """Every image of the batch in the client's :attr:`assigned_domain`."""
        if not 0 <= self.assigned_domain < self.num_domains:
            raise ValueError(f"assigned_domain must lie in 0..{self.num_domains - 1} (num_domains), got "
                             f"{self.assigned_domain}")
        return torch.full((len(x),), self.assigned_domain, dtype=torch.long, device=x.device)

    def oracle_domains(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The image channels of a batch and the one-hot oracle domains its last channel holds."""
        ids = x[:, -1, 0, 0].round().long()
        if bool((ids < 0).any() or (ids >= self.num_domains).any()):
            raise ValueError(f"oracle domain ids must lie in 0..{self.num_domains - 1} (num_domains), got "
                             f"{sorted(set(ids.tolist()))[:8]}")
        return x[:, :-1], F.one_hot(ids, self.num_domains).to(x.dtype)

    def features(self, x: Tensor) -> Tensor:
        if self.domains == "oracle":
            x, weights = self.oracle_domains(x)
            self._student_loss = None
        else:
            weights = self.domain_weights(x)
        for layer in self.domain_layers:
            layer.domain_weights = weights
        return self.base.features(x)

    def head(self, h: Tensor) -> Tensor:
        return self.base.head(h)

    local_prefixes = ("base.classifier.",)

    @property
    def classifier(self) -> nn.Linear:
        """The base network's classifier (what head / body splits select)."""
        return self.base.classifier

    def auxiliary_loss(self) -> Tensor | None:
        """The student's distillation loss of the latest training forward pass (Eq. 3, weighted)."""
        return self._student_loss

    def domain_layer_names(self) -> list[str]:
        """The qualified names of the domain convolutions (their entries are ``<name>.values``, ``.scale``, ...)."""
        layers = set(map(id, self.domain_layers))
        return [name for name, module in self.named_modules() if id(module) in layers]

    def lambdas(self) -> Tensor:
        """λ of every domain convolution, in layer order."""
        return torch.stack([layer.scale.detach() for layer in self.domain_layers])
