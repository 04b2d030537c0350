"""Loaders on canonical-format fixtures (MNIST IDX, CIFAR archives, LEAF json, TFF h5), the tensor cache,
and (``integration``) the real files under ``GFLKIT_DATA``."""
from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

import gflkit.data.loaders.cifar as cifar
from gflkit.data.cache import clean_cache
import gflkit.data.loaders.femnist as femnist
import gflkit.data.loaders.mnist as mnist
import gflkit.data.loaders.shakespeare as shakespeare
from data_fixtures import (
    TFF_CLIENTS,
    corrupt_one_byte,
    make_cifar10,
    make_cifar100,
    make_femnist,
    make_mnist,
    make_shakespeare,
)
from gflkit.data import ChecksumError, SampleDataset, load_dataset, registered, verify_dataset
from gflkit.data.loaders.shakespeare import LEAF_CHARACTERS, OOV_ID, decode_ids, encode_text


pytestmark = pytest.mark.usefixtures("isolated_data_env")


def _files(path: Path) -> set[Path]:
    return {p for p in path.rglob("*")}


# ------------------------------------------------------------------------------------------------ MNIST
def test_mnist_fixture(tmp_path):
    spec, arrays = make_mnist(tmp_path / "root", n_train=12, n_test=6)
    with registered(spec):
        data = load_dataset("mnist", tmp_path / "root")
    assert isinstance(data, SampleDataset) and len(data) == 18 and data.input_shape == (1, 28, 28)
    assert data.x.dtype == torch.float32 and data.y.dtype == torch.int64 and data.num_classes == 10
    images = np.concatenate([arrays["train"][0], arrays["test"][0]])
    labels = np.concatenate([arrays["train"][1], arrays["test"][1]])
    unit = torch.from_numpy(images[:, None].astype(np.float32) / np.float32(255))
    assert torch.allclose(data.x, (unit - 0.1307) / 0.3081)  # the authors' normalisation, by default
    assert data.y.tolist() == labels.tolist()
    assert data.is_test.tolist() == [False] * 12 + [True] * 6
    assert data.user is None and data.user_names is None


def test_mnist_normalisation_is_an_option(tmp_path):
    spec, arrays = make_mnist(tmp_path / "root", n_train=12, n_test=6)
    with registered(spec):
        unit = load_dataset("mnist", tmp_path / "root", normalize=False)
        standard = load_dataset("mnist", tmp_path / "root")
        with pytest.raises(TypeError, match="normalize must be True or False"):
            load_dataset("mnist", tmp_path / "root", normalize="yes")
        with pytest.raises(TypeError, match="accepted options: normalize"):
            load_dataset("mnist", tmp_path / "root", scale=2)
    images = np.concatenate([arrays["train"][0], arrays["test"][0]])
    assert torch.equal(unit.x, torch.from_numpy(images[:, None].astype(np.float32) / np.float32(255)))
    assert unit.x.min() >= 0 and unit.x.max() <= 1
    # a black pixel maps to -mean/std, ink to (1 - mean)/std
    assert torch.allclose(standard.x[unit.x == 0], torch.tensor(-0.1307 / 0.3081))
    assert standard.info["scale"] != unit.info["scale"]


def test_mnist_raw_pixels_are_the_sfl_authors_inputs(tmp_path):
    spec, arrays = make_mnist(tmp_path / "root", n_train=12, n_test=6)
    with registered(spec):
        raw = load_dataset("mnist", tmp_path / "root", normalize=False, raw=True)
        with pytest.raises(ValueError, match="raw=True and normalize=True exclude each other"):
            load_dataset("mnist", tmp_path / "root", raw=True)
        with pytest.raises(TypeError, match="raw must be True or False"):
            load_dataset("mnist", tmp_path / "root", normalize=False, raw=1)
    images = np.concatenate([arrays["train"][0], arrays["test"][0]])
    assert torch.equal(raw.x, torch.from_numpy(images[:, None].astype(np.float32)))
    assert raw.x.max() > 1 and raw.info["scale"] == "pixel (0-255)"


def test_idx_header_is_checked(tmp_path):
    path = tmp_path / "bad.gz"
    import gzip

    path.write_bytes(gzip.compress(bytes([0, 0, 8, 1]) + (5).to_bytes(4, "big") + b"\x01\x02"))
    with pytest.raises(ValueError, match="5"):
        mnist.read_idx(path)
    path.write_bytes(gzip.compress(b"<html>not idx</html>"))
    with pytest.raises(ValueError, match="not an IDX"):
        mnist.read_idx(path)


