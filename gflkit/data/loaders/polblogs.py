r"""PolBlogs (Adamic & Glance, LinkKDD 2005): hyperlinks between 1,490 US political blogs of 2004.

Raw files (``<root>/polblogs/raw/``): ``polblogs.npz``, the Nettack distribution (Zügner et al.,
KDD 2018; ``adj_data``, ``adj_indices``, ``adj_indptr``, ``adj_shape`` = the directed 1,490 × 1,490
adjacency with edge multiplicities, and ``labels``: 0 = liberal, 1 = conservative; read with
``allow_pickle=False``), and in the ``gml`` group ``polblogs.gml``, Newman's copy of the same graph (pinned
and verifiable, not needed for loading).

Graph: the adjacency is symmetrised without self-loops or duplicates (16,715 undirected edges). By
default only the **largest connected component** is kept (1,222 nodes, 16,714 edges), the standard
of the Nettack / Pro-GNN / DeepRobust benchmarks (PyG's ``PolBlogs`` keeps all 1,490 nodes and the
directed edges: pass ``largest_component=False`` for the 1,490 nodes, 266 of them isolated). The graph
is **featureless**: ``x`` is the identity :math:`I_N` (one-hot node ids), computed after the component
is taken. ``y``: 2 classes. No official split.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.transforms import LargestConnectedComponents

from gflkit.data.graph import load_graph_files, scipy_to_edge_index, undirected_edges
from gflkit.data.loaders.citation_full import read_csr
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

NAME = "polblogs"
SOURCE = "http://www-personal.umich.edu/~mejn/netdata/"
_NPZ_URL = ("https://raw.githubusercontent.com/danielzuegner/nettack/"
            "da8ec64b2444233ffa1a29b18e8abdfda2015679/data/polblogs.npz")
_GML_URL = ("https://raw.githubusercontent.com/qinyuenlp/CommunityDetection/"
            "8bc22634570438922e3660f147bf9069ff6ffb6d/data/polblogs.gml")


def _convert(paths: dict[str, Path]) -> dict[str, Any]:
    with np.load(paths["polblogs.npz"], allow_pickle=False) as npz:
        adjacency = read_csr(npz, "adj")
        labels = torch.from_numpy(np.asarray(npz["labels"], dtype=np.int64))
    num_nodes = adjacency.shape[0]
    if adjacency.shape != (num_nodes, num_nodes) or len(labels) != num_nodes:
        raise ValueError(f"polblogs.npz: adjacency {adjacency.shape} and {len(labels)} labels do not match")
    return {"x": torch.empty(num_nodes, 0), "edge_index": undirected_edges(scipy_to_edge_index(adjacency), num_nodes),
            "y": labels, "num_classes": int(labels.max()) + 1}


def load_polblogs(spec: DatasetSpec, root: Path, *, download: bool = True, largest_component: bool = True,
                  **options: Any) -> Data:
    """PolBlogs with identity features; its largest connected component unless ``largest_component=False``."""
    reject_options(spec, options, ["largest_component"])
    data = load_graph_files(spec, root, _convert, download=download, group="default")
    if largest_component:
        data = LargestConnectedComponents(num_components=1)(data)
    data.x = torch.eye(data.num_nodes)
    return data


SPEC = register(DatasetSpec(
    name=NAME,
    description="PolBlogs political blogs (Nettack npz): 1,490 blogs, 2 classes, featureless; default LCC 1,222",
    source=SOURCE,
    files=(
        RawFile("polblogs.npz", "cd0983c2b1caa3bbe2703a4e316f97bb1dccd33f98800d3d8e4bbe51cc86941b", 171030,
                (_NPZ_URL,)),
        RawFile("polblogs.gml", "bd83e3dd2397a57d2252cc212524c21fee6708663136898d4ace523224bdc632", 977839,
                (_GML_URL,), group="gml"),
    ),
    loader=load_polblogs,
    obtain=f"download {_NPZ_URL} (and, optionally, Newman's polblogs.gml) into <root>/polblogs/raw/",
    license="no explicit licence (widely redistributed for research); nettack repository MIT",
    kind="graph",
))
