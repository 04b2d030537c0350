"""Shakespeare next-character prediction (LEAF; TFF's HDF5 version), users = speaking roles.

Two sources, chosen with ``load_dataset("shakespeare", source="tff" | "leaf")`` (default ``"tff"``):

``source="tff"`` — TensorFlow Federated's HDF5 files ``<root>/shakespeare/raw/tff/shakespeare_{train,test}.h5``
(canonical distribution: https://storage.googleapis.com/tff-datasets-public/shakespeare.tar.bz2; ``fetch``
downloads the archive and extracts both members, checking each member's sha256). Layout: group
``examples/<CLIENT_ID>/snippets``, a 1-D array of byte strings (UTF-8), one spoken passage each; 715
roles, 16,068 train and 2,356 test snippets. Conversion into LEAF-style samples, per role and split,
exactly as LEAF's ``txt_to_data`` treats a role's raw text:

1. join the role's snippets (in stored order) with ``"\\n"``;
2. replace every ``"\\n"`` by a space and collapse runs of two or more spaces into one (LEAF's
   ``re.sub(r"   *", " ", text)``);
3. map characters to ids with the vocabulary below;
4. cut windows: sample ``i`` has ``x = ids[s : s + seq_length]`` and ``y = ids[s + seq_length]`` for
   ``s = 0, stride, 2·stride, …`` while ``s + seq_length < len(ids)``.

``stride=1`` reproduces LEAF's sliding window exactly (about 2.7 million samples, 1.7 GB as int64);
the default ``stride=80`` gives non-overlapping windows (about 34,000 samples; each target is the first
character of the next window). Roles keep their index in ``user_names`` even when a split of theirs is
too short to give a sample.

``source="leaf"`` — LEAF json ``<root>/shakespeare/raw/leaf/{train,test}/*.json.gz``: ``x`` are 80-character
strings and ``y`` single characters, used as they are. The offline copy holds 10 users (41,990 train +
4,671 test samples); LEAF json cannot be downloaded from one URL (see :data:`OBTAIN`).

Vocabulary (both sources): LEAF's 80 characters :data:`LEAF_CHARACTERS` get ids 0..79 in that order;
any other character maps to the out-of-vocabulary id 80 (:data:`OOV_ID`). ``num_classes`` = 81.
Output: ``x`` ``int64`` ``(N, seq_length)``, ``y`` ``int64`` ``(N,)``, ``is_test``, ``user`` = role index.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.loaders.leaf import gather_leaf, split_files
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec, RawFile, register, reject_options

LEAF_CHARACTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
OOV_ID = len(LEAF_CHARACTERS)
VOCAB_SIZE = OOV_ID + 1
SEQ_LENGTH = 80
DEFAULT_STRIDE = 80
SOURCES = ("tff", "leaf")
TFF_ARCHIVE = "https://storage.googleapis.com/tff-datasets-public/shakespeare.tar.bz2"
SOURCE = "https://github.com/TalwalkarLab/leaf/tree/master/data/shakespeare"
OBTAIN = (
    "the TFF files (source='tff') are downloaded by `gflkit data fetch shakespeare` from " + TFF_ARCHIVE + ". "
    "LEAF json (source='leaf') must be produced with LEAF's preprocessing (git clone "
    "https://github.com/TalwalkarLab/leaf; cd leaf/data/shakespeare; ./preprocess.sh -s niid --sf 0.023 -k 64 "
    "-t sample), then gzip -9 -n the json of data/train and data/test into <root>/shakespeare/raw/leaf/train/ and "
    "<root>/shakespeare/raw/leaf/test/. The registry pins the files of the offline copy (wlffffff/MAB-Shapley); "
    "pointing GFLKIT_DATA at the shared offline copies is the easiest fix."
)

_TABLE = np.full(128, OOV_ID, dtype=np.int64)
for _i, _c in enumerate(LEAF_CHARACTERS):
    _TABLE[ord(_c)] = _i
_SPACES = re.compile(r"   *")


def encode_text(text: str) -> np.ndarray:
    """Character ids (``int64``) of ``text``: LEAF's 80 characters → 0..79, anything else → :data:`OOV_ID`."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int64)
    return np.where(codes < 128, _TABLE[np.minimum(codes, 127)], OOV_ID)


def decode_ids(ids: Any) -> str:
    """Text of character ids (the OOV id becomes ``"\\ufffd"``)."""
    return "".join(LEAF_CHARACTERS[i] if 0 <= i < OOV_ID else "\ufffd" for i in np.asarray(ids).tolist())


def leaf_normalise(text: str) -> str:
    """LEAF's raw-text cleaning: newlines → spaces, runs of two or more spaces → one space."""
    return _SPACES.sub(" ", text.replace("\n", " "))


