"""FedAtt, attentive aggregation (Ji, Pan, Long, Li, Jiang and Huang, "Learning Private Neural Language
Modeling with Attentive Aggregation", IJCNN 2019; authors' code: github.com/shaoxiongji/fed-att)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gflkit.algorithms.method import Method, Uploads
from gflkit.seeding import FEDATT_NOISE
from gflkit.state import Layout


@dataclass(frozen=True)
class FedAttParams:
    """Hyper-parameters of FedAtt (defaults: the authors' ``options.py``, also the SFL authors' copy):

    * ``step_size`` = 1.0: the server's step ε towards the attended clients (``--epsilon 1``), > 0;
    * ``norm`` = 2: the order p of the layer distance :math:`\\lVert w^l - w_k^l\\rVert_p`, taken over the
      flattened layer (``--ord 2``; for a 2-D weight the authors' ``scipy.linalg.norm(·, ord=2)`` is the
      spectral norm, the SFL authors' copy uses the flattened L1 norm), ≥ 1;
    * ``noise`` = 0.001: standard deviation of the Gaussian noise added to the new global model
      (``--dp 0.001``, the paper's randomisation for privacy), ≥ 0; seeded per (seed, round).
    """

    step_size: float = 1.0
    norm: float = 2.0
    noise: float = 0.001

    def __post_init__(self) -> None:
        if not self.step_size > 0:
            raise ValueError(f"fedatt step_size must be > 0, got {self.step_size}")
        if not self.norm >= 1:
            raise ValueError(f"fedatt norm must be >= 1 (a p-norm), got {self.norm}")
        if not self.noise >= 0:
            raise ValueError(f"fedatt noise must be >= 0, got {self.noise}")


def attentive_step(server: Tensor, clients: Tensor, layout: Layout, step_size: float, norm: float) -> Tensor:
    r"""One FedAtt server step, layer by layer (every entry of ``layout``):

    .. math::
        s_k^l = \lVert w^l - w_k^l \rVert_p, \qquad \alpha_k^l = \operatorname{softmax}_k(s_k^l), \qquad
        w^l \leftarrow w^l - \epsilon \sum_k \alpha_k^l\,(w^l - w_k^l)

    ``server`` is the flat global model :math:`w` (``d``), ``clients`` the received models (``n × d``).
    """
    new = server.clone()
    for entry in layout.entries:
        difference = server[entry.slice] - clients[:, entry.slice]
        attention = torch.softmax(torch.linalg.vector_norm(difference, ord=norm, dim=1), dim=0)
        new[entry.slice] = server[entry.slice] - step_size * (attention @ difference)
    return new


class FedAtt(Method):
    r"""FedAvg's clients with the attentive server step of :func:`attentive_step`.

    Clients start from the global model and train locally, as in FedAvg; the server replaces the
    weighted mean by a step of size ε towards the clients, each layer weighting a client by the softmax
    of its distance from the global layer, then adds Gaussian noise of standard deviation ``noise``.
    Every client is scored with the global model under the ``server`` protocol. Written on the public surface
    (:class:`~gflkit.algorithms.method.Method`): an aggregation and nothing else.
    """

    name = "fedatt"
    Params = FedAttParams
    stream = FEDATT_NOISE

    def aggregate_models(self, uploads: Uploads) -> Tensor:
        stepped = attentive_step(uploads.current, uploads.models, uploads.layout, self.params.step_size,
                                 self.params.norm)
        if self.params.noise > 0:
            noise = torch.randn(len(stepped), generator=uploads.random)
            stepped = stepped + self.params.noise * noise.to(stepped.device)
        return stepped