# ------------------------------------------------------------------------------------------------ CIFAR
def test_cifar10_fixture(tmp_path):
    spec, batches = make_cifar10(tmp_path / "root", per_batch=3)
    with registered(spec):
        data = load_dataset("cifar10", tmp_path / "root")
    assert len(data) == 18 and data.input_shape == (3, 32, 32) and data.num_classes == 10
    order = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    raw = np.concatenate([batches[m][0] for m in order])
    # row layout: 1024 red, 1024 green, 1024 blue values, each 32x32 row-major
    assert float(data.x[4, 1, 2, 3]) == pytest.approx(raw[4, 1024 + 2 * 32 + 3] / 255.0)
    assert torch.equal(data.x, torch.from_numpy(raw.reshape(-1, 3, 32, 32).astype(np.float32) / np.float32(255)))
    assert data.y.tolist() == sum((batches[m][1] for m in order), [])
    assert data.is_test.tolist() == [False] * 15 + [True] * 3
    assert data.info["label_names"] == [f"class{i}" for i in range(10)]


def test_cifar100_fixture_uses_fine_labels(tmp_path):
    spec, parts = make_cifar100(tmp_path / "root", n_train=8, n_test=4)
    with registered(spec):
        data = load_dataset("cifar100", tmp_path / "root")
    assert len(data) == 12 and data.num_classes == 100 and data.input_shape == (3, 32, 32)
    assert data.y.tolist() == parts["train"][1] + parts["test"][1]
    assert data.is_test.sum() == 4 and data.info["label_names"][7] == "fine7"


