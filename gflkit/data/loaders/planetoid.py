r"""Planetoid citation graphs Cora, CiteSeer and PubMed (Yang, Cohen & Salakhutdinov, ICML 2016).

Raw files: the eight canonical ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` files of the
original release (``kimiyoung/planetoid``, commit ``af6abf4``), in PyG's layout
``<root>/planetoid/<Cora|CiteSeer|PubMed>/raw/`` (the spec's ``folder``). All but ``test.index`` are
Python 2 pickles: every file is hashed against its pinned sha256 first, and only then read with PyG's
:func:`torch_geometric.io.read_planetoid_data` (Kipf & Welling's ``load_data`` logic: test rows are
put back at their ``test.index`` positions; CiteSeer's 15 isolated test nodes get zero features and
label 0).

Graph (:func:`~gflkit.data.load_graph`): ``x`` the bag-of-words (Cora, CiteSeer: binary; PubMed:
TF-IDF) as ``float32``; ``edge_index`` undirected without self-loops or duplicates (Cora 10,556 =
2 × 5,278 entries, CiteSeer 9,104, PubMed 88,648); ``y`` the class ids (7 / 6 / 3 classes); the public
Planetoid split as ``train_mask`` (20 per class), ``val_mask`` (500) and ``test_mask`` (1,000).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from torch_geometric.data import Data
from torch_geometric.io import read_planetoid_data

from gflkit.data.graph import MASKS, load_graph_files, undirected_edges
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

SOURCE = "https://github.com/kimiyoung/planetoid"
_COMMIT = "af6abf468a772cc055bec88c52e4d6f51b7c37e3"
_MIRRORS = (f"https://raw.githubusercontent.com/kimiyoung/planetoid/{_COMMIT}/data/",
            "https://raw.githubusercontent.com/tkipf/gcn/39a4089fe72ad9f055ed6fdb9746abdcfebc4d81/gcn/data/")
SUFFIXES = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
#: (registry name, PyG folder name, description, {suffix: (sha256, bytes)}) from the shared PROVENANCE.md.
_DATASETS = {
    "cora": ("Cora", "Cora citation graph (Planetoid): 2,708 papers, 5,278 links, 1,433 binary features, 7 classes", {
        "x": ("23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab", 22119),
        "tx": ("b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a", 148025),
        "allx": ("9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543", 257305),
        "y": ("94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1", 4054),
        "ty": ("41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad", 28135),
        "ally": ("2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71", 47959),
        "graph": ("58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d", 59847),
        "test.index": ("297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875", 5000),
    }),
    "citeseer": ("CiteSeer", "CiteSeer citation graph (Planetoid): 3,327 papers, 4,552 links, 3,703 binary "
                             "features, 6 classes", {
        "x": ("d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6", 31087),
        "tx": ("539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21", 260321),
        "allx": ("2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668", 595021),
        "y": ("8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924", 3014),
        "ty": ("55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce", 24135),
        "ally": ("f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95", 55623),
        "graph": ("d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7", 61987),
        "test.index": ("2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4", 5000),
    }),
    "pubmed": ("PubMed", "PubMed Diabetes citation graph (Planetoid): 19,717 papers, 44,324 links, 500 TF-IDF "
                         "features, 3 classes", {
        "x": ("fbe9cb5c47200d1b7769a26e579be3b7130b556831f9d850e77c4c74f2599b33", 23172),
        "tx": ("4eb5f5d0f30f26497eb0ac6ac9719d09c67e284f1ed0385c93f3ef27a671da3d", 405505),
        "allx": ("508e538e2abdccdd54c4d3e9f49d638b4af7107d85845f66ddea5a5152658b7e", 7578385),
        "y": ("e6c807633307a07ed659249006536a147c7999c797f11a2560752990181b41b3", 854),
        "ty": ("ee2e0d4819d9fbcc403689c3bf2e49face401b605932f093bc58ab6461130fdd", 12135),
        "ally": ("0c37bbe3b5014ec365e9d393cf4791925e5ed94fb194305d74f064a8d7b50f0e", 224739),
        "graph": ("5b89f0036ca22909471f1e6558eb42fa06e0c730a577bde5b058b40638f81dc9", 471808),
        "test.index": ("b101d421688bbaecbd82e8a18f1e282378d6830f3a37666f28ebc47f844341b5", 6000),
    }),
}


def raw_name(name: str, suffix: str) -> str:
    """The canonical file name ``ind.<name>.<suffix>``."""
    return f"ind.{name}.{suffix}"


def _convert(paths: dict[str, Path], name: str) -> dict[str, Any]:
    folder = paths[raw_name(name, "graph")].parent
    data = read_planetoid_data(str(folder), name)
    converted = {"x": data.x.to_sparse(), "edge_index": undirected_edges(data.edge_index, data.num_nodes),
                 "y": data.y, "num_classes": int(data.y.max()) + 1}
    converted.update({mask: data[mask] for mask in MASKS})
    return converted


def load_planetoid(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> Data:
    """One Planetoid graph with the public split masks (no options; see the module docstring)."""
    reject_options(spec, options)
    return load_graph_files(spec, root, lambda paths: _convert(paths, spec.name), download=download)


SPECS = tuple(register(DatasetSpec(
    name=name,
    description=description,
    source=SOURCE,
    files=tuple(RawFile(raw_name(name, suffix), *pins[suffix], tuple(m + raw_name(name, suffix) for m in _MIRRORS))
                for suffix in SUFFIXES),
    loader=load_planetoid,
    obtain=f"download the eight ind.{name}.* files from {SOURCE} (data/) into <root>/planetoid/{folder}/raw/",
    license="kimiyoung/planetoid repository MIT (Copyright (c) 2016 Zhilin Yang); no separate data licence stated",
    kind="graph",
    folder=f"planetoid/{folder}",
)) for name, (folder, description, pins) in _DATASETS.items())
