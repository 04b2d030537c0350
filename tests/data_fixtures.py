"""Tiny dataset fixtures in the exact canonical raw formats, written into a test's tmp folder.

Each ``make_*`` writes ``<root>/<name>/raw/...`` like the real distribution and returns a copy of the
production :class:`DatasetSpec` whose pinned sha256/size are those of the fixture files (register it
with :func:`gflkit.data.registered`). Nothing here is ever written outside the given root.
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import json
import pickle
import struct
import tarfile
from pathlib import Path
from typing import Sequence

import numpy as np

from gflkit.data import DatasetSpec, RawFile, get_spec, sha256_file


def spec_for(name: str, root: Path, relpaths: Sequence[str] | None = None, **changes) -> DatasetSpec:
    """The production spec of ``name`` with its files re-pinned to the fixture files under ``root``.

    ``relpaths`` replaces the expected file list (keeping URL/member/group of production files with the
    same path; new paths get the group of their first path component when it names one).
    """
    spec = get_spec(name)
    production = {f.path: f for f in spec.files}
    raw_dir = root / name / "raw"
    files = []
    for rel in relpaths if relpaths is not None else [f.path for f in spec.files]:
        base = production.get(rel) or RawFile(rel, "", group=rel.split("/")[0] if name == "shakespeare" else "default")
        path = raw_dir / rel
        files.append(dataclasses.replace(base, sha256=sha256_file(path), git_blob=None, size=path.stat().st_size))
    return dataclasses.replace(spec, files=tuple(files), **changes)


# ------------------------------------------------------------------------------------------------ MNIST
def idx_bytes(array: np.ndarray) -> bytes:
    """The IDX encoding of a uint8 array: magic (0, 0, 0x08, ndim), big-endian dims, data."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + array.tobytes()


def make_mnist(root: Path, n_train: int = 12, n_test: int = 6, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """The four gzip IDX files; returns (spec, {"train": (images, labels), "test": (...)})."""
    rng = np.random.default_rng(seed)
    raw = root / "mnist" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        (raw / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes(images), mtime=0))
        (raw / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes(labels), mtime=0))
        arrays["train" if split == "train" else "test"] = (images, labels)
    return spec_for("mnist", root), arrays


# ------------------------------------------------------------------------------------------------ CIFAR
def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def _pickle(obj: object) -> bytes:
    return pickle.dumps(obj, protocol=2)  # the archives were written by Python 2 (protocol 2)


