r"""Which entries of a client's model leave the client: the ``share`` option of FedAvg-style methods.

A method that shares only part of the model (FedPer's base layers, LG-FedAvg's head, FedVGAE's encoder) keeps the rest
on the client: client :math:`k` starts local training from

.. math:: w_k^{start} = m \odot w + (1 - m) \odot w_k

(:math:`m` the shared mask, :math:`w` the global model, :math:`w_k` the client's own model), uploads
:math:`m \odot w_k` after training, and the server averages only the shared entries. Masks are over
the flat model vector (:class:`~gflkit.state.Layout`), read from the model:

* ``"all"``: every entry (FedAvg);
* ``"encoder"``: everything but the model's local head (:meth:`~gflkit.models.base.FeatureModel.encoder_mask`;
  FedPer's base layers, FedVGAE's encoder);
* ``"head"``: only the model's head, the complement of ``"encoder"`` (LG-FedAvg: local representation,
  federated classifier);
* ``"first_layer"``: the common first layer only (:meth:`~gflkit.models.vgae.VGAE.first_layer_mask`;
  FedVGAE's other reading: the VGAE's μ / log σ layers stay local too).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gflkit.federation import Federation

SHARES = ("all", "encoder", "head", "first_layer")


@dataclass(frozen=True)
class SharingParams:
    """``share``: which entries leave the client (:data:`SHARES`; ``"all"``: FedAvg's whole model)."""

    share: str = "all"

    def __post_init__(self) -> None:
        if self.share not in SHARES:
            raise ValueError(f"share must be one of {SHARES}, got {self.share!r}")


def shared_mask(fed: Federation, share: str) -> Tensor:
    """Boolean mask over the flat model of ``fed``: True on the entries that ``share`` uploads and averages."""
    model = fed.flat.module
    if share == "all":
        return torch.ones(fed.dim, dtype=torch.bool, device=fed.device)
    if share in ("encoder", "head"):
        encoder = model.encoder_mask(fed.layout, fed.device)
        return encoder if share == "encoder" else ~encoder
    if share == "first_layer" and hasattr(model, "first_layer_mask"):
        return model.first_layer_mask(fed.layout, fed.device)
    raise ValueError(f"share={share!r} needs a model with a common first layer (the VGAE), got "
                     f"{type(model).__name__}; use share='encoder' or 'all'")


__all__ = ["SHARES", "SharingParams", "shared_mask"]
