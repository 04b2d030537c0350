r"""Flickr (Zeng et al., "GraphSAINT", ICLR 2020): 89,250 images linked by shared properties, 7 classes.

Raw files (``<root>/flickr/raw/``), GraphSAINT's distribution that PyG's ``Flickr`` downloads from Google
Drive (:data:`DRIVE_IDS`):

* ``adj_full.npz``: scipy ``save_npz`` CSR (``data``, ``indices``, ``indptr``, ``shape``, ``format``) of
  the symmetric 89,250 × 89,250 adjacency, read with ``scipy.sparse.load_npz`` (``allow_pickle=False``);
* ``feats.npy``: the dense ``(89250, 500)`` feature matrix (``np.load(..., allow_pickle=False)``);
* ``class_map.json``: ``{"<node id>": class}``;
* ``role.json``: ``{"tr": [...], "va": [...], "te": [...]}``, the official train / val / test nodes.

Graph, as PyG's ``Flickr``: ``x`` ``float32``, ``edge_index`` undirected without self-loops or
duplicates (899,756 entries), ``y`` the 7 classes, ``train_mask`` / ``val_mask`` / ``test_mask`` from
``role.json``.

**Not registered by default.** Every raw file of the registry is pinned by its sha256, and no sha256
of GraphSAINT's files is published (the shared ``flickr/PROVENANCE.md`` records no copy and no hash).
Whoever has verified copies pins them and registers the dataset, after which ``load_graph("flickr")``,
``gflkit data fetch flickr`` (downloads checked against those pins) and ``gflkit data verify`` work::

    from gflkit.data import register
    from gflkit.data.loaders.flickr import flickr_spec
    register(flickr_spec({"adj_full.npz": "<sha256>", "feats.npy": "<sha256>",
                          "class_map.json": "<sha256>", "role.json": "<sha256>"}))
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from gflkit.data.graph import load_graph_files, scipy_to_edge_index, undirected_edges
from gflkit.data.registry import DatasetSpec, RawFile, reject_options

NAME = "flickr"
SOURCE = "https://github.com/GraphSAINT/GraphSAINT"
#: Google-Drive file ids of GraphSAINT's Flickr files (as in PyG's ``Flickr``), in canonical file order.
DRIVE_IDS = {
    "adj_full.npz": "1crmsTbd1-2sEXsGwa2IKnIB7Zd3TmUsy",
    "feats.npy": "1join-XdvX3anJU_MLVtick7MgeAQiWIZ",
    "class_map.json": "1uxIkbtg5drHTsKt-PAsZZ4_yJmgFmle9",
    "role.json": "1htXCtuktuCW8TR8KiKfrFDAxUgekQoV7",
}
_DRIVE_URL = "https://drive.usercontent.google.com/download?id={}&export=download&confirm=t"
ROLES = {"train_mask": "tr", "val_mask": "va", "test_mask": "te"}


def _mask(nodes: list[int], num_nodes: int) -> torch.Tensor:
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[torch.tensor(nodes, dtype=torch.long)] = True
    return mask


def _convert(paths: dict[str, Path]) -> dict[str, Any]:
    adjacency = sp.load_npz(paths["adj_full.npz"])
    features = np.load(paths["feats.npy"], allow_pickle=False)
    class_map = json.loads(paths["class_map.json"].read_text())
    role = json.loads(paths["role.json"].read_text())
    num_nodes = adjacency.shape[0]
    if features.shape[0] != num_nodes or len(class_map) != num_nodes:
        raise ValueError(f"flickr: {num_nodes} nodes in adj_full.npz, {features.shape[0]} feature rows and "
                         f"{len(class_map)} labels in class_map.json")
    y = torch.empty(num_nodes, dtype=torch.long)
    y[torch.tensor([int(k) for k in class_map])] = torch.tensor(list(class_map.values()), dtype=torch.long)
    converted = {"x": torch.from_numpy(features.astype(np.float32)),
                 "edge_index": undirected_edges(scipy_to_edge_index(adjacency), num_nodes),
                 "y": y, "num_classes": int(y.max()) + 1}
    converted.update({mask: _mask(role[key], num_nodes) for mask, key in ROLES.items()})
    return converted


def load_flickr(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> Data:
    """Flickr with GraphSAINT's official split masks (no options; see the module docstring)."""
    reject_options(spec, options)
    return load_graph_files(spec, root, _convert, download=download)


def flickr_spec(sha256: Mapping[str, str], sizes: Mapping[str, int] | None = None) -> DatasetSpec:
    """The Flickr :class:`DatasetSpec` with the given pins (register it with :func:`~gflkit.data.register`).

    Args:
        sha256: the sha256 of each of the four raw files (``adj_full.npz``, ``feats.npy``,
            ``class_map.json``, ``role.json``) of a verified copy.
        sizes: their sizes in bytes, when known.

    Raises:
        ValueError: a file is missing from ``sha256`` or an entry is not 64 hex digits.
    """
    bad = [f for f in DRIVE_IDS if not re.fullmatch(r"[0-9a-f]{64}", sha256.get(f, ""))]
    if bad:
        raise ValueError(f"sha256 must give 64 lower-case hex digits for each of {list(DRIVE_IDS)}; "
                         f"bad or missing: {bad}")
    return DatasetSpec(
        name=NAME,
        description="Flickr (GraphSAINT): 89,250 nodes, 899,756 edge entries, 500 features, 7 classes",
        source=SOURCE,
        files=tuple(RawFile(f, sha256[f], (sizes or {}).get(f), (_DRIVE_URL.format(drive_id),))
                    for f, drive_id in DRIVE_IDS.items()),
        loader=load_flickr,
        obtain="GraphSAINT's Google Drive folder (README of " + SOURCE + "), the files PyG's Flickr downloads; "
               "put them into <root>/flickr/raw/",
        license="GraphSAINT repository MIT; Flickr images data by McAuley & Leskovec (as commonly stated)",
        kind="graph",
    )