def make_cifar10(root: Path, per_batch: int = 3, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """``cifar-10-python.tar.gz`` with ``cifar-10-batches-py/data_batch_1..5``, ``test_batch``, ``batches.meta``."""
    rng = np.random.default_rng(seed)
    raw = root / "cifar10" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    batches = {}
    with tarfile.open(raw / "cifar-10-python.tar.gz", "w:gz") as tar:
        for member in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
            data = rng.integers(0, 256, size=(per_batch, 3072), dtype=np.uint8)
            labels = [int(v) for v in rng.integers(0, 10, size=per_batch)]
            batches[member] = (data, labels)
            _add(tar, f"cifar-10-batches-py/{member}", _pickle(
                {"batch_label": f"batch {member}", "labels": labels, "data": data,
                 "filenames": [f"img{i}.png" for i in range(per_batch)]}))
        _add(tar, "cifar-10-batches-py/batches.meta", _pickle(
            {"num_cases_per_batch": per_batch, "label_names": [f"class{i}" for i in range(10)], "num_vis": 3072}))
    return spec_for("cifar10", root), batches


def make_cifar100(root: Path, n_train: int = 8, n_test: int = 4, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """``cifar-100-python.tar.gz`` with ``cifar-100-python/train``, ``test``, ``meta``."""
    rng = np.random.default_rng(seed)
    raw = root / "cifar100" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    parts = {}
    with tarfile.open(raw / "cifar-100-python.tar.gz", "w:gz") as tar:
        for member, n in (("train", n_train), ("test", n_test)):
            data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
            fine = [int(v) for v in rng.integers(0, 100, size=n)]
            coarse = [f // 5 for f in fine]
            parts[member] = (data, fine)
            _add(tar, f"cifar-100-python/{member}", _pickle(
                {"filenames": [f"f{i}.png" for i in range(n)], "batch_label": member, "fine_labels": fine,
                 "coarse_labels": coarse, "data": data}))
        _add(tar, "cifar-100-python/meta", _pickle(
            {"fine_label_names": [f"fine{i}" for i in range(100)],
             "coarse_label_names": [f"coarse{i}" for i in range(20)]}))
    return spec_for("cifar100", root), parts


# ------------------------------------------------------------------------------------------------- LEAF
def write_leaf_json(path: Path, users: dict[str, tuple[list, list]]) -> None:
    """A LEAF json file (gzip when the name ends in .gz) holding ``{user: (x, y)}``."""
    doc = {"users": list(users), "num_samples": [len(v[1]) for v in users.values()],
           "user_data": {u: {"x": x, "y": y} for u, (x, y) in users.items()}}
    text = json.dumps(doc).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text, mtime=0) if path.suffix == ".gz" else text)


FEMNIST_FILES = ("train/all_data_0_niid_05_keep_0_train_9.json.gz", "train/all_data_1_niid_05_keep_0_train_9.json.gz",
                 "test/all_data_0_niid_05_keep_0_test_9.json.gz", "test/all_data_1_niid_05_keep_0_test_9.json.gz")


def make_femnist(root: Path, seed: int = 0) -> tuple[DatasetSpec, dict]:
    """Two LEAF shard pairs: writers f0001_00, f0002_00 (shard 0) and f0003_00 (shard 1)."""
    rng = np.random.default_rng(seed)
    raw = root / "femnist" / "raw"
    counts = {"f0001_00": (3, 1), "f0002_00": (2, 2), "f0003_00": (4, 1)}
    shards = {0: ["f0001_00", "f0002_00"], 1: ["f0003_00"]}
    content = {}
    for shard, writers in shards.items():
        for split, col in (("train", 0), ("test", 1)):
            users = {}
            for w in writers:
                n = counts[w][col]
                x = (rng.integers(0, 256, size=(n, 784)) / 255.0).tolist()
                for row in x:
                    row[0] = 1.0  # white background as LEAF stores it
                y = [int(v) for v in rng.integers(0, 62, size=n)]
                users[w] = (x, y)
                content[(w, split)] = (x, y)
            write_leaf_json(raw / split / f"all_data_{shard}_niid_05_keep_0_{split}_9.json.gz", users)
    return spec_for("femnist", root, FEMNIST_FILES), content


SHAKESPEARE_LEAF_FILES = ("leaf/train/all_data_niid_023_keep_64_train_9.json.gz",
                          "leaf/test/all_data_niid_023_keep_64_test_9.json.gz")
SHAKESPEARE_TFF_FILES = ("tff/shakespeare_train.h5", "tff/shakespeare_test.h5")


def make_shakespeare_leaf(root: Path) -> dict:
    """LEAF json for two users; x are 80-character strings, y single characters (one OOV char '~')."""
    text_a = "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer~ the slings"
    text_b = "Now is the winter of our discontent Made glorious summer by this sun of York; And all the clouds"

    def samples(text: str, start: int, n: int) -> tuple[list[str], list[str]]:
        return [text[i:i + 80] for i in range(start, start + n)], [text[i + 80] for i in range(start, start + n)]

    raw = root / "shakespeare" / "raw"
    train = {"PLAY_A_HAMLET": samples(text_a, 0, 5), "PLAY_B_RICHARD": samples(text_b, 0, 4)}
    test = {"PLAY_A_HAMLET": samples(text_a, 5, 2), "PLAY_B_RICHARD": samples(text_b, 4, 1)}
    write_leaf_json(raw / SHAKESPEARE_LEAF_FILES[0], train)
    write_leaf_json(raw / SHAKESPEARE_LEAF_FILES[1], test)
    return {"train": train, "test": test}


TFF_CLIENTS = {
    "train": {
        "THE_TEMPEST_PROSPERO": ["Now does my project gather to a head:\nMy charms crack not;  my spirits obey; and time",
                                  "Goes upright with his carriage.   How's the day?\n   Exeunt all",
                                  "Ye elves of hills, brooks, standing lakes and groves, And ye that on the sands"],
        "THE_TEMPEST_ARIEL": ["On the sixth hour; at which time, my lord, You said our work should cease.~"
                              " Full fathom five thy father lies; Of his bones are coral made."],
        "THE_TEMPEST_GONZALO": ["Short line."],
    },
    "test": {
        "THE_TEMPEST_PROSPERO": ["We are such stuff As dreams are made on, and our little life Is rounded with a sleep."],
        "THE_TEMPEST_ARIEL": ["Where the bee sucks, there suck I: In a cowslip's bell I lie; There I couch."],
        "THE_TEMPEST_GONZALO": ["Now would I give a thousand furlongs of sea for an acre of barren ground."],
    },
}


def write_tff_h5(path: Path, clients: dict[str, list[str]]) -> None:
    """A TFF client-data HDF5 file: ``examples/<client>/snippets`` = fixed-length byte strings."""
    import h5py

    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as handle:
        examples = handle.create_group("examples")
        for client, snippets in clients.items():
            encoded = [s.encode("utf-8") for s in snippets]
            width = max(len(e) for e in encoded)
            examples.create_group(client).create_dataset("snippets", data=np.array(encoded, dtype=f"S{width}"))


def make_shakespeare(root: Path, tff: bool = True, leaf: bool = True) -> tuple[DatasetSpec, dict]:
    """Both Shakespeare variants (or one); the spec lists exactly the written files."""
    content: dict = {}
    rel: list[str] = []
    if tff:
        for split, relpath in zip(("train", "test"), SHAKESPEARE_TFF_FILES):
            write_tff_h5(root / "shakespeare" / "raw" / relpath, TFF_CLIENTS[split])
        rel += SHAKESPEARE_TFF_FILES
        content["tff"] = TFF_CLIENTS
    if leaf:
        content["leaf"] = make_shakespeare_leaf(root)
        rel += SHAKESPEARE_LEAF_FILES
    return spec_for("shakespeare", root, rel), content


def corrupt_one_byte(path: Path, offset: int | None = None) -> None:
    """Flip one byte of a file in place (the middle byte by default)."""
    data = bytearray(path.read_bytes())
    i = len(data) // 2 if offset is None else offset
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
