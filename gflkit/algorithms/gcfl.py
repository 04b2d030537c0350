r"""GCFL+ (Xie, Ma, Liu, Wang, Lin and Fan, "Federated Graph Classification over Non-IID Graphs", NeurIPS
2021) — the authors' code (github.com/Oxfordblue7/GCFL, ``training.run_gcflplus``, ``server.py``).

GCFL+ is CFL's recursive bipartitioning (:class:`~gflkit.algorithms.cfl.CFL`, same split criterion) with
two changes: a cluster is split by the **sequences of its clients' gradient norms** over the last rounds,
compared by dynamic time warping, instead of by the cosine similarities of one round's updates; and a
cluster moves by the training-size-weighted mean of its members' updates.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.base import weighted_mean
from gflkit.algorithms.cfl import CFL, MIN_SPLIT_SIZE, check_split_options, should_split
from gflkit.federation import Federation, LocalResult


@dataclass(frozen=True)
class GCFLPlusParams:
    r"""Hyper-parameters of GCFL+ (defaults: the authors' ``main_oneDS.py``, one dataset split over clients):

    * ``eps_1`` = 0.05: a cluster is near a stationary point when the norm of its sampled members' mean
      update is below :math:`\varepsilon_1` (``--epsilon1``), ≥ 0;
    * ``eps_2`` = 0.1: ... and is split only if some member's update norm exceeds :math:`\varepsilon_2`
      (``--epsilon2``), ≥ 0;
    * ``seq_length`` = 5: length :math:`T` of the gradient-norm sequences compared by DTW
      (``--seq_length``), ≥ 1;
    * ``min_rounds`` = 20: no split before round ``min_rounds + 1`` (the code's ``c_round > 20``), ≥ 0;
    * ``standardize`` = False: divide each sequence by its standard deviation before DTW, so that only
      the trends count (``--standardize``).

    ``main_multiDS.py`` (clients holding different datasets) uses ``eps_1`` = 0.01 and ``seq_length`` = 10.
    Both thresholds are absolute norms of model updates: they depend on the model, learning rate and
    local epochs (the authors': GIN, Adam lr 0.001, 1 local epoch).
    """

    eps_1: float = 0.05
    eps_2: float = 0.1
    seq_length: int = 5
    min_rounds: int = 20
    standardize: bool = False

    def __post_init__(self) -> None:
        check_split_options("gcfl", self.eps_1, self.eps_2, self.min_rounds)
        if not (isinstance(self.seq_length, int) and self.seq_length >= 1):
            raise ValueError(f"gcfl seq_length must be an integer >= 1, got {self.seq_length!r}")


def dtw_distance(a: Tensor, b: Tensor) -> float:
    r"""Dynamic-time-warping distance of two sequences,

    .. math:: \mathrm{DTW}(a, b) = \min_{\pi} \Big(\sum_{(i, j) \in \pi} (a_i - b_j)^2\Big)^{1/2}

    over the warping paths :math:`\pi` from :math:`(1, 1)` to :math:`(|a|, |b|)` with steps
    :math:`(1, 0), (0, 1), (1, 1)` (``dtaidistance.dtw.distance`` without window or penalty).
    """
    x, y = a.tolist(), b.tolist()
    if not x or not y:
        raise ValueError(f"DTW needs two non-empty sequences, got lengths {len(x)} and {len(y)}")
    previous = [0.0] + [math.inf] * len(y)
    for xi in x:
        current = [math.inf]
        for j, yj in enumerate(y):
            current.append((xi - yj) ** 2 + min(previous[j], previous[j + 1], current[j]))
        previous = current
    return math.sqrt(previous[-1])


def dtw_distance_matrix(sequences: Tensor, standardize: bool = False) -> Tensor:
    """Symmetric matrix of :func:`dtw_distance` between the rows of ``sequences`` (zero diagonal, float64, CPU).

    With ``standardize`` every row is first divided by its (population) standard deviation.
    """
    rows = sequences.detach().to("cpu", torch.float64)
    if standardize:
        rows = rows / rows.std(dim=1, unbiased=False, keepdim=True).clamp_min(1e-12)
    n = len(rows)
    distance = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(i + 1, n):
            distance[i, j] = distance[j, i] = dtw_distance(rows[i], rows[j])
    return distance


def min_cut_bipartition(weights: Tensor) -> Tensor:
    r"""Global minimum cut of the complete graph on ``n ≥ 2`` items with edge weights :math:`W_{ij} \ge 0`.

    Stoer–Wagner: each phase orders the remaining (merged) vertices by maximum adjacency from the first
    one; the weight joining the last vertex to the others is a cut, and the last two are merged. The
    lightest cut over the ``n − 1`` phases is the minimum cut (the authors' ``networkx.stoer_wagner``).
    The diagonal is ignored; ties go to the lowest index. Returns a boolean mask that is ``True`` on
    the side *not* containing item 0.
    """
    n = weights.shape[0]
    if n < 2:
        raise ValueError(f"a bipartition needs at least 2 items, got {n}")
    w = weights.detach().to("cpu", torch.float64).clone()
    w.fill_diagonal_(0.0)
    if not (bool((w >= 0).all()) and torch.equal(w, w.T)):
        raise ValueError("min-cut weights must be symmetric and >= 0")
    alive = torch.ones(n, dtype=torch.bool)
    contains = torch.eye(n, dtype=torch.bool)  # contains[v]: the items merged into vertex v
    best_cut, best_side = math.inf, contains[0]
    for _ in range(n - 1):
        remaining = alive.clone()
        last = int(remaining.nonzero()[0])
        remaining[last] = False
        connection = w[last].clone()
        while remaining.any():
            before = last
            last = int(connection.masked_fill(~remaining, -math.inf).argmax())
            cut = float(connection[last])
            remaining[last] = False
            connection += w[last]
        if cut < best_cut:
            best_cut, best_side = cut, contains[last].clone()
        w[before] += w[last]
        w[:, before] += w[:, last]
        w[before, before] = 0.0
        contains[before] |= contains[last]
        alive[last] = False
    return best_side ^ best_side[0]


def gradient_norm(fed: Federation) -> float:
    r""":math:`\lVert \nabla \rVert` of the working module's trainable parameters after local training: the
    gradient of its last step (zero when it took none)."""
    squares = [p.grad.pow(2).sum() for p in fed.flat.parameters if p.grad is not None]
    return math.sqrt(float(torch.stack(squares).sum())) if squares else 0.0


class GCFLPlus(CFL):
    r"""GCFL+: clustered FL that splits clusters by DTW distances of gradient-norm sequences.

    The server keeps cluster models :math:`\theta_c` (one at the start: the common initial model) and each
    client's cluster :math:`c(k)`. Every sampled client trains from :math:`\theta_{c(k)}`, uploads
    :math:`w_k`, and reports :math:`g_k`, the norm of the gradient of its last local step; the server keeps
    each client's sequence :math:`s_k = (g_k^{t-T+1}, \dots, g_k^{t})` of its last :math:`T` reported norms
    and forms the updates :math:`\Delta W_k = w_k - \theta_{c(k)}`. After round ``min_rounds``, when every
    client has reported :math:`T` norms since the last split, the first cluster :math:`c` (by index) with at
    least three members whose sampled members satisfy CFL's criterion

    .. math:: \Big\lVert \frac{1}{|c \cap S|}\sum_{k \in c \cap S} \Delta W_k \Big\rVert < \varepsilon_1
              \quad\text{and}\quad \max_{k \in c \cap S} \lVert \Delta W_k\rVert > \varepsilon_2

    is split by the minimum cut (:func:`min_cut_bipartition`) of its members under the weights
    :math:`\max_{ij} D - D` of their DTW distances :math:`D_{ij} = \mathrm{DTW}(s_i, s_j)`
    (:func:`dtw_distance_matrix`): the side holding the cluster's first client keeps the index, the
    other becomes a new cluster starting from a copy of :math:`\theta_c`. A split empties every client's
    sequence, so at most one cluster splits per round. Then each cluster moves by the training-size
    weighted mean update of its sampled members,

    .. math:: \theta_c \leftarrow \theta_c + \sum_{k \in c \cap S} \frac{n_k}{\sum_{j \in c \cap S} n_j}\, \Delta W_k ,

    (:math:`n_k`: training samples, or nodes for subgraph clients), and a client is evaluated with its
    cluster's model. Norms are over the trainable parameters; the update moves the whole vector.

    Choices and deviations: the authors federate only the GIN convolutions and keep each client's readout
    local; here the whole model vector is clustered (as :class:`~gflkit.algorithms.cfl.CFL`; the VGAE's
    link-prediction decoder has no parameters anyway). Their ``dtw.distance_matrix`` fills only the upper
    triangle (the rest is ``inf``), so ``max - D`` is not finite as printed; the symmetric matrix of DTW
    distances is used instead. Under partial participation a client's sequence grows only in rounds it is
    sampled, the criterion looks at the sampled members' updates and a split moves all members (every
    client has a full sequence then); the authors always sample every client. The gradient norm is
    reported beside the upload, outside the channel (like the client's training size).
    """

    name = "gcfl"
    varying_state = (*CFL.varying_state, "sequences", "lengths")
    client_step = "one_by_one"
    batchable = False  # reads the working module's last gradient after local training (gradient_norm)
    Params = GCFLPlusParams

    def check(self, num_clients: int) -> None:
        if num_clients < MIN_SPLIT_SIZE:
            raise ValueError(f"gcfl splits only clusters of at least {MIN_SPLIT_SIZE} clients; with {num_clients} "
                             f"client(s) it would never cluster (use fedavg)")

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.sequences = torch.zeros(fed.num_clients, self.params.seq_length, dtype=torch.float64)
        self.lengths = torch.zeros(fed.num_clients, dtype=torch.long)

    def record(self, client: int, norm: float) -> None:
        """Append ``norm`` to ``client``'s sequence (only its last ``seq_length`` values are kept)."""
        self.sequences[client] = torch.cat([self.sequences[client, 1:], self.sequences.new_tensor([norm])])
        self.lengths[client] += 1

    def client_update(self, fed: Federation, client: int, round: int) -> LocalResult:
        for parameter in fed.flat.parameters:
            parameter.grad = None  # a client without training steps reports 0, not its predecessor's gradient
        result = super().client_update(fed, client, round)
        self.record(client, gradient_norm(fed))
        return result

    def split_clusters(self, clients: Tensor, deltas: Tensor) -> None:
        """Bipartition the first cluster of the sampled ``clients`` that meets the criterion, by DTW min-cut."""
        if bool((self.lengths < self.params.seq_length).any()):
            return
        chosen = self.assignments[clients]
        for cluster in chosen.unique().tolist():
            members = (self.assignments == cluster).nonzero().squeeze(1)
            if len(members) < MIN_SPLIT_SIZE or not should_split(deltas[chosen == cluster], self.params.eps_1,
                                                                 self.params.eps_2):
                continue
            distance = dtw_distance_matrix(self.sequences[members.cpu()], self.params.standardize)
            second = min_cut_bipartition(distance.max() - distance).to(members.device)
            self.open_cluster(cluster, members[second])
            self.lengths.zero_()
            return

    def mean_update(self, deltas: Tensor, sizes: Tensor) -> Tensor:
        """The training-size weighted mean of the members' updates."""
        return weighted_mean(deltas, sizes)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "sequences": self.sequences, "lengths": self.lengths}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.sequences = state["sequences"]
        self.lengths = state["lengths"]
