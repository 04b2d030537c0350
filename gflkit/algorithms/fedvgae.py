r"""FedVGAE (Xue, Zhou, Jiao and Tang, "Fine-tuned Personality Federated Learning for Graph Data", IEEE TBD
2024) — Algorithm 1 of the paper.

One round, for every sampled client :math:`i` holding its model :math:`\Theta_i` (encoder and local
decoder / readout; kept on the client between rounds):

1. **Update from the server** (lines 5–7): the encoder entries are set to the global encoder
   :math:`\Theta`, the local entries keep :math:`\Theta_i`'s.
2. **Fine-tuned local aggregation** (lines 8–12, Sec. 3.2.3, Eq. 12): the client measures its current
   model and the updated one on its validation data :math:`D_i` (the task's score: AUC for links,
   accuracy for nodes). If the update made it worse by at least ``drop`` points ("such as 1 percentage
   point"), it starts instead from the mix

   .. math:: \tilde\Theta_i = \varphi\, \Theta_i + (1 - \varphi)\, \Theta

   on the encoder entries (:func:`mix`; :math:`\varphi = 1` keeps the local encoder, 0 takes the global).
3. **Local training** (lines 13–15, Eq. 11): ``local_epochs`` full-batch steps on
   :math:`L = L_o + \lambda L_{con}`, with the VGAE task loss :math:`L_o` and MOON's model-contrastive
   term on node representations :math:`z` (Eq. 10; shared with :class:`~gflkit.algorithms.moon.MOON`):
   current model vs. the global model (positive) and the client's previous trained models, a queue of
   ``pool_size`` (negatives).
4. **Encoder-only sharing** (Sec. 3.1, line 18): the client keeps :math:`\Theta_i` and uploads only its
   encoder entries; the server averages them weighted by the clients' numbers of nodes (Eq. 2),
   :math:`\Theta \leftarrow \sum_{i \in C_t} \frac{|V_i|}{\sum_{j \in C_t} |V_j|} \Theta_i^{enc}`.
   Decoder / readout entries never leave the client.

Every client is evaluated with its own model :math:`\Theta_i`. Which entries are the encoder is the
model's :meth:`~gflkit.models.base.FeatureModel.encoder_mask` (the VGAE: the shared GCN layer and the
μ / log σ layers; the inner-product decoder has no parameters, so for link prediction the local part
is empty and only node classification keeps a local readout, so for link prediction sharing the
encoder is sharing everything). The paper's other reading, ``share="first_layer"``, shares only the
common first GCN layer and keeps the μ / log σ layers local
(:meth:`~gflkit.models.vgae.VGAE.first_layer_mask`). ``share="all"`` shares every entry
(Table 5's ablation), ``lam=0`` drops the contrastive term and ``finetune=False`` the fine-tuning
(Table 6's "w/o con", "w/o ft").

Where the paper is silent or ambiguous (no code is published), documented choices: the trigger
compares the updated model with the client's current model on the same validation data (Sec. 3.2.3
and 4.1: "the client evaluates the performance of both the local and server models") rather than with
the previous round's score of Algorithm 1's line 10; :math:`D_i` is the client's whole validation
split (FED-PUB's 40 % of the nodes, or VGAE's 5 % of the edges with as many non-edges); τ is MOON's
0.5 (the paper gives no value).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from gflkit.algorithms.moon import MOON, check_contrastive
from gflkit.algorithms.sharing import SharingParams
from gflkit.federation import Federation


@dataclass(frozen=True)
class FedVGAEParams(SharingParams):
    """Hyper-parameters of FedVGAE (defaults from the paper).

    Attributes:
        share: ``"encoder"`` (the method), ``"first_layer"`` (only the common first GCN layer) or ``"all"``
            (Table 5's ablation; :mod:`gflkit.algorithms.sharing`).
        lam: λ, weight of the contrastive term (Eq. 11; 0.8, Table 7).
        tau: τ, temperature of the contrastive term (Eq. 10; not given in the paper: MOON's 0.5).
        pool_size: previous local models in the client's contrast queue (Sec. 3.2.2; 1 as MOON).
        phi: φ of the fine-tuned aggregation (Eq. 12; 0.5, Table 8).
        drop: fall of the validation score (in points of the task's score, e.g. AUC or accuracy in %)
            that triggers the fine-tuned aggregation (1, "such as 1 percentage point").
        finetune: whether the fine-tuned aggregation runs at all (False: Table 6's "w/o ft").
        validation: the client split the trigger measures (``"val"``; ``"train"`` for federations
            without a validation split, e.g. sample clients).
    """

    share: str = "encoder"
    lam: float = 0.8
    tau: float = 0.5
    pool_size: int = 1
    phi: float = 0.5
    drop: float = 1.0
    finetune: bool = True
    validation: str = "val"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_contrastive(self.lam, self.tau, self.pool_size, "fedvgae", "lam")
        if not 0 <= self.phi <= 1:
            raise ValueError(f"fedvgae phi must lie in [0, 1], got {self.phi}")
        if self.drop < 0:
            raise ValueError(f"fedvgae drop must be >= 0 points, got {self.drop}")


def mix(local: Tensor, global_model: Tensor, shared: Tensor, phi: float) -> Tensor:
    r"""Eq. 12 on the shared entries, :math:`\varphi\,\Theta_i + (1 - \varphi)\,\Theta`; the local entries stay :math:`\Theta_i`'s."""
    return torch.where(shared, phi * local + (1 - phi) * global_model, local)


class FedVGAE(MOON):
    """Encoder-only sharing, MOON's contrastive term and validation-triggered fine-tuned aggregation
    (see the module docstring)."""

    name = "fedvgae"
    Params = FedVGAEParams

    @property
    def contrastive_weight(self) -> float:
        """The weight of the contrastive term (FedVGAE's λ)."""
        return self.params.lam

    def setup(self, fed: Federation) -> None:
        super().setup(fed)
        score = getattr(fed.task, "score", None)
        if score is None:
            raise ValueError(f"fedvgae needs a task with a validation score (classification, link_prediction, "
                             f"node_classification), got {fed.task.name!r}")
        try:
            fed.client_data(0, self.params.validation)
        except ValueError as error:
            raise ValueError(f"fedvgae's fine-tuning validates on the split {self.params.validation!r}: {error}; "
                             f"choose the option validation accordingly") from error
        self.score = score
        self.finetuned = torch.zeros(fed.num_clients, dtype=torch.long, device=fed.device)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "finetuned": self.finetuned}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.finetuned = state["finetuned"]

    def configure(self, fed: Federation, client: int) -> Tensor:
        """Steps 1–2: the global encoder with the client's local entries, or the Eq. 12 mix when validation drops."""
        local = fed.models[client]
        updated = super().configure(fed, client)
        if self.params.finetune and self.validation_drop(fed, client, local, updated) >= self.params.drop:
            self.finetuned[client] += 1
            return mix(local, fed.global_model, self.shared, self.params.phi)
        return updated

    def validation_drop(self, fed: Federation, client: int, local: Tensor, updated: Tensor) -> float:
        """Score of ``local`` minus score of ``updated`` on the client's validation split (NaN: no drop)."""
        split = self.params.validation
        before = fed.client_metrics(client, local, split)[self.score]
        after = fed.client_metrics(client, updated, split)[self.score]
        return -math.inf if math.isnan(before - after) else before - after
