"""Subgraph clients: metis / louvain partitions, induced subgraphs, per-client node and link splits."""
from __future__ import annotations

import os
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gflkit.data import PARTITIONERS, load_graph, make_subgraph_clients, partition_graph, split_links, split_nodes
from gflkit.data.graph import undirected_edges
from gflkit.data.subgraphs import _assign_to_smallest, sample_non_edges


def community_graph(blocks: int = 6, size: int = 40, seed: int = 0) -> Data:
    """A seeded planted-partition graph (dense blocks, sparse in between) with features and labels."""
    graph = nx.planted_partition_graph(blocks, size, 0.25, 0.01, seed=seed)
    edge_index = torch.tensor(list(graph.edges), dtype=torch.long).t()
    num_nodes = blocks * size
    edge_index = undirected_edges(edge_index, num_nodes)
    data = Data(x=torch.randn(num_nodes, 3, generator=torch.Generator().manual_seed(seed)), edge_index=edge_index,
                y=torch.arange(num_nodes) // size)
    data.num_classes = blocks
    return data


@pytest.fixture(scope="module")
def graph() -> Data:
    return community_graph()


def edge_set(edge_index: torch.Tensor) -> set[tuple[int, int]]:
    return {(min(i, j), max(i, j)) for i, j in edge_index.t().tolist()}


# ------------------------------------------------------------------------------------------ partitions
@pytest.mark.parametrize("method", PARTITIONERS)
def test_partition_is_disjoint_complete_and_deterministic(graph, method):
    parts = partition_graph(graph, num_clients=7, method=method, seed=3)
    assert len(parts) == 7 and all(len(p) > 0 for p in parts)
    every = torch.cat(parts)
    assert len(every) == graph.num_nodes and torch.equal(every.sort().values, torch.arange(graph.num_nodes))
    assert all(torch.equal(p, p.sort().values) for p in parts)
    again = partition_graph(graph, num_clients=7, method=method, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(parts, again))


def test_louvain_finds_planted_blocks_and_balances(graph):
    parts = partition_graph(graph, num_clients=6, method="louvain", seed=0)
    assert sorted(len(p) for p in parts) == [40] * 6
    assert all(len(torch.unique(graph.y[p])) == 1 for p in parts)
    other = partition_graph(graph, num_clients=4, method="louvain", seed=0)
    assert max(len(p) for p in other) - min(len(p) for p in other) <= 40


def test_greedy_assignment_goes_to_the_smallest_client():
    pieces = [[0, 1], [2, 3, 4], [5], [6, 7, 8], [9]]
    # largest first (ties by first node): [2,3,4]->0, [6,7,8]->1, [0,1]->2, [5]->2, [9]->0
    assert _assign_to_smallest(pieces, 3, 10).tolist() == [2, 2, 0, 0, 0, 2, 1, 1, 1, 0]


def test_single_client_holds_everything(graph):
    for method in PARTITIONERS:
        (part,) = partition_graph(graph, num_clients=1, method=method)
        assert torch.equal(part, torch.arange(graph.num_nodes))


@pytest.mark.parametrize("kwargs,match", [
    ({"method": "spectral"}, r"unknown partitioner method 'spectral'; choose one of \['louvain', 'metis'\]"),
    ({"num_clients": 0}, r"num_clients must lie in \[1, 240\]"),
    ({"num_clients": 241}, r"num_clients must lie in \[1, 240\]"),
    ({"seed": -1}, "seed must be a non-negative integer"),
])
def test_partition_rejects_bad_arguments(graph, kwargs, match):
    with pytest.raises(ValueError, match=match):
        partition_graph(graph, **kwargs)


# -------------------------------------------------------------------------------------------- clients
@pytest.fixture(scope="module", params=PARTITIONERS)
def clients(request, graph):
    return make_subgraph_clients(graph, num_clients=5, method=request.param, seed=1)


def test_clients_hold_induced_subgraphs(graph, clients):
    global_edges = edge_set(graph.edge_index)
    owner = torch.empty(graph.num_nodes, dtype=torch.long)
    for client in clients:
        owner[client.node_ids] = client.client
        sub = client.data
        assert sub.num_nodes == len(client.node_ids) and sub.num_classes == graph.num_classes
        assert torch.equal(sub.x, graph.x[client.node_ids]) and torch.equal(sub.y, graph.y[client.node_ids])
        mapped = client.node_ids[sub.edge_index]
        assert edge_set(mapped) <= global_edges
    kept = sum(c.data.edge_index.size(1) for c in clients)
    internal = int((owner[graph.edge_index[0]] == owner[graph.edge_index[1]]).sum())
    assert kept == internal < graph.edge_index.size(1)  # exactly the edges between clients are dropped


def test_node_splits_do_not_leak(clients):
    for client in clients:
        sub = client.data
        masks = torch.stack([sub.train_mask, sub.val_mask, sub.test_mask])
        assert (masks.sum(0) == 1).all()  # disjoint and covering
        n = sub.num_nodes
        assert int(sub.train_mask.sum()) == round(0.2 * n) and int(sub.val_mask.sum()) == round(0.4 * n)


def test_link_splits_do_not_leak(clients):
    for client in clients:
        links, sub = client.links, client.data
        train = edge_set(links.train_edge_index)
        held_out = edge_set(links.val_pos) | edge_set(links.test_pos)
        assert not train & held_out and not edge_set(links.val_pos) & edge_set(links.test_pos)
        assert train | held_out == edge_set(sub.edge_index)
        assert links.train_edge_index.size(1) == 2 * links.train_pos.size(1)
        m = links.train_pos.size(1) + links.val_pos.size(1) + links.test_pos.size(1)
        assert links.test_pos.size(1) == int(np.floor(0.10 * m)) and links.val_pos.size(1) == int(np.floor(0.05 * m))
        negatives = torch.cat([links.val_neg, links.test_neg], dim=1)
        assert links.val_neg.shape == links.val_pos.shape and links.test_neg.shape == links.test_pos.shape
        assert (negatives[0] < negatives[1]).all() and int(negatives.max()) < sub.num_nodes
        assert len(edge_set(negatives)) == negatives.size(1)  # distinct, val and test disjoint
        assert not edge_set(negatives) & edge_set(sub.edge_index)


def test_clients_are_deterministic_per_seed(graph):
    first = make_subgraph_clients(graph, num_clients=4, method="louvain", seed=7)
    again = make_subgraph_clients(graph, num_clients=4, method="louvain", seed=7)
    other = make_subgraph_clients(graph, num_clients=4, method="louvain", seed=8)
    for a, b in zip(first, again):
        assert torch.equal(a.node_ids, b.node_ids) and torch.equal(a.data.train_mask, b.data.train_mask)
        assert torch.equal(a.links.test_pos, b.links.test_pos) and torch.equal(a.links.val_neg, b.links.val_neg)
    assert any(not torch.equal(a.data.train_mask, c.data.train_mask) for a, c in zip(first, other)
               if len(a.node_ids) == len(c.node_ids))


def test_ratios_are_parameters(graph):
    (client,) = make_subgraph_clients(graph, num_clients=1, train_ratio=0.5, val_ratio=0.25, links=False)
    assert int(client.data.train_mask.sum()) == 120 and int(client.data.val_mask.sum()) == 60
    assert client.links is None


@pytest.mark.parametrize("kwargs,match", [
    ({"train_ratio": 0.0}, r"train_ratio must lie in \(0, 1\)"),
    ({"val_ratio": 1.2}, r"val_ratio must lie in \(0, 1\)"),
    ({"train_ratio": 0.6, "val_ratio": 0.4}, r"train_ratio \+ val_ratio must be < 1"),
    ({"link_test_ratio": -0.1}, r"link_test_ratio must lie in \(0, 1\)"),
    ({"link_val_ratio": 0.5, "link_test_ratio": 0.5}, r"link_val_ratio \+ link_test_ratio must be < 1"),
])
def test_clients_reject_bad_ratios(graph, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_subgraph_clients(graph, num_clients=2, **kwargs)


def test_split_functions_directly():
    train, val, test = split_nodes(10, 0.3, 0.3, seed=0)
    assert (train.sum(), val.sum(), test.sum()) == (3, 3, 4)
    with pytest.raises(ValueError, match="val_ratio"):
        split_links(torch.tensor([[0, 1], [1, 0]]), 2, val_ratio=0.0)
    triangle = undirected_edges(torch.tensor([[0, 1, 2], [1, 2, 0]]), 4)
    negatives = sample_non_edges(4, triangle, 3, seed=0)
    assert edge_set(negatives) == {(0, 3), (1, 3), (2, 3)}  # all the non-edges there are
    with pytest.raises(ValueError, match="only 3 non-adjacent pairs"):
        sample_non_edges(4, triangle, 4)


@pytest.mark.integration
@pytest.mark.parametrize("method", PARTITIONERS)
def test_real_cora_clients(method, tmp_path, monkeypatch):
    root = os.environ.get("GFLKIT_DATA")
    if not root or not (Path(root) / "planetoid" / "Cora" / "raw" / "ind.cora.graph").is_file():
        pytest.skip("real Cora not found: set GFLKIT_DATA to a root holding planetoid/Cora/raw/ind.cora.*")
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    cora = load_graph("cora", root, download=False)
    clients = make_subgraph_clients(cora, num_clients=10, method=method, seed=0)
    assert torch.equal(torch.cat([c.node_ids for c in clients]).sort().values, torch.arange(2708))
    assert all(200 < len(c.node_ids) < 350 and c.links.test_pos.size(1) > 0 for c in clients)