def test_cifar_archive_is_verified_before_unpickling(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_cifar10(root)
    corrupt_one_byte(root / "cifar10" / "raw" / "cifar-10-python.tar.gz")

    def no_unpickling(self):
        raise AssertionError("unpickled a file whose sha256 did not match")

    monkeypatch.setattr(cifar._ArrayUnpickler, "load", no_unpickling)
    with registered(spec), pytest.raises(ChecksumError, match="cifar-10-python.tar.gz"):
        load_dataset("cifar10", root)


def test_cifar_unpickler_refuses_arbitrary_globals():
    import io

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    with pytest.raises(pickle.UnpicklingError, match="not allowed"):
        cifar._ArrayUnpickler(io.BytesIO(pickle.dumps({"data": Evil()}, protocol=2)), encoding="latin1").load()


# ------------------------------------------------------------------------------------------------- LEAF
def test_femnist_fixture(tmp_path):
    spec, content = make_femnist(tmp_path / "root")
    with registered(spec):
        data = load_dataset("femnist", tmp_path / "root")
    assert data.user_names == ["f0001_00", "f0002_00", "f0003_00"]
    assert len(data) == 13 and data.input_shape == (1, 28, 28) and data.num_classes == 62
    assert data.is_test.sum() == 4
    train_a = torch.tensor(content[("f0001_00", "train")][0], dtype=torch.float32).reshape(-1, 1, 28, 28)
    mask = (data.user == 0) & ~data.is_test
    assert torch.equal(data.x[mask], train_a)  # LEAF values kept: no inversion, no rescaling
    assert (data.x[:, 0, 0, 0] == 1.0).all()
    assert data.y[mask].tolist() == content[("f0001_00", "train")][1]
    assert torch.bincount(data.user[data.is_test]).tolist() == [1, 2, 1]


def test_shakespeare_leaf_fixture(tmp_path):
    spec, content = make_shakespeare(tmp_path / "root", tff=False)
    with registered(spec):
        data = load_dataset("shakespeare", tmp_path / "root", source="leaf")
    train, test = content["leaf"]["train"], content["leaf"]["test"]
    assert data.user_names == ["PLAY_A_HAMLET", "PLAY_B_RICHARD"]
    assert len(data) == 12 and data.input_shape == (80,) and data.x.dtype == torch.int64
    assert data.num_classes == 81 == len(LEAF_CHARACTERS) + 1
    strings = train["PLAY_A_HAMLET"][0] + train["PLAY_B_RICHARD"][0] + test["PLAY_A_HAMLET"][0] + test["PLAY_B_RICHARD"][0]
    targets = train["PLAY_A_HAMLET"][1] + train["PLAY_B_RICHARD"][1] + test["PLAY_A_HAMLET"][1] + test["PLAY_B_RICHARD"][1]
    assert [decode_ids(row) for row in data.x] == [s.replace("~", "\ufffd") for s in strings]
    assert data.y.tolist() == [LEAF_CHARACTERS.find(c) if c in LEAF_CHARACTERS else OOV_ID for c in targets]
    assert (data.x == OOV_ID).any()  # '~' is not in LEAF's vocabulary
    assert data.user.tolist() == [0] * 5 + [1] * 4 + [0] * 2 + [1]


def _leaf_txt_to_data(raw_text: str, seq_length: int = 80) -> tuple[list[str], list[str]]:
    """LEAF's ``txt_to_data`` (shakespeare/preprocess/gen_all_data.py) on an in-memory text."""
    raw_text = raw_text.replace("\n", " ")
    raw_text = re.sub(r"   *", r" ", raw_text)
    xs, ys = [], []
    for i in range(0, len(raw_text) - seq_length, 1):
        xs.append(raw_text[i:i + seq_length])
        ys.append(raw_text[i + seq_length])
    return xs, ys


def _ids(text: str) -> list[int]:
    return [LEAF_CHARACTERS.find(c) if c in LEAF_CHARACTERS else OOV_ID for c in text]


@pytest.mark.parametrize("stride", [1, 7, 80])
def test_shakespeare_tff_windows_match_leaf(tmp_path, stride):
    spec, _ = make_shakespeare(tmp_path / "root", leaf=False)
    with registered(spec):
        data = load_dataset("shakespeare", tmp_path / "root", source="tff", stride=stride)
    names = sorted(TFF_CLIENTS["train"])
    assert data.user_names == names
    expected_x, expected_y, expected_user, expected_test = [], [], [], []
    for is_test, split in enumerate(("train", "test")):
        for uid, name in enumerate(names):
            xs, ys = _leaf_txt_to_data("\n".join(TFF_CLIENTS[split][name]))
            expected_x += [_ids(x) for x in xs[::stride]]
            expected_y += [_ids(y)[0] for y in ys[::stride]]
            expected_user += [uid] * len(xs[::stride])
            expected_test += [bool(is_test)] * len(xs[::stride])
    assert data.x.tolist() == expected_x
    assert data.y.tolist() == expected_y
    assert data.user.tolist() == expected_user and data.is_test.tolist() == expected_test
    assert "THE_TEMPEST_GONZALO" in data.user_names  # too short to give a train sample, still a user


def test_shakespeare_options(tmp_path):
    spec, _ = make_shakespeare(tmp_path / "root")
    with registered(spec):
        with pytest.raises(ValueError, match="source"):
            load_dataset("shakespeare", tmp_path / "root", source="gutenberg")
        with pytest.raises(ValueError, match="stride"):
            load_dataset("shakespeare", tmp_path / "root", source="leaf", stride=1)
        with pytest.raises(TypeError, match="foo"):
            load_dataset("shakespeare", tmp_path / "root", foo=1)
        short = load_dataset("shakespeare", tmp_path / "root", seq_length=10, stride=10)
    assert short.input_shape == (10,)


def test_vocabulary():
    assert len(LEAF_CHARACTERS) == 80 and OOV_ID == 80
    text = "Hello, World!\n~é"
    assert encode_text(text).tolist() == _ids(text)
    assert decode_ids(encode_text("To be }")) == "To be }"


# ----------------------------------------------------------------------------------------------- digits
def test_digits_embedded():
    data = load_dataset("digits", root="/nonexistent/root")
    assert len(data) == 1797 and data.input_shape == (1, 8, 8) and data.num_classes == 10
    assert data.x.dtype == torch.float32 and float(data.x.max()) == 1.0 and float(data.x.min()) == 0.0
    assert not data.is_test.any() and data.user is None
    assert torch.bincount(data.y).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    assert verify_dataset("digits") == []
    with pytest.raises(TypeError):
        load_dataset("digits", stride=3)


# ------------------------------------------------------------------------------------------------ cache
@pytest.mark.parametrize("name,module,make", [
    ("mnist", mnist, make_mnist), ("cifar10", cifar, make_cifar10), ("femnist", femnist, make_femnist),
])
def test_second_load_uses_cache(tmp_path, monkeypatch, name, module, make):
    spec, _ = make(tmp_path / "root")
    with registered(spec):
        first = load_dataset(name, tmp_path / "root")
        monkeypatch.setattr(module, "_convert", lambda *a, **k: pytest.fail("parsed the raw files again"))
        second = load_dataset(name, tmp_path / "root")
    assert torch.equal(first.x, second.x) and torch.equal(first.y, second.y)
    assert torch.equal(first.is_test, second.is_test)
    assert list((tmp_path / "cache" / name).glob(f"{name}-*.pt"))


def test_shakespeare_cache_is_keyed_by_options_and_source(tmp_path, monkeypatch):
    spec, _ = make_shakespeare(tmp_path / "root")
    calls = []
    real_tff, real_leaf = shakespeare._convert_tff, shakespeare._convert_leaf
    monkeypatch.setattr(shakespeare, "_convert_tff", lambda *a: calls.append("tff") or real_tff(*a))
    monkeypatch.setattr(shakespeare, "_convert_leaf", lambda *a: calls.append("leaf") or real_leaf(*a))
    with registered(spec):
        for _ in range(2):
            load_dataset("shakespeare", tmp_path / "root")
            load_dataset("shakespeare", tmp_path / "root", stride=1)
            load_dataset("shakespeare", tmp_path / "root", source="leaf")
    assert calls == ["tff", "tff", "leaf"]


def test_changed_raw_file_invalidates_cache(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_mnist(root, seed=0)
    with registered(spec):
        first = load_dataset("mnist", root)
    spec2, arrays = make_mnist(root, seed=1)  # new raw files, re-pinned
    with registered(spec2):
        second = load_dataset("mnist", root)
    assert not torch.equal(first.x, second.x)
    assert second.y[:12].tolist() == arrays["train"][1].tolist()
    assert len(list((tmp_path / "cache" / "mnist").glob("mnist-*.pt"))) == 2


def test_damaged_cache_file_is_rebuilt(tmp_path):
    spec, _ = make_mnist(tmp_path / "root")
    with registered(spec):
        first = load_dataset("mnist", tmp_path / "root")
        (cached,) = (tmp_path / "cache" / "mnist").glob("mnist-*.pt")
        cached.write_bytes(b"garbage")
        with pytest.warns(RuntimeWarning, match="unreadable cache"):
            second = load_dataset("mnist", tmp_path / "root")
    assert torch.equal(first.x, second.x)


def test_read_only_root_is_never_written(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    monkeypatch.delenv("GFLKIT_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    before = _files(root)
    dirs = [p for p in [root, *root.rglob("*")] if p.is_dir()]
    for p in dirs:
        p.chmod(0o555)
    try:
        with registered(spec):
            load_dataset("mnist", root)
            load_dataset("mnist", root)
            verify_dataset("mnist", root, full=False)
    finally:
        for p in dirs:
            p.chmod(0o755)
    assert _files(root) == before
    home_cache = tmp_path / "home" / ".cache" / "gflkit" / "mnist"
    assert list(home_cache.glob("mnist-*.pt")) and (home_cache / "sha256-index.json").is_file()


def test_derived_files_go_to_the_user_cache_not_the_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    monkeypatch.delenv("GFLKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    before = _files(root)
    with registered(spec):
        load_dataset("mnist", root)
        verify_dataset("mnist", root, full=False)
    assert _files(root) == before  # no index, no processed/ folder in a writable root either
    user = tmp_path / "xdg" / "gflkit" / "mnist"
    assert list(user.glob("mnist-*.pt")) and not [p for p in user.iterdir() if p.name.endswith((".tmp", ".part"))]


def test_cache_file_with_other_contents_is_rebuilt(tmp_path):
    spec, _ = make_mnist(tmp_path / "root")
    with registered(spec):
        first = load_dataset("mnist", tmp_path / "root")
        (cached,) = (tmp_path / "cache" / "mnist").glob("mnist-*.pt")
        torch.save({"edge_index": torch.zeros(2, 1), "__gflkit_cache_key__": "another"}, cached)  # another conversion
        with pytest.warns(RuntimeWarning, match="does not hold the conversion"):
            second = load_dataset("mnist", tmp_path / "root")
        torch.save({"x": torch.zeros(1)}, cached)  # a cache file from before cache keys
        with pytest.warns(RuntimeWarning, match="written by an older gflkit"):
            load_dataset("mnist", tmp_path / "root")
        third = load_dataset("mnist", tmp_path / "root")  # the rebuilt file is trusted again, silently
    assert torch.equal(first.x, second.x) and torch.equal(first.x, third.x) and torch.equal(first.y, third.y)


def test_clean_cache_removes_only_derived_files(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    raw_before = _files(root)
    with registered(spec):
        load_dataset("mnist", root)
        folder = tmp_path / "cache" / "mnist"
        (folder / "notes.txt").write_text("a user's file")
        removed = clean_cache("mnist", root)
        assert {p.name for p in removed} >= {"sha256-index.json"} and any(p.suffix == ".pt" for p in removed)
        assert [p.name for p in folder.iterdir()] == ["notes.txt"] and _files(root) == raw_before
        assert clean_cache("mnist", root) == []


# ------------------------------------------------------------------------------------- real data (CI)
REAL_ROOT = os.environ.get("GFLKIT_DATA")  # read at import: the autouse fixture hides it from the fixture tests


def _real_root() -> Path | None:
    return Path(REAL_ROOT) if REAL_ROOT else None


def _require_real(name: str, relpath: str) -> Path:
    root = _real_root()
    if root is None:
        pytest.skip("GFLKIT_DATA is not set: real-data tests need a root holding the raw files "
                    "(CI uses ../shared/datasets)")
    if not (root / name / "raw" / relpath).is_file():
        pytest.skip(f"real {name} not found under {root}/{name}/raw (needs {relpath})")
    return root


@pytest.fixture(scope="session")
def real_cache(tmp_path_factory) -> Path:
    """One converted-tensor cache for all real-data tests of the session (each source is parsed once)."""
    return tmp_path_factory.mktemp("gflkit-real-cache")


def _load_real(real_cache: Path, name: str, **options) -> SampleDataset:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GFLKIT_CACHE", str(real_cache))
        return load_dataset(name, _real_root(), download=False, **options)


@pytest.mark.integration
def test_real_mnist(real_cache):
    root = _require_real("mnist", "train-images-idx3-ubyte.gz")
    assert all(s.state == "present" for s in verify_dataset("mnist", root))
    data = _load_real(real_cache, "mnist")
    assert len(data) == 70000 and int(data.is_test.sum()) == 10000 and data.input_shape == (1, 28, 28)
    assert torch.bincount(data.y[~data.is_test]).tolist() == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert torch.bincount(data.y[data.is_test]).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    # normalised with the training set's statistics: mean ≈ 0 and std ≈ 1 over the 60,000 training images
    train = data.x[~data.is_test]
    assert abs(float(train.mean())) < 1e-3 and abs(float(train.std()) - 1.0) < 1e-3
    assert float(data.x.min()) == pytest.approx(-0.1307 / 0.3081) and float(data.x.max()) == pytest.approx(0.8693 / 0.3081)


@pytest.mark.integration
def test_real_femnist(real_cache):
    root = _require_real("femnist", "train/all_data_0_niid_05_keep_0_train_9.json.gz")
    assert all(s.state == "present" for s in verify_dataset("femnist", root))
    data = _load_real(real_cache, "femnist")
    assert len(data.user_names) == 105 and int((~data.is_test).sum()) == 14708 and int(data.is_test.sum()) == 1685
    assert torch.unique(data.y).numel() == 62 and data.num_classes == 62
    assert data.user_names[0] == "f3313_11"
    first = data.user == 0
    assert int((first & ~data.is_test).sum()) == 155 and int((first & data.is_test).sum()) == 18
    assert float(data.x.max()) == 1.0 and float(data.x.mean()) > 0.5  # white background


@pytest.mark.integration
def test_real_shakespeare(real_cache):
    root = _require_real("shakespeare", "tff/shakespeare_train.h5")
    assert all(s.state == "present" for s in verify_dataset("shakespeare", root, group="tff"))
    data = _load_real(real_cache, "shakespeare", source="tff")
    assert len(data.user_names) == 715 and data.user_names[0] == "ALL_S_WELL_THAT_ENDS_WELL_ADAM"
    assert data.input_shape == (80,) and data.num_classes == 81
    assert len(data) > 30000 and data.is_test.any() and int(data.user.max()) < 715
    if (root / "shakespeare" / "raw" / "leaf" / "train").is_dir():
        leaf = _load_real(real_cache, "shakespeare", source="leaf")
        assert len(leaf.user_names) == 10 and int((~leaf.is_test).sum()) == 41990
        assert leaf.input_shape == (80,)
