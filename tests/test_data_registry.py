"""Registry: data root / cache dir, pinned hashes, verification, errors, downloads (file:// and http)."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import os
import re
import socket
import tarfile
import threading
from pathlib import Path

import pytest

import gflkit.data.download as download
import gflkit.data.integrity as integrity
from gflkit.atomic import atomic_write
from gflkit.data.cache import user_cache_root
from data_fixtures import (
    SHAKESPEARE_TFF_FILES,
    TFF_CLIENTS,
    corrupt_one_byte,
    make_femnist,
    make_mnist,
    spec_for,
    write_tff_h5,
)
from gflkit.data import (
    ChecksumError,
    DatasetNotFoundError,
    DownloadError,
    UnknownDatasetError,
    cache_dir,
    data_root,
    dataset_names,
    fetch_dataset,
    get_spec,
    load_dataset,
    registered,
    sha256_file,
    verify_dataset,
)

SHARED = Path(os.environ.get("GFLKIT_DATA") or "/nonexistent")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own cache folder and never touches the network."""
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("GFLKIT_OFFLINE", "0")
    monkeypatch.delenv("GFLKIT_DATA", raising=False)


def _tree(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*")}


# ------------------------------------------------------------------------------------------ root, cache
def test_data_root_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("GFLKIT_DATA", raising=False)
    checkout = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(tmp_path)  # papermill runs notebooks inside notebooks/: the default must not follow the cwd
    assert data_root() == checkout / "data"
    monkeypatch.chdir(checkout / "notebooks")
    assert data_root() == checkout / "data"
    monkeypatch.setenv("GFLKIT_DATA", str(tmp_path / "env"))
    assert data_root() == tmp_path / "env"
    assert data_root(tmp_path / "arg") == tmp_path / "arg"
    assert data_root("~/x") == Path.home() / "x"


def test_cache_dir_precedence(tmp_path, monkeypatch):
    assert cache_dir("mnist", tmp_path / "root") == tmp_path / "cache" / "mnist"
    monkeypatch.delenv("GFLKIT_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "root"
    (root / "mnist" / "raw").mkdir(parents=True)
    assert cache_dir("mnist", root) == tmp_path / "xdg" / "gflkit" / "mnist"  # the per-user cache first
    (tmp_path / "xdg").mkdir()
    (tmp_path / "xdg").chmod(0o555)
    try:  # no writable per-user cache: beside the raw files, in the dataset's own folder
        assert cache_dir("mnist", root) == root / "mnist" / "processed"
        assert cache_dir("cora", root) == root / "planetoid" / "Cora" / "processed"  # never a new top-level cora/
        (root / "mnist" / "raw").chmod(0o555)
        (root / "mnist").chmod(0o555)
        root.chmod(0o555)
        assert cache_dir("mnist", root) == tmp_path / "xdg" / "gflkit" / "mnist"  # nothing writable: not cached
    finally:
        for path in (tmp_path / "xdg", root, root / "mnist", root / "mnist" / "raw"):
            path.chmod(0o755)
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_root() == tmp_path / "home" / ".cache" / "gflkit"


def test_atomic_write_leaves_nothing_on_error(tmp_path):
    target = tmp_path / "out" / "file.bin"
    with pytest.raises(RuntimeError):
        with atomic_write(target) as handle:
            handle.write(b"partial")
            raise RuntimeError("boom")
    assert list(target.parent.iterdir()) == []
    with atomic_write(target) as handle:
        handle.write(b"whole")
    assert target.read_bytes() == b"whole" and [p.name for p in target.parent.iterdir()] == ["file.bin"]


# -------------------------------------------------------------------------------------------- registry
def test_registered_names_and_unknown_name():
    assert {"mnist", "cifar10", "cifar100", "femnist", "shakespeare", "digits"} <= set(dataset_names())
    with pytest.raises(UnknownDatasetError) as info:
        get_spec("mnits")
    assert isinstance(info.value, KeyError) and isinstance(info.value, ValueError)
    message = str(info.value)
    assert "mnits" in message and all(n in message for n in ("mnist", "cifar10", "femnist", "shakespeare", "digits"))
    with pytest.raises(UnknownDatasetError):
        load_dataset("nope")


def test_production_pins_match_provenance():
    mnist = {f.path: f.sha256 for f in get_spec("mnist").files}
    assert mnist == {
        "train-images-idx3-ubyte.gz": "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
        "train-labels-idx1-ubyte.gz": "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
        "t10k-images-idx3-ubyte.gz": "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
        "t10k-labels-idx1-ubyte.gz": "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
    }
    assert get_spec("cifar10").files[0].sha256 == "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"
    assert get_spec("cifar100").files[0].sha256 == "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7"
    assert get_spec("cifar10").files[0].urls == ("https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",)
    femnist = get_spec("femnist").files
    assert len(femnist) == 40 and all(not f.urls for f in femnist)
    assert sum(f.path.startswith("train/") for f in femnist) == 20
    shakespeare = get_spec("shakespeare")
    assert shakespeare.groups == ("tff", "leaf")
    assert [f.member for f in shakespeare.files_in("tff")] == ["shakespeare_train.h5", "shakespeare_test.h5"]
    assert all(u.endswith("shakespeare.tar.bz2") for f in shakespeare.files_in("tff") for u in f.urls)
    assert get_spec("digits").embedded and get_spec("digits").files == ()
    digits = {"sha256": 64, "git blob": 40}
    for spec in map(get_spec, dataset_names()):
        assert all(re.fullmatch(f"[0-9a-f]{{{digits[f.pin[0]]}}}", f.pin[1]) for f in spec.files)


@pytest.mark.parametrize("name", ["mnist", "femnist", "shakespeare"])
def test_every_pinned_file_is_listed_in_provenance(name):
    provenance = SHARED / name / "PROVENANCE.md"
    if not provenance.is_file():
        pytest.skip(f"{provenance} not available (set GFLKIT_DATA to the shared datasets folder)")
    text = provenance.read_text()
    for raw in get_spec(name).files:
        row = next((line for line in text.splitlines() if f"raw/{raw.path} |" in line), None)
        assert row is not None, f"{raw.path} not in {provenance}"
        assert raw.sha256 in row and f"| {raw.size} |" in row


def test_sha256_file_matches_hashlib(tmp_path):
    data = os.urandom(3 * (1 << 20) + 17)
    (tmp_path / "f").write_bytes(data)
    assert sha256_file(tmp_path / "f", chunk_size=4096) == hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------- verification
def test_verify_present_then_one_byte_corruption(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    with registered(spec):
        assert [s.state for s in verify_dataset("mnist", root)] == ["present"] * 4
        load_dataset("mnist", root, download=False)  # caches the conversion and the hash index
        target = root / "mnist" / "raw" / "train-images-idx3-ubyte.gz"
        expected = sha256_file(target)
        corrupt_one_byte(target)
        statuses = {s.relpath: s for s in verify_dataset("mnist", root)}
        bad = statuses["train-images-idx3-ubyte.gz"]
        assert bad.state == "checksum-bad" and bad.expected_sha256 == expected
        assert bad.actual_sha256 == sha256_file(target) != expected
        assert all(s.state == "present" for r, s in statuses.items() if r != bad.relpath)
        with pytest.raises(ChecksumError) as info:
            load_dataset("mnist", root, download=False)
        message = str(info.value)
        assert "train-images-idx3-ubyte.gz" in message and expected in message and bad.actual_sha256 in message


def test_production_pins_reject_fixture_files(tmp_path):
    """Without a fixture spec the real pins apply: fixture files are not the real MNIST."""
    root = tmp_path / "root"
    make_mnist(root)
    with pytest.raises(ChecksumError):
        load_dataset("mnist", root, download=False)
    assert {s.state for s in verify_dataset("mnist", root)} == {"checksum-bad"}


def test_verify_full_always_hashes_and_quick_uses_index(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    calls = []
    real = integrity.sha256_file
    monkeypatch.setattr(integrity, "sha256_file", lambda p, *a, **k: calls.append(p) or real(p, *a, **k))
    with registered(spec):
        verify_dataset("mnist", root, full=False)
        assert len(calls) == 4
        verify_dataset("mnist", root, full=False)
        assert len(calls) == 4  # unchanged files: the cached hashes are used
        verify_dataset("mnist", root, full=True)
        assert len(calls) == 8  # verify always hashes every file
        corrupt_one_byte(root / "mnist" / "raw" / "t10k-labels-idx1-ubyte.gz", offset=20)
        states = {s.relpath: s.state for s in verify_dataset("mnist", root, full=False)}
        assert states["t10k-labels-idx1-ubyte.gz"] == "checksum-bad"


def test_missing_file_offline_raises_one_actionable_error(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    (root / "mnist" / "raw" / "t10k-labels-idx1-ubyte.gz").unlink()
    with registered(spec):
        assert [s.state for s in verify_dataset("mnist", root)].count("missing") == 1
        with pytest.raises(DatasetNotFoundError) as info:
            load_dataset("mnist", root, download=False)
    assert isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    for needle in ("mnist", "t10k-labels-idx1-ubyte.gz", str(root), "GFLKIT_DATA", "root=",
                   "gflkit data fetch mnist", "yann.lecun.com"):
        assert needle in message, needle


def test_missing_file_network_unreachable(tmp_path):
    """download=True but the source does not answer: still one DatasetNotFoundError naming the cause."""
    with socket.socket() as s:  # a local port nobody listens on: connection refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    (root / "mnist" / "raw" / "train-labels-idx1-ubyte.gz").unlink()
    files = tuple(dataclasses.replace(f, urls=(f"http://127.0.0.1:{port}/{f.path}",)) for f in spec.files)
    with registered(dataclasses.replace(spec, files=files)):
        with pytest.raises(DatasetNotFoundError) as info:
            load_dataset("mnist", root, download=True)
    message = str(info.value)
    assert "train-labels-idx1-ubyte.gz" in message and str(root) in message and "Download attempt" in message
    assert sorted(_tree(root / "mnist" / "raw")) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz",
                                                     "train-images-idx3-ubyte.gz"]


def test_offline_switch_prevents_network(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    (root / "mnist" / "raw" / "train-labels-idx1-ubyte.gz").unlink()
    monkeypatch.setenv("GFLKIT_OFFLINE", "1")
    monkeypatch.setattr(download.urllib.request, "urlopen", lambda *a, **k: pytest.fail("network used"))
    with registered(spec), pytest.raises(DatasetNotFoundError, match="GFLKIT_OFFLINE"):
        load_dataset("mnist", root)


def test_leaf_missing_says_how_to_produce_files(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        load_dataset("femnist", tmp_path / "empty")
    message = str(info.value)
    assert "femnist" in message and "all_data_0_niid_05_keep_0_train_9.json.gz" in message
    assert str(tmp_path / "empty") in message and "preprocess.sh" in message and "TalwalkarLab/leaf" in message
    assert "gflkit data fetch" not in message  # nothing to fetch for LEAF json
    assert not (tmp_path / "empty").exists()


# -------------------------------------------------------------------------------------------- download
def _serve_from(src_root: Path, spec, base_url: str):
    """A copy of ``spec`` whose files are downloaded from ``base_url`` + path."""
    return dataclasses.replace(spec, files=tuple(dataclasses.replace(f, urls=(base_url + f.path,)) for f in spec.files))


def test_download_file_url_then_load(tmp_path):
    server = tmp_path / "server"
    spec, arrays = make_mnist(server)
    root = tmp_path / "root"
    with registered(_serve_from(server, spec, (server / "mnist" / "raw").as_uri() + "/")):
        data = load_dataset("mnist", root, download=True)
    assert len(data) == 18
    assert sorted(_tree(root / "mnist" / "raw")) == sorted(f.path for f in spec.files)
    for f in spec.files:
        assert sha256_file(root / "mnist" / "raw" / f.path) == f.sha256


def test_download_over_http(tmp_path):
    server_dir = tmp_path / "server"
    spec, _ = make_mnist(server_dir)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(server_dir / "mnist" / "raw"))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        root = tmp_path / "root"
        with registered(_serve_from(server_dir, spec, f"http://127.0.0.1:{httpd.server_address[1]}/")):
            statuses = fetch_dataset("mnist", root, timeout=10, progress=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert [s.state for s in statuses] == ["present"] * 4


def test_download_with_wrong_hash_is_rejected_and_nothing_is_left(tmp_path):
    server = tmp_path / "server"
    spec, _ = make_mnist(server)
    served = _serve_from(server, spec, (server / "mnist" / "raw").as_uri() + "/")
    wrong = dataclasses.replace(served, files=(dataclasses.replace(served.files[0], sha256="0" * 64),)
                                + served.files[1:])
    root = tmp_path / "root"
    with registered(wrong):
        with pytest.raises(ChecksumError) as info:
            fetch_dataset("mnist", root, progress=False)
        assert "0" * 64 in str(info.value) and spec.files[0].sha256 in str(info.value)
        assert not (root / "mnist" / "raw" / "train-images-idx3-ubyte.gz").exists()
        assert all(not p.name.endswith(".part") for p in (root / "mnist" / "raw").rglob("*"))
        with pytest.raises(ChecksumError):
            load_dataset("mnist", root, download=True)
        assert not (root / "mnist" / "raw" / "train-images-idx3-ubyte.gz").exists()


def _tff_archive(tmp_path: Path, mode: str = "w:bz2", prefix: str = "") -> Path:
    src = tmp_path / "tffsrc"
    for split, rel in zip(("train", "test"), SHAKESPEARE_TFF_FILES):
        write_tff_h5(src / Path(rel).name, TFF_CLIENTS[split])
    archive = tmp_path / "dl" / "shakespeare.tar.bz2"
    archive.parent.mkdir(parents=True)
    with tarfile.open(archive, mode) as tar:
        for rel in SHAKESPEARE_TFF_FILES:
            tar.add(src / Path(rel).name, arcname=prefix + Path(rel).name)
    return src


def _tff_spec(src: Path, archive_uri: str):
    production = get_spec("shakespeare")
    files = tuple(dataclasses.replace(f, sha256=sha256_file(src / Path(f.path).name),
                                      size=(src / Path(f.path).name).stat().st_size, urls=(archive_uri,))
                  for f in production.files_in("tff"))
    return dataclasses.replace(production, files=files)


@pytest.mark.parametrize("prefix", ["", "shakespeare/"])
def test_download_archive_and_extract_members(tmp_path, prefix):
    src = _tff_archive(tmp_path, prefix=prefix)
    spec = _tff_spec(src, (tmp_path / "dl" / "shakespeare.tar.bz2").as_uri())
    root = tmp_path / "root"
    with registered(spec):
        statuses = fetch_dataset("shakespeare", root, progress=False)
        assert [s.state for s in statuses] == ["present", "present"]
        data = load_dataset("shakespeare", root, source="tff")
    assert sorted(_tree(root / "shakespeare" / "raw")) == sorted(["tff", *SHAKESPEARE_TFF_FILES])
    assert data.user_names == sorted(TFF_CLIENTS["train"])  # HDF5 lists groups by name


def test_archive_member_with_wrong_hash_leaves_nothing(tmp_path):
    src = _tff_archive(tmp_path)
    spec = _tff_spec(src, (tmp_path / "dl" / "shakespeare.tar.bz2").as_uri())
    bad = dataclasses.replace(spec, files=(spec.files[0], dataclasses.replace(spec.files[1], sha256="ab" * 32)))
    root = tmp_path / "root"
    with registered(bad):
        with pytest.raises(ChecksumError, match="shakespeare_test.h5"):
            fetch_dataset("shakespeare", root, progress=False)
    raw = root / "shakespeare" / "raw"
    assert not raw.exists() or [p for p in raw.rglob("*") if p.is_file()] == []


def test_archive_without_member_and_pinned_archive_hash(tmp_path):
    src = _tff_archive(tmp_path)
    uri = (tmp_path / "dl" / "shakespeare.tar.bz2").as_uri()
    spec = _tff_spec(src, uri)
    missing_member = dataclasses.replace(spec, files=tuple(dataclasses.replace(f, member="nope.h5") for f in spec.files))
    with registered(missing_member), pytest.raises(DownloadError, match="nope.h5"):
        fetch_dataset("shakespeare", tmp_path / "r1", progress=False)
    wrong_archive = dataclasses.replace(spec, files=tuple(dataclasses.replace(f, archive_sha256="1" * 64)
                                                          for f in spec.files))
    with registered(wrong_archive), pytest.raises(ChecksumError, match="1" * 64):
        fetch_dataset("shakespeare", tmp_path / "r2", progress=False)
    for root in (tmp_path / "r1", tmp_path / "r2"):
        assert [p for p in root.rglob("*") if p.is_file()] == []


def test_no_download_into_read_only_root(tmp_path):
    server = tmp_path / "server"
    spec, _ = make_mnist(server)
    root = tmp_path / "ro"
    (root / "mnist" / "raw").mkdir(parents=True)
    for p in (root / "mnist" / "raw", root / "mnist", root):
        p.chmod(0o555)
    try:
        with registered(_serve_from(server, spec, (server / "mnist" / "raw").as_uri() + "/")):
            with pytest.raises(DownloadError, match="read-only"):
                fetch_dataset("mnist", root, progress=False)
            with pytest.raises(DatasetNotFoundError, match="read-only"):
                load_dataset("mnist", root)
        assert _tree(root) == {"mnist", "mnist/raw"}
    finally:
        for p in (root, root / "mnist", root / "mnist" / "raw"):
            p.chmod(0o755)


def test_fetch_leaf_dataset_keeps_missing_files_missing(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_femnist(root)
    (root / "femnist" / "raw" / spec.files[0].path).unlink()
    with registered(spec):
        statuses = fetch_dataset("femnist", root, progress=False)
    assert [s.state for s in statuses] == ["missing", "present", "present", "present"]


def test_spec_for_helper_repins_only_the_fixture(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_mnist(root)
    assert spec.loader is get_spec("mnist").loader and spec.files[0].urls == get_spec("mnist").files[0].urls
    assert spec.files[0].sha256 != get_spec("mnist").files[0].sha256
    assert spec_for("mnist", root) == spec
