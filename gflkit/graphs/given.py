"""The "given" client graph: side information the server is assumed to have about its clients.

FedU, SFL and FedSKA's given-graph ablation (Table 3 of the FedSKA paper) all work over a client graph
that is *given* rather than learned. For the image benchmarks the authors build it from the clients'
labels (FedSKA's and SFL's ``allocation_shards`` split code): two clients are linked when they share a
label among each one's most frequent labels (``top-5`` in the code), then edges are sub-sampled by a
fraction (``edge_frac``, 1.0 by default). Methods build it once in ``setup`` from the clients' *train*
labels and keep it with their state; normalised forms come from :mod:`gflkit.graphs.adjacency`.

Differences from the authors' code, on purpose: the code samples *directed* links (self links
included) without replacement, so a sub-sampled graph is generally asymmetric; here every undirected
edge is kept with probability ``keep_fraction`` from a seeded stream, so the graph stays symmetric.
The diagonal is zero here; methods add self loops where their normalisation needs them.

Where the data come with a graph over their clients (METR-LA: the road network between the sensor
clients, DCRNN's ``adj_mx``), ``graph="dataset"`` takes that graph instead: the paper's pre-defined
graph of Figure 6, symmetrised by the larger of the two directed weights.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from gflkit.seeding import EDGE_SAMPLING, generator

if TYPE_CHECKING:  # pragma: no cover
    from gflkit.federation import Federation

GIVEN_GRAPHS = ("label_sharing", "dataset")


def top_label_mask(label_counts: Tensor, top_labels: int | None = None) -> Tensor:
    """``K × C`` boolean: label ``c`` is among client ``k``'s ``top_labels`` most frequent present labels.

    Ties are broken by the smaller label index; ``None`` keeps every label with a positive count.
    """
    counts = torch.as_tensor(label_counts)
    if counts.dim() != 2:
        raise ValueError(f"label_counts must be a K × C matrix, got shape {tuple(counts.shape)}")
    present = counts > 0
    if top_labels is None:
        return present
    if top_labels < 1:
        raise ValueError(f"top_labels must be >= 1 (or None for every present label), got {top_labels}")
    order = torch.argsort(-counts.double(), dim=1, stable=True)[:, :top_labels]
    chosen = torch.zeros_like(present).scatter_(1, order, True)
    return chosen & present


def label_sharing_graph(
    label_counts: Tensor, top_labels: int | None = None, keep_fraction: float = 1.0, seed: int = 0
) -> Tensor:
    r"""The label-sharing client graph: a symmetric 0/1 ``K × K`` adjacency with zero diagonal.

    .. math:: A_{ij} = \mathbb{1}[i \ne j]\;\mathbb{1}\big[T_i \cap T_j \ne \emptyset\big]\; B_{ij}

    where :math:`T_k` is client ``k``'s set of ``top_labels`` most frequent labels (every present label
    when ``None``) and :math:`B_{ij} = B_{ji} \sim \mathrm{Bernoulli}(\text{keep\_fraction})` keeps each
    undirected edge independently, drawn from a stream seeded by ``seed`` (same seed, same graph).
    """
    if not 0.0 <= keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must lie in [0, 1], got {keep_fraction}")
    mask = top_label_mask(label_counts, top_labels).float()
    num_clients = mask.shape[0]
    shared = (mask @ mask.T) > 0
    keep = torch.rand(num_clients, num_clients, generator=generator(seed, EDGE_SAMPLING)) < keep_fraction
    upper = torch.triu(shared & keep, diagonal=1)
    return (upper | upper.T).float()


def dataset_graph(fed: "Federation") -> Tensor:
    r"""The graph the data provide over the clients, symmetrised, with zero diagonal (on ``fed.device``).

    .. math:: A_{ij} = \mathbb{1}[i \ne j]\,\max(G_{ij}, G_{ji})
    """
    if fed.client_graph is None:
        raise ValueError(
            "graph='dataset' needs a dataset that provides a graph over its clients (METR-LA's sensor graph, "
            "with a natural partition, and its graph files adj_mx.npz and graph_sensor_ids.txt present); "
            "use graph='label_sharing' otherwise"
        )
    graph = torch.maximum(fed.client_graph, fed.client_graph.T).float()
    return graph.fill_diagonal_(0.0)


def given_graph(
    fed: "Federation", kind: str = "label_sharing", top_labels: int | None = 5, keep_fraction: float = 1.0
) -> Tensor:
    """The given client graph of a federation (on ``fed.device``).

    ``"label_sharing"`` builds it from the clients' *train* labels (:func:`label_sharing_graph`;
    ``top_labels=5`` is the authors' split code: a client's five most frequent labels); ``"dataset"``
    takes the graph the data provide (:func:`dataset_graph`; ``top_labels`` and ``keep_fraction`` unused).
    """
    if kind not in GIVEN_GRAPHS:
        raise ValueError(f"unknown given graph {kind!r}; choose one of {list(GIVEN_GRAPHS)}")
    if kind == "dataset":
        return dataset_graph(fed)
    return label_sharing_graph(fed.train_label_counts(), top_labels, keep_fraction, seed=fed.seed).to(fed.device)


@dataclass(frozen=True)
class GivenGraphOptions:
    """Hyper-parameters of a method that works over the given client graph (a base of its ``Params``).

    ``graph``: which given graph (``"label_sharing"``: side information the server is assumed to have;
    ``"dataset"``: the graph the data provide over their clients, METR-LA's sensor graph);
    ``graph_top_labels``: labels per client that count for an edge (5 in the authors' code; ``None``: all);
    ``graph_keep_fraction``: probability of keeping each edge (the code's ``edge_frac``, 1.0).
    """

    graph: str = "label_sharing"
    graph_top_labels: int | None = 5
    graph_keep_fraction: float = 1.0
    GRAPHS = GIVEN_GRAPHS  # the values ``graph`` may take (a subclass may add its own, e.g. SFL's "learned")

    def __post_init__(self) -> None:
        if self.graph not in self.GRAPHS:
            raise ValueError(f"graph must be one of {list(self.GRAPHS)}, got {self.graph!r}")
        if self.graph_top_labels is not None and self.graph_top_labels < 1:
            raise ValueError(f"graph_top_labels must be >= 1 or None, got {self.graph_top_labels}")
        if not 0.0 <= self.graph_keep_fraction <= 1.0:
            raise ValueError(f"graph_keep_fraction must lie in [0, 1], got {self.graph_keep_fraction}")

    def build_graph(self, fed: "Federation") -> Tensor:
        """The 0/1 adjacency these options describe for ``fed``."""
        return given_graph(fed, self.graph, self.graph_top_labels, self.graph_keep_fraction)


__all__ = ["GIVEN_GRAPHS", "GivenGraphOptions", "dataset_graph", "given_graph", "label_sharing_graph", "top_label_mask"]
