"""Reading LEAF json files (Caldas et al., "LEAF: A Benchmark for Federated Settings", 2018).

LEAF's preprocessing (https://github.com/TalwalkarLab/leaf, ``data/<dataset>/preprocess.sh``) writes
``data/<dataset>/data/{train,test}/*.json``, each::

    {"users": [u1, u2, ...], "num_samples": [n1, n2, ...],
     "user_data": {u1: {"x": [...], "y": [...]}, ...}, "hierarchies": [...] (optional)}

gflkit stores them gzip-compressed (``<LEAF name>.json.gz``, ``gzip -9 -n``); plain ``.json`` is read too.
A train/test pair holds the same users; pooling keeps users in order of first appearance (train files
first, in the spec's order). The samples actually stored in ``user_data`` are used; ``num_samples`` is not
trusted, because LEAF's ``-t sample`` split can leave it larger than the stored test samples (the offline
Shakespeare test file lists 4,671 but stores 3,881 samples).
"""
from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


@dataclass
class LeafSamples:
    """Samples gathered from LEAF files: per sample the raw ``x``, ``y``, user index and test flag."""

    x: list[Any]
    y: list[Any]
    user: list[int]
    is_test: list[bool]
    user_names: list[str]


def read_leaf_json(path: str | Path) -> dict[str, Any]:
    """One LEAF json file (``.json`` or ``.json.gz``), with its schema checked."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict) or not {"users", "num_samples", "user_data"} <= set(data):
        raise ValueError(f"{path} is not a LEAF json file (needs keys users, num_samples, user_data)")
    if len(data["users"]) != len(data["num_samples"]):
        raise ValueError(f"{path}: {len(data['users'])} users but {len(data['num_samples'])} num_samples")
    for user in data["users"]:
        entry = data["user_data"].get(user)
        if entry is None or len(entry["x"]) != len(entry["y"]):
            raise ValueError(f"{path}: user {user!r} has no user_data entry or different numbers of x and y")
    return data


def gather_leaf(train_files: Iterable[Path], test_files: Iterable[Path]) -> LeafSamples:
    """Pool the samples of LEAF train and test files, users indexed in order of first appearance."""
    out = LeafSamples([], [], [], [], [])
    index: dict[str, int] = {}
    for is_test, files in ((False, list(train_files)), (True, list(test_files))):
        for path in files:
            data = read_leaf_json(path)
            for user in data["users"]:
                uid = index.setdefault(user, len(index))
                if uid == len(out.user_names):
                    out.user_names.append(user)
                entry = data["user_data"][user]
                out.x.extend(entry["x"])
                out.y.extend(entry["y"])
                out.user.extend([uid] * len(entry["y"]))
                out.is_test.extend([is_test] * len(entry["y"]))
    return out


def split_files(paths: dict[str, Path], prefix: str = "") -> tuple[list[Path], list[Path]]:
    """The train and test files among ``{relpath: path}`` (relpaths ``[prefix]train/...`` / ``test/...``)."""
    train = [p for rel, p in paths.items() if rel.startswith(prefix + "train/")]
    test = [p for rel, p in paths.items() if rel.startswith(prefix + "test/")]
    return train, test