def windows(ids: np.ndarray, seq_length: int = SEQ_LENGTH, stride: int = DEFAULT_STRIDE) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)``: ``x[i] = ids[s:s+seq_length]``, ``y[i] = ids[s+seq_length]`` for ``s = 0, stride, …``."""
    if len(ids) <= seq_length:
        return np.zeros((0, seq_length), np.int64), np.zeros(0, np.int64)
    view = np.lib.stride_tricks.sliding_window_view(ids, seq_length + 1)[::stride]
    return np.ascontiguousarray(view[:, :seq_length]), np.ascontiguousarray(view[:, seq_length])


def _read_tff(path: Path) -> dict[str, list[str]]:
    import h5py

    out: dict[str, list[str]] = {}
    with h5py.File(path, "r") as handle:
        if "examples" not in handle:
            raise ValueError(f"{path} is not a TFF client-data HDF5 file (no 'examples' group)")
        for client, group in handle["examples"].items():
            if "snippets" not in group:
                raise ValueError(f"{path}: client {client!r} has no 'snippets' dataset")
            snippets = group["snippets"][()]
            out[client] = [s.decode("utf-8", errors="replace") if isinstance(s, bytes) else str(s)
                           for s in np.atleast_1d(snippets)]
    return out


def _convert_tff(paths: dict[str, Path], seq_length: int, stride: int) -> dict[str, Any]:
    splits = [_read_tff(paths["tff/shakespeare_train.h5"]), _read_tff(paths["tff/shakespeare_test.h5"])]
    names: list[str] = list(dict.fromkeys([*splits[0], *splits[1]]))
    index = {name: i for i, name in enumerate(names)}
    xs, ys, users, tests = [], [], [], []
    for is_test, clients in enumerate(splits):
        for client, snippets in clients.items():
            x, y = windows(encode_text(leaf_normalise("\n".join(snippets))), seq_length, stride)
            xs.append(x)
            ys.append(y)
            users.append(np.full(len(y), index[client], np.int64))
            tests.append(np.full(len(y), bool(is_test)))
    return {"x": torch.from_numpy(np.concatenate(xs)), "y": torch.from_numpy(np.concatenate(ys)),
            "user": torch.from_numpy(np.concatenate(users)), "is_test": torch.from_numpy(np.concatenate(tests)),
            "user_names": names}


def _convert_leaf(paths: dict[str, Path]) -> dict[str, Any]:
    train, test = split_files(paths, prefix="leaf/")
    samples = gather_leaf(sorted(train), sorted(test))
    lengths = {len(s) for s in samples.x}
    if len(lengths) > 1:
        raise ValueError(f"LEAF Shakespeare x strings must all have the same length, got lengths {sorted(lengths)}")
    if any(len(c) != 1 for c in samples.y):
        raise ValueError("LEAF Shakespeare y entries must be single characters")
    length = lengths.pop() if lengths else SEQ_LENGTH
    x = encode_text("".join(samples.x)).reshape(-1, length)
    y = encode_text("".join(samples.y))
    return {"x": torch.from_numpy(x), "y": torch.from_numpy(y),
            "user": torch.tensor(samples.user, dtype=torch.int64),
            "is_test": torch.tensor(samples.is_test, dtype=torch.bool), "user_names": samples.user_names}


def load_shakespeare(spec: DatasetSpec, root: Path, *, download: bool = True, source: str = "tff",
                     stride: int = DEFAULT_STRIDE, seq_length: int = SEQ_LENGTH, **options: Any) -> SampleDataset:
    """Shakespeare next-character samples, ``x`` ``int64`` ``(N, seq_length)``, 81 classes, users = roles.

    Args:
        source: ``"tff"`` (HDF5 snippets, cut into windows) or ``"leaf"`` (LEAF json samples as stored).
        stride: window step for ``source="tff"`` (1 = LEAF's sliding window; default 80, non-overlapping).
        seq_length: window length for ``source="tff"`` (LEAF uses 80; LEAF json is always used as stored).
    """
    reject_options(spec, options, ["source", "stride", "seq_length"])
    if source not in SOURCES:
        raise ValueError(f"shakespeare: unknown source {source!r}; choose one of {list(SOURCES)}")
    if stride < 1 or seq_length < 1:
        raise ValueError(f"shakespeare: stride and seq_length must be positive, got {stride}, {seq_length}")
    if source == "leaf" and (stride != DEFAULT_STRIDE or seq_length != SEQ_LENGTH):
        raise ValueError("shakespeare: stride / seq_length only apply to source='tff' (LEAF json holds fixed samples)")
    files = spec.files_in(source)
    require_files(spec, root, download=download, group=source)
    if source == "tff":
        data = cached_conversion(spec, root, files, lambda p: _convert_tff(p, seq_length, stride), variant="tff",
                                 options={"stride": stride, "seq_length": seq_length})
    else:
        data = cached_conversion(spec, root, files, _convert_leaf, variant="leaf")
    return SampleDataset(spec.name, data["x"], data["y"], VOCAB_SIZE, data["is_test"], data["user"],
                         list(data["user_names"]),
                         info={"source": source, "vocabulary": LEAF_CHARACTERS, "oov_id": OOV_ID,
                               "stride": stride if source == "tff" else None})


SPEC = register(DatasetSpec(
    name="shakespeare",
    description="Shakespeare next-character (TFF h5: 715 roles; LEAF json: 10 users), 80-char windows, 81 classes",
    source=TFF_ARCHIVE,
    files=(
        RawFile("tff/shakespeare_train.h5", "67100f52adfb6d5ece73c1a942b6863731a477bf09421a3c79c9937612895344",
                4035752, (TFF_ARCHIVE,), member="shakespeare_train.h5", group="tff"),
        RawFile("tff/shakespeare_test.h5", "55d3a635bffe5c4f71610a8d0cf86c1b369bfd7793e0635b5a83cde1f195689e",
                2745814, (TFF_ARCHIVE,), member="shakespeare_test.h5", group="tff"),
        RawFile("leaf/train/all_data_niid_023_keep_64_train_9.json.gz",
                "315e08b509c100007ba3f5873edcd3bb8563fa1f8fbb7d274eb84883a7ff2ac6", 327078, group="leaf"),
        RawFile("leaf/test/all_data_niid_023_keep_64_test_9.json.gz",
                "3dc91843684e7fc9d8f509584a948acf6618a646a0c0745793e04b21cb7aa3be", 37980, group="leaf"),
    ),
    loader=load_shakespeare,
    obtain=OBTAIN,
    license="text public domain (Project Gutenberg #100); LEAF BSD-2-Clause; TFF Apache-2.0 (as commonly stated)",
))
