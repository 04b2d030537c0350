"""FedU (Dinh, Vu, Tran, Dao and Zhang, "A New Look and Convergence Rate of Federated Multi-Task
Learning with Laplacian Regularization", 2021; arXiv 2102.07148) — federated multi-task learning
with Laplacian regularisation over a given client graph."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.local import Local
from gflkit.communication import Communication
from gflkit.federation import Federation
from gflkit.graphs.adjacency import row_normalize, sym_normalize
from gflkit.graphs.given import GivenGraphOptions


NORMALIZATIONS = {"symmetric": sym_normalize, "row": row_normalize}


@dataclass(frozen=True)
class FedUParams(GivenGraphOptions):
    """``lam``: Laplacian-regularisation weight λ (the FedU code's ``L_k``), λ ≥ 0;
    ``eta``: step size η of the Laplacian step (``None``: the local learning rate, as in FedU's code);
    ``normalize``: the coupling weights :math:`a_{kl}` from the given graph :math:`A` with self loops —
    ``"symmetric"`` :math:`D^{-1/2}(A + I)D^{-1/2}` (default: the FedSKA authors' FedU, whose
    ``normalize_adj`` is Kipf's symmetric one; the FedU paper leaves :math:`a_{kl}` to the graph at hand)
    or ``"row"`` :math:`D^{-1}(A + I)` (each client's weights sum to one).

    Default λ = 0.01: the FedU paper's MNIST setting (``--L_k 0.01``, lr 0.03; λ ∈ {0.001, …, 1}
    studied). The FedSKA authors ran FedU with ``L_K = 0.1`` (their argparse default): pass
    ``lam=0.1`` to reproduce their Table 1 setting. Graph options: see :class:`GivenGraphOptions`.
    """

    lam: float = 0.01
    eta: float | None = None
    normalize: str = "symmetric"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.lam >= 0:
            raise ValueError(f"fedu lam must be >= 0, got {self.lam}")
        if self.eta is not None and not self.eta > 0:
            raise ValueError(f"fedu eta must be > 0 (or None for the local learning rate), got {self.eta}")
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(f"fedu normalize must be one of {list(NORMALIZATIONS)}, got {self.normalize!r}")


def laplacian_step(models: Tensor, weights: Tensor, step: float) -> Tensor:
    r"""One gradient step on the graph Laplacian regulariser: :math:`W - s\,(D - A)\,W`.

    Row ``k`` becomes :math:`w_k - s \sum_j a_{kj} (w_k - w_j)`; ``weights`` is the ``K × K``
    (possibly weighted, possibly self-looped: self loops cancel) adjacency :math:`A`, :math:`D` its
    diagonal degree matrix.
    """
    laplacian = torch.diag(weights.sum(dim=1)) - weights
    return models - step * (laplacian @ models)


class FedU(Local):
    r"""Personalised models coupled through the Laplacian of a given client graph.

    The objective is :math:`\sum_k f_k(w_k) + \frac{\lambda}{2} \sum_{k} \sum_{l \in N_k} a_{kl}
    \lVert w_k - w_l \rVert^2`. Each round every sampled client trains its own model :math:`w_k`
    locally (no regulariser in the local steps), then the sampled clients exchange models with their
    sampled neighbours and take one step on the regulariser,

    .. math:: w_k \leftarrow w_k - \eta \lambda \sum_{l \in N_k \cap S} a_{kl}\,(w_k - w_l),
              \qquad\text{i.e.}\quad W_S \leftarrow W_S - \eta\lambda\, L_S W_S,

    with :math:`L_S` the Laplacian of the graph restricted to the sampled clients :math:`S` (rows of
    the others are unchanged). :math:`a_{kl}` is the normalised given graph with self loops
    (``normalize``: symmetric by default, as in the FedSKA authors' FedU runs). Every client is
    evaluated with its own model — under the ``"server"`` protocol after the Laplacian step (the FedSKA
    authors' FedU server evaluates there), under ``"local"`` right after its local training.

    Difference from the FedSKA authors' code: they apply the step client after client, each client
    already seeing the updated models of earlier ones; here all sampled rows are updated at once from
    the same trained models (the paper's synchronous update).
    """

    name = "fedu"
    Params = FedUParams

    def __init__(self, **options: Any):
        super().__init__(**options)
        self.adjacency: Tensor | None = None

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        self.adjacency = self.params.build_graph(fed)

    def weights(self) -> Tensor:
        """The coupling weights :math:`a_{kl}`: the given graph with self loops, normalised (``normalize``)."""
        eye = torch.eye(len(self.adjacency), device=self.adjacency.device)
        return NORMALIZATIONS[self.params.normalize](self.adjacency + eye)

    def aggregate(self, fed: Federation, clients: Tensor, updates: Tensor, round: int) -> None:
        eta = fed.train_config.lr if self.params.eta is None else self.params.eta
        weights = self.weights()[clients][:, clients]
        fed.models[clients] = laplacian_step(updates, weights, eta * self.params.lam)

    def communication(self, fed: Federation) -> Communication:
        """``d`` each way: the trained :math:`w_k` up, its row after the server's Laplacian step down (the
        server stands for the paper's exchange with the neighbours, which would cost ``d`` per neighbour)."""
        return Communication.both(fed.dim)

    def state_dict(self) -> dict[str, Any]:
        return {"adjacency": self.adjacency}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.adjacency = state["adjacency"]

    def artifacts(self) -> dict[str, Tensor]:
        return {"adjacency": self.adjacency}
