"""FedPer (Arivazhagan, Aggarwal, Singh and Choudhary, "Federated Learning with Personalization
Layers", arXiv 1912.00818, 2019): base layers federated, personalisation layers kept on the client."""
from __future__ import annotations

from gflkit.algorithms.base import NoParams
from gflkit.algorithms.fedavg import FedAvg


class FedPer(FedAvg):
    r"""FedAvg over the base layers only; every client keeps its own head.

    With :math:`m` the encoder mask of the model (everything but the classifier,
    :meth:`~gflkit.models.base.FeatureModel.encoder_mask`), client :math:`k` starts from
    :math:`m \odot w + (1 - m) \odot w_k`, uploads :math:`m \odot w_k`, and the server averages the
    base layers, :math:`m \odot w \leftarrow \sum_k \frac{n_k}{n} m \odot w_k`. Each client is scored
    with its own model. This is FedAvg's ``share="encoder"`` (:mod:`gflkit.algorithms.sharing`): the
    personalisation layers are the model's head (the last fully connected layer of the McMahan CNN,
    as in the SFL paper's comparison; the FedPer paper personalises one or two top layers).
    """

    name = "fedper"
    Params = NoParams
    share = "encoder"
