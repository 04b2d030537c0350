"""Tiny graph datasets in the exact canonical raw formats, written into a test's tmp folder.

Each ``write_*`` writes the raw files under ``spec.raw_dir(root)`` like the real distribution and returns
a copy of the production :class:`DatasetSpec` re-pinned to the fixture files (register it with
:func:`gflkit.data.registered`) plus the arrays it wrote. Nothing is written outside ``root``.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gflkit.data import DatasetSpec, get_spec, sha256_file
from gflkit.data.loaders.flickr import DRIVE_IDS, flickr_spec


def repin(spec: DatasetSpec, root: Path) -> DatasetSpec:
    """``spec`` with every file's sha256 and size replaced by those of the fixture file under ``root``."""
    raw_dir = spec.raw_dir(root)
    files = tuple(dataclasses.replace(f, sha256=sha256_file(raw_dir / f.path), size=(raw_dir / f.path).stat().st_size)
                  for f in spec.files)
    return dataclasses.replace(spec, files=files)


def _pickle(path: Path, obj: object) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))  # the Planetoid files are Python 2 pickles


def write_planetoid(root: Path, name: str = "cora", num_train: int = 4, num_all: int = 510, num_test: int = 6,
                    num_features: int = 5, num_classes: int = 3, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """The eight ``ind.<name>.*`` files of a graph with ``num_all + num_test`` nodes.

    (PyG's reader puts 500 validation nodes after the training ones, hence ``num_all`` = 510.) Test nodes are
    ``num_all .. num_all + num_test - 1``, listed in ``test.index`` in shuffled order (row
    ``r`` of ``tx`` / ``ty`` belongs to node ``test_index[r]``); the adjacency dict has a duplicate
    neighbour, a self-loop and one-directional entries. Returns (spec, {"x", "y", "edges", "test_index"})
    with ``x`` / ``y`` in node order and ``edges`` the undirected pairs without self-loops.
    """
    rng = np.random.default_rng(seed)
    num_nodes = num_all + num_test
    x = (rng.random((num_nodes, num_features)) < 0.4).astype(np.float32)
    labels = np.arange(num_nodes) % num_classes
    one_hot = np.eye(num_classes, dtype=np.int64)[labels]
    test_index = rng.permutation(np.arange(num_all, num_nodes))
    graph = collections.defaultdict(list)
    edges = {(i, (i + 1) % num_nodes) for i in range(num_nodes)} | {(0, 5), (2, 9)}
    for i, j in sorted(edges):
        graph[i].append(j)
    graph[0].append(5)  # duplicate
    graph[3].append(3)  # self-loop
    raw = get_spec(name).raw_dir(root)
    raw.mkdir(parents=True, exist_ok=True)
    arrays = {"x": sp.csr_matrix(x[:num_train]), "tx": sp.csr_matrix(x[test_index]), "allx": sp.csr_matrix(x[:num_all]),
              "y": one_hot[:num_train], "ty": one_hot[test_index], "ally": one_hot[:num_all], "graph": graph}
    for suffix, obj in arrays.items():
        _pickle(raw / f"ind.{name}.{suffix}", obj)
    (raw / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_index))
    undirected = {(min(i, j), max(i, j)) for i, j in edges if i != j}
    return repin(get_spec(name), root), {"x": x, "y": labels, "edges": undirected, "test_index": test_index}


def write_cora_full(root: Path, num_nodes: int = 12, num_attributes: int = 7, num_classes: int = 4,
                    seed: int = 0) -> tuple[DatasetSpec, dict]:
    """graph2gauss ``cora.npz``: CSR parts of a directed adjacency (with a self-loop and a reciprocal pair)
    and of count-valued attributes, ``labels``, and the name arrays the loader never reads."""
    rng = np.random.default_rng(seed)
    edges = [(i, (i + 2) % num_nodes) for i in range(num_nodes)] + [(2, 0), (4, 4)]
    adjacency = sp.csr_matrix((np.ones(len(edges), np.float32), np.array(edges).T), shape=(num_nodes, num_nodes))
    attributes = sp.csr_matrix(rng.integers(0, 3, size=(num_nodes, num_attributes)).astype(np.float32))
    labels = np.arange(num_nodes) % num_classes
    raw = get_spec("cora_full").raw_dir(root)
    raw.mkdir(parents=True, exist_ok=True)
    np.savez(raw / "cora.npz", adj_data=adjacency.data, adj_indices=adjacency.indices, adj_indptr=adjacency.indptr,
             adj_shape=np.array(adjacency.shape), attr_data=attributes.data, attr_indices=attributes.indices,
             attr_indptr=attributes.indptr, attr_shape=np.array(attributes.shape), labels=labels,
             node_names=np.array([f"paper{i}" for i in range(num_nodes)]),
             class_names=np.array([f"class{c}" for c in range(num_classes)]))
    undirected = {(min(i, j), max(i, j)) for i, j in edges if i != j}
    return repin(get_spec("cora_full"), root), {"x": attributes.toarray(), "y": labels, "edges": undirected}


