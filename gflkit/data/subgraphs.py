r"""Subgraph clients: cut one graph into K node-disjoint induced subgraphs, with per-client splits.

The subgraph-FL protocol of FED-PUB (Baek et al., ICML 2023) and OpenFGL (Li et al., 2024):

1. :func:`partition_graph` splits the nodes :math:`V` into K disjoint, non-empty sets
   :math:`V_1 \cup \dots \cup V_K = V` with

   * ``"metis"``: METIS k-way partitioning (pymetis), minimising the edge cut under a balance
     constraint; METIS' own random seed is set from ``seed``;
   * ``"louvain"``: Louvain communities (networkx ``louvain_communities``, seeded), communities larger
     than :math:`\lfloor N / K \rfloor` cut into chunks of that size (in ascending node id, as OpenFGL
     caps oversized communities), then assigned greedily, largest first, each to the client that
     currently holds the fewest nodes (ties: the lower client index).

2. Client :math:`k` holds the **induced subgraph** :math:`G[V_k]`: edges between two clients are dropped
   (no client sees them). Nodes are relabelled :math:`0 \dots |V_k|-1` in ascending global id;
   ``ClientGraph.node_ids`` maps them back.

3. Per client, :func:`split_nodes` draws disjoint train / val / test node masks (FED-PUB: 20 / 40 / 40 %)
   and :func:`split_links` VGAE's link split (Kipf & Welling 2016: 5 % of the edges for validation,
   10 % for test, as many sampled non-edges as negatives; message passing only over the training edges).

Every random choice comes from ``numpy.random.default_rng([seed, client, stream])``, so the same
arguments always give the same clients, and node and link splits use independent streams.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import networkx as nx
import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data

from gflkit.data.graph import undirected_edges
from gflkit.data.partition import _check_num_clients

PARTITIONERS = ("louvain", "metis")
_NODE_STREAM, _LINK_STREAM = 0, 1


@dataclass
class LinkSplit:
    """One client's link-prediction split; every edge tensor is ``(2, m)`` with each pair once, ``i < j``.

    Attributes:
        train_pos: training edges (the only edges message passing may use).
        val_pos, test_pos: held-out edges (never in ``train_pos``).
        val_neg, test_neg: sampled node pairs that are not edges of the client's subgraph, pairwise
            distinct, as many as the positives of the same split.
    """

    train_pos: Tensor
    val_pos: Tensor
    val_neg: Tensor
    test_pos: Tensor
    test_neg: Tensor

    @property
    def train_edge_index(self) -> Tensor:
        """The message-passing graph — both directions of every training edge, ``(2, 2 |train_pos|)``."""
        return torch.cat([self.train_pos, self.train_pos.flip(0)], dim=1)


@dataclass
class ClientGraph:
    """One subgraph client.

    Attributes:
        client: the client index ``k``.
        node_ids: ``(n_k,)`` ascending global ids; local node ``i`` is global node ``node_ids[i]``.
        data: the induced subgraph ``G[V_k]`` (``x``, ``y``, ``edge_index`` of all its edges, ``num_classes``)
            with the client's ``train_mask`` / ``val_mask`` / ``test_mask`` (they replace any global split).
        links: the client's link split (``None`` when not requested).
    """

    client: int
    node_ids: Tensor
    data: Data
    links: LinkSplit | None = None


# ------------------------------------------------------------------------------------------- checks
def _check_seed(seed: int) -> None:
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")


def _rng(seed: int, *stream: int) -> np.random.Generator:
    """The generator of one random stream, ``default_rng([seed, *stream])``."""
    _check_seed(seed)
    return np.random.default_rng([seed, *stream])


def _check_ratios(**ratios: float) -> None:
    """Each ratio in (0, 1) and their sum below 1 (the remainder is the last split); ValueError otherwise."""
    for name, value in ratios.items():
        if not 0.0 < value < 1.0:
            raise ValueError(f"{name} must lie in (0, 1), got {value}")
    if sum(ratios.values()) >= 1.0:
        raise ValueError(f"{' + '.join(ratios)} must be < 1 (the rest is the last split), got {sum(ratios.values())}")


def _pairs(edge_index: Tensor) -> Tensor:
    """The ``(2, m)`` undirected pairs ``i < j`` of a canonical (both directions) edge_index."""
    return edge_index[:, edge_index[0] < edge_index[1]]


# -------------------------------------------------------------------------------------- partitioners
def metis_parts(edge_index: Tensor, num_nodes: int, num_clients: int, seed: int = 0) -> Tensor:
    """METIS k-way membership ``(N,)`` of an undirected graph (pymetis, METIS seed ``seed``)."""
    import pymetis

    edge_index = undirected_edges(edge_index, num_nodes)  # sorted by row: a CSR adjacency
    starts = torch.zeros(num_nodes + 1, dtype=torch.long)
    starts[1:] = torch.bincount(edge_index[0], minlength=num_nodes).cumsum(0)
    adjacency = pymetis.CSRAdjacency(starts.tolist(), edge_index[1].tolist())
    _, membership = pymetis.part_graph(num_clients, adjacency=adjacency, options=pymetis.Options(seed=seed))
    return torch.tensor(list(membership), dtype=torch.long)


def _capped_communities(communities: list[set[int]], cap: int) -> list[list[int]]:
    """Communities as ascending node lists, each cut into chunks of at most ``cap`` nodes."""
    pieces = []
    for community in communities:
        nodes = sorted(community)
        pieces += [nodes[i:i + cap] for i in range(0, len(nodes), cap)]
    return pieces


def _assign_to_smallest(pieces: list[list[int]], num_clients: int, num_nodes: int) -> Tensor:
    """Greedy assignment, largest piece first (ties: smallest first node), each to the currently smallest client."""
    membership = torch.empty(num_nodes, dtype=torch.long)
    heap = [(0, k) for k in range(num_clients)]
    for piece in sorted(pieces, key=lambda p: (-len(p), p[0])):
        size, client = heapq.heappop(heap)
        membership[piece] = client
        heapq.heappush(heap, (size + len(piece), client))
    return membership


def louvain_parts(edge_index: Tensor, num_nodes: int, num_clients: int, seed: int = 0,
                  resolution: float = 1.0) -> Tensor:
    r"""Louvain membership ``(N,)``: seeded communities, capped at :math:`\lfloor N/K \rfloor`, greedily balanced.

    With pieces of at most :math:`\lfloor N/K \rfloor \ge 1` nodes there are at least K of them, so the
    greedy step leaves no client empty.
    """
    graph = nx.Graph()
    graph.add_nodes_from(range(num_nodes))
    graph.add_edges_from(_pairs(undirected_edges(edge_index, num_nodes)).t().tolist())
    communities = nx.community.louvain_communities(graph, resolution=resolution, seed=seed)
    pieces = _capped_communities(communities, num_nodes // num_clients)
    return _assign_to_smallest(pieces, num_clients, num_nodes)


def partition_graph(data: Data, num_clients: int = 10, method: str = "louvain", seed: int = 0) -> list[Tensor]:
    """Split the nodes of ``data`` into ``num_clients`` disjoint non-empty sets covering every node.

    Args:
        data: the graph (``edge_index`` and ``num_nodes`` are used).
        num_clients: K, in ``[1, num_nodes]``.
        method: ``"louvain"`` or ``"metis"`` (see the module docstring).
        seed: the partitioner's seed (non-negative); the same seed gives the same sets.

    Returns:
        K ascending ``int64`` tensors of global node ids.

    Raises:
        ValueError: unknown ``method``, ``num_clients`` outside ``[1, num_nodes]``, a negative seed, or a
            METIS result with an empty part.
    """
    if method not in PARTITIONERS:
        raise ValueError(f"unknown partitioner method {method!r}; choose one of {list(PARTITIONERS)}")
    num_nodes = int(data.num_nodes)
    _check_num_clients(num_clients, num_nodes)
    _check_seed(seed)
    parts_of = metis_parts if method == "metis" else louvain_parts
    membership = parts_of(data.edge_index, num_nodes, num_clients, seed)
    parts = [torch.nonzero(membership == k).flatten() for k in range(num_clients)]
    empty = [k for k, part in enumerate(parts) if len(part) == 0]
    if empty:
        raise ValueError(f"{method} left clients {empty} without nodes for num_clients={num_clients}; "
                         f"choose a smaller num_clients")
    return parts


# ------------------------------------------------------------------------------------------- splits
def split_nodes(num_nodes: int, train_ratio: float = 0.2, val_ratio: float = 0.4,
                seed: int | np.random.Generator = 0) -> tuple[Tensor, Tensor, Tensor]:
    r"""Disjoint random train / val / test masks over ``num_nodes`` nodes.

    A random permutation :math:`\pi` of the nodes; the first :math:`\operatorname{round}(\rho_{tr} n)` are
    train, the next :math:`\operatorname{round}(\rho_{va} n)` val, the rest test
    (:math:`1 - \rho_{tr} - \rho_{va}`; FED-PUB: 0.2 / 0.4 / 0.4). ``seed``: an int or a numpy Generator.

    Raises:
        ValueError: a ratio outside (0, 1) or ``train_ratio + val_ratio >= 1``.
    """
    _check_ratios(train_ratio=train_ratio, val_ratio=val_ratio)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(num_nodes))
    num_train, num_val = round(train_ratio * num_nodes), round(val_ratio * num_nodes)
    masks = []
    for chosen in (order[:num_train], order[num_train:num_train + num_val], order[num_train + num_val:]):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[chosen] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def sample_non_edges(num_nodes: int, edge_index: Tensor, count: int,
                     seed: int | np.random.Generator = 0) -> Tensor:
    r"""``count`` distinct uniformly random node pairs :math:`i < j` that are not edges, ``(2, count)``.

    Rejection sampling: draw pairs, drop self-pairs, edges and pairs already taken (keeping the first
    draw), repeat until ``count`` are taken. ``seed``: an int or a numpy Generator.

    Raises:
        ValueError: the graph has fewer than ``count`` non-adjacent pairs.
    """
    positive = _pairs(undirected_edges(edge_index, num_nodes))
    available = num_nodes * (num_nodes - 1) // 2 - positive.size(1)
    if count > available:
        raise ValueError(f"cannot sample {count} negative pairs: the graph has only {available} non-adjacent pairs")
    forbidden = (positive[0] * num_nodes + positive[1]).numpy()
    rng = np.random.default_rng(seed)
    taken = np.empty(0, dtype=np.int64)
    while len(taken) < count:
        draw = np.sort(rng.integers(0, num_nodes, size=(2 * (count - len(taken)) + 16, 2)), axis=1)
        keys = draw[draw[:, 0] != draw[:, 1]] @ np.array([num_nodes, 1])
        keys = keys[~np.isin(keys, forbidden) & ~np.isin(keys, taken)]
        _, first = np.unique(keys, return_index=True)
        taken = np.concatenate([taken, keys[np.sort(first)]])[:count]
    return torch.from_numpy(np.stack([taken // num_nodes, taken % num_nodes]))


def split_links(edge_index: Tensor, num_nodes: int, val_ratio: float = 0.05, test_ratio: float = 0.10,
                seed: int | np.random.Generator = 0) -> LinkSplit:
    r"""VGAE's link split of an undirected graph (Kipf & Welling 2016, ``mask_test_edges``).

    The :math:`m` undirected edges are permuted; the first :math:`\lfloor \rho_{te} m \rfloor` are test,
    the next :math:`\lfloor \rho_{va} m \rfloor` validation, the rest training. As many non-edges as
    held-out positives are drawn by :func:`sample_non_edges` (val and test negatives are disjoint).
    Training negatives are left to the model (VGAE's reconstruction loss resamples them each step).
    ``seed``: an int or a numpy Generator.

    Raises:
        ValueError: a ratio outside (0, 1), ``val_ratio + test_ratio >= 1``, or too few non-edges.
    """
    _check_ratios(val_ratio=val_ratio, test_ratio=test_ratio)
    rng = np.random.default_rng(seed)
    pairs = _pairs(undirected_edges(edge_index, num_nodes))
    pairs = pairs[:, torch.from_numpy(rng.permutation(pairs.size(1)))]
    num_test, num_val = int(np.floor(test_ratio * pairs.size(1))), int(np.floor(val_ratio * pairs.size(1)))
    negatives = sample_non_edges(num_nodes, edge_index, num_val + num_test, rng)
    return LinkSplit(train_pos=pairs[:, num_test + num_val:], val_pos=pairs[:, num_test:num_test + num_val],
                     val_neg=negatives[:, :num_val], test_pos=pairs[:, :num_test], test_neg=negatives[:, num_val:])


# ------------------------------------------------------------------------------------------ clients
def client_graph(data: Data, client: int, node_ids: Tensor, seed: int, *, train_ratio: float, val_ratio: float,
                 link_ratios: tuple[float, float] | None) -> ClientGraph:
    """Client ``client``: the induced subgraph on ``node_ids`` with its node masks and (optionally) link split."""
    sub = data.subgraph(node_ids)
    masks = split_nodes(sub.num_nodes, train_ratio, val_ratio, _rng(seed, client, _NODE_STREAM))
    sub.train_mask, sub.val_mask, sub.test_mask = masks
    links = None
    if link_ratios is not None:
        links = split_links(sub.edge_index, sub.num_nodes, *link_ratios, _rng(seed, client, _LINK_STREAM))
    return ClientGraph(client=client, node_ids=node_ids, data=sub, links=links)


def make_subgraph_clients(data: Data, num_clients: int = 10, method: str = "louvain", seed: int = 0, *,
                          train_ratio: float = 0.2, val_ratio: float = 0.4, links: bool = True,
                          link_val_ratio: float = 0.05, link_test_ratio: float = 0.10) -> list[ClientGraph]:
    """Partition ``data`` (:func:`partition_graph`) and build every client's induced subgraph and splits.

    Args:
        data: the global graph (canonical undirected ``edge_index``, e.g. from ``load_graph``).
        num_clients, method, seed: as for :func:`partition_graph`; ``seed`` also seeds the splits.
        train_ratio, val_ratio: node split per client (test: the rest), FED-PUB's 0.2 / 0.4 by default.
        links: also build each client's :class:`LinkSplit`.
        link_val_ratio, link_test_ratio: VGAE's 0.05 / 0.10 by default.

    Returns:
        One :class:`ClientGraph` per client, in client order. Edges between clients are dropped.

    Raises:
        ValueError: as :func:`partition_graph`, :func:`split_nodes` and :func:`split_links`.
    """
    _check_ratios(train_ratio=train_ratio, val_ratio=val_ratio)
    link_ratios = (link_val_ratio, link_test_ratio) if links else None
    if link_ratios is not None:
        _check_ratios(link_val_ratio=link_val_ratio, link_test_ratio=link_test_ratio)
    parts = partition_graph(data, num_clients, method, seed)
    return [client_graph(data, k, part, seed, train_ratio=train_ratio, val_ratio=val_ratio, link_ratios=link_ratios)
            for k, part in enumerate(parts)]


__all__ = ["PARTITIONERS", "ClientGraph", "LinkSplit", "client_graph", "louvain_parts", "make_subgraph_clients",
           "metis_parts", "partition_graph", "sample_non_edges", "split_links", "split_nodes"]
