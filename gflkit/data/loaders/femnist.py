"""FEMNIST: LEAF's per-writer split of EMNIST / NIST SD19 (62 classes), from LEAF json shards (gzip).

The registry pins the subset present in the offline copies: 20 train/test shard pairs of LEAF's
"small" niid sample (``./preprocess.sh -s niid --sf 0.05 -k 0 -t sample``, shards
``all_data_<i>_niid_05_keep_0_{train,test}_9.json``, i in 0-10, 16-20, 31-34), stored as
``<root>/femnist/raw/{train,test}/<LEAF name>.json.gz``: 105 writers, 14,708 train + 1,685 test samples.
LEAF json cannot be downloaded from one URL: it is produced by LEAF's preprocessing scripts.

Sample format (unchanged LEAF): ``x`` is 784 floats = a 28×28 image, row-major, values k/255 with
**1.0 = white background and dark ink** (the inverse of MNIST; LEAF's values are kept as they are);
``y`` in 0..61 (0-9 digits, 10-35 upper case, 36-61 lower case).

Output: ``x`` ``float32`` ``(N, 1, 28, 28)``, ``y`` ``int64``, ``is_test`` True for LEAF's test shards,
``user`` = writer index into ``user_names`` (writer ids such as ``f3313_11``).
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

SOURCE = "https://github.com/TalwalkarLab/leaf/tree/master/data/femnist"
NUM_CLASSES = 62
OBTAIN = (
    "produce them with LEAF's preprocessing (git clone https://github.com/TalwalkarLab/leaf; cd leaf/data/femnist; "
    "./preprocess.sh -s niid --sf 0.05 -k 0 -t sample), then gzip -9 -n each json of data/train and data/test into "
    "<root>/femnist/raw/train/ and <root>/femnist/raw/test/. The registry pins the 20 shard pairs "
    "(i in 0-10, 16-20, 31-34) of the offline copy (commit 5a94e3b of slz-ai/leaf-torch); a fresh LEAF run with "
    "other seeds gives different files. The easiest fix is to point GFLKIT_DATA at the shared offline copies."
)

# (path under raw/, sha256 of the .gz file, size in bytes) — from femnist/PROVENANCE.md
_FILES = (
    ("train/all_data_0_niid_05_keep_0_train_9.json.gz", "65ed15c9d28a1040fa548a1ef50f05143a12d51a8c2733a97a99d5d26006c793", 177900),
    ("train/all_data_1_niid_05_keep_0_train_9.json.gz", "655d6af73e5656d52f3044e1bf1e1e0c43b198b65b956d859ff84c1301accab6", 169301),
    ("train/all_data_2_niid_05_keep_0_train_9.json.gz", "8e983279df0f912b0c615d7604c9e2c9e5a2e1215fe19a44dac17a3dfcbf3d71", 174007),
    ("train/all_data_3_niid_05_keep_0_train_9.json.gz", "ae4422e5a94cc9b8017800be56c858f876724402c82c7b80acbb78b9265af913", 186409),
    ("train/all_data_4_niid_05_keep_0_train_9.json.gz", "22477a3b8562e3bea6e7adc711bc903fd9725aad1df9ab8116d40590bdb36576", 162232),
    ("train/all_data_5_niid_05_keep_0_train_9.json.gz", "03a2c11423cccc5805d11bb8e647d08ecf3030e0b92ecaf3ecffb73df496c1b0", 154519),
    ("train/all_data_6_niid_05_keep_0_train_9.json.gz", "89dfc8c110c0284a598a0891865652206d8995b2f3e6bdf7a7fd39ff8107fd6b", 154082),
    ("train/all_data_7_niid_05_keep_0_train_9.json.gz", "44e7e44ea1f2b0a45290040b00308c7d3897cdd474b699854bd4a43321c8695a", 151678),
    ("train/all_data_8_niid_05_keep_0_train_9.json.gz", "6877848fc7a78f4a7f9487c076d30794cb0ba490803800e49d666c9c59ddab34", 161614),
    ("train/all_data_9_niid_05_keep_0_train_9.json.gz", "7861c6e65e50744dddd8863d92fb88379b00d96fe4d89ee64aad0d3d2699b030", 171699),
    ("train/all_data_10_niid_05_keep_0_train_9.json.gz", "b1d6c3f2afb17dab6e35437b2258bc495267f3bb7a7f3424ecb650a24ceac3ca", 158636),
    ("train/all_data_16_niid_05_keep_0_train_9.json.gz", "e4f542f343cb4d49f3b29744be33572d07477d06e651882c67dd4e42083af7eb", 168061),
    ("train/all_data_17_niid_05_keep_0_train_9.json.gz", "6587d6c7f8d80ad30ee56040e658e06a598a54028424e904a74fcce225d6b6b7", 166002),
    ("train/all_data_18_niid_05_keep_0_train_9.json.gz", "b642e698f9876fa7b983a33d135a4c2c136f1789b6a50fb92564cf1315951daa", 160760),
    ("train/all_data_19_niid_05_keep_0_train_9.json.gz", "9499ebf63b6b555b6d352587b67477be9b455a7a101f54179f6d9f71ce08912c", 168483),
    ("train/all_data_20_niid_05_keep_0_train_9.json.gz", "faae255e347628814398767ec52971be41feeb82f1969174f4e9b447d30a3afa", 161223),
    ("train/all_data_31_niid_05_keep_0_train_9.json.gz", "fc51d3a869b3cfd5b4f705f86a8d5561527db3040de307550823297e54157c84", 176852),
    ("train/all_data_32_niid_05_keep_0_train_9.json.gz", "53f22736f443d2bbe6452f0dcde7349f4cc77f559a3f15b08160f67d24c6de22", 169447),
    ("train/all_data_33_niid_05_keep_0_train_9.json.gz", "22f9c9e7fb9d51191460b808f79492bef10e61ec1b7ec008802001bc3100e25a", 164403),
    ("train/all_data_34_niid_05_keep_0_train_9.json.gz", "3607b26a9f914d8ae173053d18585ea1c0beeb6a4dbf39f9e6496bcd942a421d", 175416),
    ("test/all_data_0_niid_05_keep_0_test_9.json.gz", "9d66184d85fe4b5c8b778200aa2104cebd54d301a891e9cc1fefbabae6af8c3c", 21029),
    ("test/all_data_1_niid_05_keep_0_test_9.json.gz", "f5648c5aa87df93661efadbc3d5bc8d1e2774f313060b911b3e02ce3e2546400", 20039),
    ("test/all_data_2_niid_05_keep_0_test_9.json.gz", "7603f84bfec06939c01226bd5feb6dca0a3204f93f0d15d4a89b584236a9d872", 19870),
    ("test/all_data_3_niid_05_keep_0_test_9.json.gz", "42b54b50ed36621b03a780a750d159c3060204645fc2f0bebf6a428806888c50", 22127),
    ("test/all_data_4_niid_05_keep_0_test_9.json.gz", "c8243e50b5a12fd9408a2200c53d240853f36cd7a88467a55d9c0ea19c5996ec", 19010),
    ("test/all_data_5_niid_05_keep_0_test_9.json.gz", "ed8dada6f9ad1d93c4fd5f6e9f6955fddee5e1fe2e93fddca5939e5a46637011", 18072),
    ("test/all_data_6_niid_05_keep_0_test_9.json.gz", "8fc9c6a629860d43c45948b45e6027f21d2706ee34173498381214fa2e1b8a6e", 18115),
    ("test/all_data_7_niid_05_keep_0_test_9.json.gz", "2a2bf4f5180b7fcb0370767fa90fc1fb1705ef7362780ad83f6875a7ac914f4e", 17728),
    ("test/all_data_8_niid_05_keep_0_test_9.json.gz", "7aa09436c0b3e66a2273aa2369a081d27c8c1b574683d1e704a69ca2e3bff153", 19157),
    ("test/all_data_9_niid_05_keep_0_test_9.json.gz", "9018adb140700c0825133427b6a5ad1b109c8891bffda087dd6e02f893d6b955", 20223),
    ("test/all_data_10_niid_05_keep_0_test_9.json.gz", "8fc955e360eb17085c1de0ff6d1bddd06b303a9671eb74da5fba879095043bc8", 19147),
    ("test/all_data_16_niid_05_keep_0_test_9.json.gz", "2af611c8110828a7be3ba2a883d640795de0ff63f9f519d10b709490d84cce32", 19766),
    ("test/all_data_17_niid_05_keep_0_test_9.json.gz", "db7b314ad3503b4ae71c6fa444695676f1ab4e83cf9ad09174a2b90432d46583", 20204),
    ("test/all_data_18_niid_05_keep_0_test_9.json.gz", "a314a3b3149af9b6ed9f60244dabd49d491d87dd400a64e5be8edb36072bb94a", 18805),
    ("test/all_data_19_niid_05_keep_0_test_9.json.gz", "5cd29730fa4d751d441bc639a4f13eaf142fda7e414c2b4f7ee352621f741d21", 19674),
    ("test/all_data_20_niid_05_keep_0_test_9.json.gz", "e2f3117efe372517fa77df090659df3f87fe2ec22c5faf814e25c0b36cf764b7", 19551),
    ("test/all_data_31_niid_05_keep_0_test_9.json.gz", "45e294bf53b2b6a3e634076f5bc34ad4ccee1ca1dbbcc8f72dd653dc393e9d9a", 20897),
    ("test/all_data_32_niid_05_keep_0_test_9.json.gz", "f29eefe78403068a9ef6401f3a731147dbb2c73372d458363d13a443853d7106", 20533),
    ("test/all_data_33_niid_05_keep_0_test_9.json.gz", "d48f94b362f57c45fb7e8b067312a44452f4acc43d75df9af01683d677612f32", 20073),
    ("test/all_data_34_niid_05_keep_0_test_9.json.gz", "738587dc02de1cffbe65fdde28f9455fa477f935b0611a76caa04892d5a62955", 20910),
)


def _shard_key(path: Path) -> int:
    match = re.search(r"all_data_(\d+)_", path.name)
    return int(match.group(1)) if match else -1


def _convert(paths: dict[str, Path]) -> dict[str, Any]:
    train, test = split_files(paths)
    samples = gather_leaf(sorted(train, key=_shard_key), sorted(test, key=_shard_key))
    x = np.asarray(samples.x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != 784:
        raise ValueError(f"FEMNIST samples must hold 784 values, got array of shape {x.shape}")
    y = np.asarray(samples.y, dtype=np.int64)
    if len(y) and (y.min() < 0 or y.max() >= NUM_CLASSES):
        raise ValueError(f"FEMNIST labels outside 0..{NUM_CLASSES - 1}")
    return {"x": torch.from_numpy(x.reshape(-1, 1, 28, 28)), "y": torch.from_numpy(y),
            "is_test": torch.tensor(samples.is_test, dtype=torch.bool),
            "user": torch.tensor(samples.user, dtype=torch.int64), "user_names": samples.user_names}


def load_femnist(spec: DatasetSpec, root: Path, *, download: bool = True, **options: Any) -> SampleDataset:
    """FEMNIST writers from LEAF json: ``(N, 1, 28, 28)`` ``float32`` (1.0 = white background), 62 classes."""
    reject_options(spec, options)
    require_files(spec, root, download=download)
    data = cached_conversion(spec, root, spec.files, _convert)
    return SampleDataset(spec.name, data["x"], data["y"], NUM_CLASSES, data["is_test"], data["user"],
                         list(data["user_names"]),
                         info={"background": "1.0 (white; LEAF's values k/255 kept as stored)",
                               "classes": "0-9 digits, 10-35 A-Z, 36-61 a-z"})


SPEC = register(DatasetSpec(
    name="femnist",
    description="FEMNIST (LEAF json, 20 of 35 shards): 105 writers, 14,708 train + 1,685 test, 1x28x28, 62 classes",
    source=SOURCE,
    files=tuple(RawFile(path, sha, size) for path, sha, size in _FILES),
    loader=load_femnist,
    obtain=OBTAIN,
    license="LEAF code BSD-2-Clause; NIST SD19 / EMNIST images free for research (as commonly stated)",
))
