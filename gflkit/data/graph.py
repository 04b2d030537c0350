r"""Common form of the graph datasets: one :class:`torch_geometric.data.Data` per graph.

A graph loader converts its verified raw files into a plain dict (cached by
:func:`~gflkit.data.conversion.cached_conversion`) with

* ``x``: ``(N, F)`` ``float32`` node features, dense or a sparse COO tensor (sparse bag-of-words
  features are cached sparse and made dense on load, as PyG stores them);
* ``edge_index``: ``(2, E)`` ``int64``, already canonical (:func:`undirected_edges`);
* ``y``: ``(N,)`` ``int64`` labels and ``num_classes`` (int);
* optionally the source's official ``train_mask`` / ``val_mask`` / ``test_mask`` (``(N,)`` bool).

:func:`load_graph_files` turns that into a ``Data`` with the same fields plus ``name``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec

MASKS = ("train_mask", "val_mask", "test_mask")


def undirected_edges(edge_index: Tensor, num_nodes: int) -> Tensor:
    r"""The canonical undirected edge set of a (possibly directed, duplicated, self-looped) edge list.

    :math:`E' = \{(i, j), (j, i) : (i, j) \in E,\ i \ne j\}` without duplicates, sorted by row then
    column (PyG's ``to_undirected``, which coalesces), after dropping self-loops.
    """
    edge_index, _ = remove_self_loops(edge_index.long())
    return to_undirected(edge_index, num_nodes=num_nodes)


def scipy_to_edge_index(adjacency: sp.spmatrix) -> Tensor:
    """The ``(2, nnz)`` ``int64`` positions of the stored entries of a scipy sparse adjacency matrix."""
    coo = adjacency.tocoo()
    return torch.from_numpy(np.stack([coo.row, coo.col]).astype(np.int64))


def scipy_to_sparse_tensor(matrix: sp.spmatrix) -> Tensor:
    """A scipy sparse matrix as a coalesced ``float32`` torch sparse COO tensor of the same shape."""
    coo = matrix.tocoo()
    indices = torch.from_numpy(np.stack([coo.row, coo.col]).astype(np.int64))
    values = torch.from_numpy(coo.data.astype(np.float32))
    return torch.sparse_coo_tensor(indices, values, coo.shape, check_invariants=True).coalesce()


def graph_from_converted(name: str, converted: dict[str, Any]) -> Data:
    """The :class:`Data` of a converted graph dict (see the module docstring); sparse ``x`` is made dense."""
    x = converted["x"]
    data = Data(x=(x.to_dense() if x.is_sparse else x).float(), edge_index=converted["edge_index"],
                y=converted["y"])
    for mask in MASKS:
        if mask in converted:
            data[mask] = converted[mask]
    data.num_classes = int(converted["num_classes"])
    data.name = name
    return data


def load_graph_files(spec: DatasetSpec, root: str | Path | None,
                     convert: Callable[[dict[str, Path]], dict[str, Any]], *, download: bool = True,
                     group: str | None = None) -> Data:
    """Make sure ``spec``'s raw files (one ``group`` or all) exist, verify them, convert once, return the graph.

    The files are hashed against their pinned sha256 before ``convert`` opens them
    (:func:`~gflkit.data.conversion.cached_conversion`), so pickled raw files are only unpickled after
    they matched.
    """
    require_files(spec, root, download=download, group=group)
    converted = cached_conversion(spec, root, spec.files_in(group), convert, variant=group or "")
    return graph_from_converted(spec.name, converted)


__all__ = ["MASKS", "graph_from_converted", "load_graph_files", "scipy_to_edge_index", "scipy_to_sparse_tensor",
           "undirected_edges"]
