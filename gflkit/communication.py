r"""What a method transmits: float32 values sent up and down per participating client per round.

Every method declares its cost with :meth:`~gflkit.algorithms.base.Algorithm.communication`, called on the
federation after :meth:`~gflkit.algorithms.base.Algorithm.setup` (sharing masks, cluster models and
embeddings exist then). It returns a :class:`Communication`: ``up_floats`` (client → server) and
``down_floats`` (server → client), the numbers of values **one participating client** sends and receives
in **one round**, as gflkit's implementation (and the method's paper) transmits them. Counting rules:

* **What counts**: every tensor entry a client's step needs from the server (its starting model, the
  anchors of its local terms, cluster models, control variates, structure features) and every one the
  server reads from it (its model, or the shared entries of it under partial sharing, control-variate
  updates, embeddings, representations, gradients). A model vector counts all ``fed.dim`` entries,
  BatchNorm statistics and other buffers included, since they travel in the vector the method averages.
* **Partial sharing** (:mod:`gflkit.algorithms.sharing`; FedPer, LG-FedAvg, SFL+Per / SFL+LG, FedVGAE):
  only the shared entries travel, ``int(shared.sum())`` each way. A vector both ends already hold (the
  common initial model, a client's own model) is not sent.
* **Per participating client, per round**: the cost of a client sampled in a round once training is under
  way (from round 2 on: a first round without a regulariser, e.g. SFL's or pFedGraph's, is not
  discounted). Extra round trips inside a round (FedSKA's gradient exchange) count in that round. Where
  the count depends on the client (FedSKA's per-sample features), it is the mean over the training
  clients, so a value may be fractional.
* **Not counted**: scalars (sample counts, losses, GCFL+'s gradient norm); one-off phases before round 1
  (FedSage+'s NeighGen training, FedCG-KMeans' clustering of separately trained models); anything the
  server only evaluates; encoding or protocol overhead. The upload channel (:mod:`gflkit.channel`) does
  not change the count: a lost entry was still sent.
* **Bytes**: :data:`FLOAT32_BYTES` = 4 per value (:attr:`Communication.bytes_up`,
  :attr:`Communication.bytes_down`).
"""
from __future__ import annotations

from dataclasses import dataclass

#: bytes per transmitted value (float32)
FLOAT32_BYTES = 4


@dataclass(frozen=True)
class Communication:
    """Float32 values one participating client sends up (``up_floats``) and receives (``down_floats``) per round."""

    up_floats: float
    down_floats: float

    def __post_init__(self) -> None:
        if not (self.up_floats >= 0 and self.down_floats >= 0):
            raise ValueError(f"communication counts must be >= 0, got up={self.up_floats}, down={self.down_floats}")

    @classmethod
    def both(cls, floats: float) -> "Communication":
        """The same number of values each way (e.g. a model down, the trained model up)."""
        return cls(floats, floats)

    def __add__(self, other: "Communication") -> "Communication":
        """Both directions summed (a method's model traffic plus what else it sends)."""
        return Communication(self.up_floats + other.up_floats, self.down_floats + other.down_floats)

    @property
    def bytes_up(self) -> float:
        """Bytes sent client → server per participating client per round (:data:`FLOAT32_BYTES` per value)."""
        return FLOAT32_BYTES * self.up_floats

    @property
    def bytes_down(self) -> float:
        """Bytes sent server → client per participating client per round (:data:`FLOAT32_BYTES` per value)."""
        return FLOAT32_BYTES * self.down_floats


__all__ = ["FLOAT32_BYTES", "Communication"]
