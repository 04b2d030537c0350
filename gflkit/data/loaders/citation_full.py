r"""CoraFull (Bojchevski & Günnemann, "Deep Gaussian Embedding of Graphs", ICLR 2018): the full Cora graph.

Raw file: ``<root>/cora_full/raw/cora.npz``, graph2gauss's ``data/cora.npz`` — the file PyG's
``CitationFull(name="cora")`` reads. It is a numpy ``.npz`` of CSR parts: ``adj_data``,
``adj_indices``, ``adj_indptr``, ``adj_shape`` (the directed citation adjacency), ``attr_data``,
``attr_indices``, ``attr_indptr``, ``attr_shape`` (bag-of-words counts) and ``labels``; its other
members (node / attribute / class names) are never read, and the file is opened with
``allow_pickle=False``.

Pin: the shared PROVENANCE.md (``cora_full/``) records no copy and no sha256 (only graph2gauss's git
blob ``7dfe6828…``, > 4 MiB). The sha256 pinned here is the one GraphMLDatasets.jl registers for the
same URL (``yuehhua/GraphMLDatasets.jl``, ``src/cora.jl``; also FluxML/GeometricFlux.jl); a download
that does not match it is discarded.

Graph, as PyG's ``read_npz(..., to_undirected=True)``: ``x`` the binarised attributes
(:math:`x_{ij} = [a_{ij} > 0]`, ``float32``; 19,793 × 8,710), ``edge_index`` the symmetrised
adjacency without self-loops or duplicates, ``y`` the 70 classes. No official split.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from gflkit.data.graph import load_graph_files, scipy_to_edge_index, scipy_to_sparse_tensor, undirected_edges
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

NAME = "cora_full"
SOURCE = "https://github.com/abojchevski/graph2gauss"
URL = ("https://raw.githubusercontent.com/abojchevski/graph2gauss/"
       "240248289d38c22ba28ea8e56b7d6873e291499b/data/cora.npz")
SHA256 = "62e054f93be00a3dedb15b7ac15a2a07168ceab68b40bf95f54d2289d024c6bc"


def read_csr(npz: Any, prefix: str) -> sp.csr_matrix:
    """The CSR matrix stored as ``<prefix>_data``, ``_indices``, ``_indptr``, ``_shape`` in an open ``.npz``."""
    return sp.csr_matrix((npz[f"{prefix}_data"], npz[f"{prefix}_indices"], npz[f"{prefix}_indptr"]),
                         shape=tuple(int(d) for d in npz[f"{prefix}_shape"]))


def _convert(paths: dict[str, Path]) -> dict[str, Any]:
    with np.load(paths["cora.npz"], allow_pickle=False) as npz:
        adjacency, attributes = read_csr(npz, "adj"), read_csr(npz, "attr")
        labels = torch.from_numpy(np.asarray(npz["labels"], dtype=np.int64))
    num_nodes = adjacency.shape[0]
    if adjacency.shape != (num_nodes, num_nodes) or attributes.shape[0] != num_nodes or len(labels) != num_nodes:
        raise ValueError(f"cora.npz: adjacency {adjacency.shape}, attributes {attributes.shape} and "
                         f"{len(labels)} labels do not describe the same nodes")
    return {"x": scipy_to_sparse_tensor((attributes > 0).astype(np.float32)),
            "edge_index": undirected_edges(scipy_to_edge_index(adjacency), num_nodes),
            "y": labels, "num_classes": int(labels.max()) + 1}


def load_cora_full(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> Data:
    """CoraFull as one undirected graph with binary features (no options; see the module docstring)."""
    reject_options(spec, options)
    return load_graph_files(spec, root, _convert, download=download)


SPEC = register(DatasetSpec(
    name=NAME,
    description="CoraFull (graph2gauss cora.npz): 19,793 papers, 8,710 binary features, 70 classes",
    source=SOURCE,
    files=(RawFile("cora.npz", SHA256, None, (URL,)),),
    loader=load_cora_full,
    obtain=f"download {URL} into <root>/cora_full/raw/cora.npz",
    license="graph2gauss repository MIT; Cora corpus by McCallum et al. (2000), no separate data licence stated",
    kind="graph",
))