def write_flickr(root: Path, num_nodes: int = 10, num_features: int = 4, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """GraphSAINT's four files: ``adj_full.npz`` (scipy ``save_npz``, symmetric), ``feats.npy``,
    ``class_map.json`` (keys in shuffled order) and ``role.json``; returns a spec pinned to them."""
    rng = np.random.default_rng(seed)
    pairs = [(i, (i + 1) % num_nodes) for i in range(num_nodes)] + [(0, 4)]
    rows, cols = np.array(pairs + [(j, i) for i, j in pairs]).T
    adjacency = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(num_nodes, num_nodes))
    features = rng.standard_normal((num_nodes, num_features))
    labels = rng.integers(0, 7, size=num_nodes)
    labels[0] = 6
    role = {"tr": [0, 1, 2, 3, 4], "va": [5, 6], "te": [7, 8, 9]}
    raw = root / "flickr" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    sp.save_npz(raw / "adj_full.npz", adjacency)
    np.save(raw / "feats.npy", features)
    (raw / "class_map.json").write_text(json.dumps({str(i): int(labels[i]) for i in rng.permutation(num_nodes)}))
    (raw / "role.json").write_text(json.dumps(role))
    spec = flickr_spec({f: sha256_file(raw / f) for f in DRIVE_IDS})
    return spec, {"x": features, "y": labels, "edges": {(min(i, j), max(i, j)) for i, j in pairs}, "role": role}



def block_graph(num_blocks: int = 4, block_size: int = 30, neighbours: int = 5, noise: float = 0.1,
                seed: int = 0) -> "Data":
    """A small latent-space graph of ``num_blocks`` well-separated blocks as a canonical ``Data`` (no files).

    Node ``u`` of block ``b`` (nodes ``b * block_size .. (b + 1) * block_size - 1``) sits at
    ``center_b + o_u`` with the offset ``o_u ~ N(0, I_2)`` and block centres 10 apart; every node links to
    its ``neighbours`` nearest nodes (symmetrised), so edges stay inside blocks and follow the offsets.
    Features: ``[o_u, onehot(b)]`` plus N(0, ``noise``²); labels ``[o_u,1 > 0] + [o_u,2 > 0]`` (3 classes).
    Louvain / METIS recover the blocks, and both links and labels are predictable from the features.
    """
    import torch
    from torch_geometric.data import Data

    from gflkit.data.graph import undirected_edges

    rng = np.random.default_rng(seed)
    n = num_blocks * block_size
    block = np.arange(n) // block_size
    offset = rng.normal(size=(n, 2))
    angle = 2 * np.pi * block / num_blocks
    position = offset + 10 * np.stack([np.cos(angle), np.sin(angle)], axis=1)
    distance = np.linalg.norm(position[:, None] - position[None], axis=2) + np.eye(n) * 1e9
    nearest = np.argsort(distance, axis=1)[:, :neighbours]
    edges = torch.from_numpy(np.stack([np.repeat(np.arange(n), neighbours), nearest.ravel()])).long()
    x = np.concatenate([offset, np.eye(num_blocks)[block]], axis=1) + rng.normal(0, noise, (n, 2 + num_blocks))
    data = Data(x=torch.from_numpy(x.astype(np.float32)), edge_index=undirected_edges(edges, n),
                y=torch.from_numpy((offset > 0).sum(1)).long())
    data.num_classes = 3
    return data


def make_graph_federation(task: str = "link_prediction", num_clients: int = 4, seed: int = 0, epochs: int = 2,
                          lr: float = 0.05, **task_options):
    """A :class:`~gflkit.federation.GraphFederation` of VGAEs over the Louvain clients of :func:`block_graph`."""
    import torch

    from gflkit.data.subgraphs import make_subgraph_clients
    from gflkit.federation import GraphFederation
    from gflkit.models import build_model
    from gflkit.tasks import build_task
    from gflkit.training import TrainConfig

    graph = block_graph()
    clients = make_subgraph_clients(graph, num_clients, "louvain", seed=0, links=task == "link_prediction")
    torch.manual_seed(seed)
    model = build_model("vgae", (graph.num_features,), graph.num_classes if task == "node_classification" else 0)
    return GraphFederation(clients, model, build_task(task, **task_options), TrainConfig(epochs=epochs, lr=lr, momentum=0.9),
                           seed=seed)
