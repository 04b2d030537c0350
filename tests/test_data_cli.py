"""``gflkit data list | verify | fetch`` on fixture roots and (``integration``) on the real data root."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from pathlib import Path

import pytest

from data_fixtures import corrupt_one_byte, make_femnist, make_mnist
from gflkit.data import registered
from gflkit.data.cli import add_data_commands

REAL_ROOT = os.environ.get("GFLKIT_DATA")


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # `data clean` also cleans the per-user cache
    monkeypatch.setenv("GFLKIT_OFFLINE", "1")
    monkeypatch.delenv("GFLKIT_DATA", raising=False)


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="gflkit")
    add_data_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["data", *argv])
    return args.func(args)


@pytest.fixture
def fixture_root(tmp_path):
    """A root with fixture MNIST and FEMNIST registered under their real names."""
    root = tmp_path / "root"
    mnist_spec, _ = make_mnist(root)
    femnist_spec, _ = make_femnist(root)
    with contextlib.ExitStack() as stack:
        stack.enter_context(registered(mnist_spec))
        stack.enter_context(registered(femnist_spec))
        yield root


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(name + " "))


def test_list(fixture_root, capsys):
    (fixture_root / "femnist" / "raw" / "test" / "all_data_1_niid_05_keep_0_test_9.json.gz").unlink()
    assert run("list", "--root", str(fixture_root)) == 0
    out = capsys.readouterr().out
    assert str(fixture_root) in out
    assert _row(out, "mnist").split()[1:3] == ["present", "4/4"]
    cifar = _row(out, "cifar10")
    assert cifar.split()[1:3] == ["missing", "0/1"] and "cifar-10-python.tar.gz" in cifar and "fetch cifar10" in cifar
    femnist = _row(out, "femnist")
    assert femnist.split()[1:3] == ["missing", "3/4"] and "all_data_1_niid_05_keep_0_test_9.json.gz" in femnist
    assert "not downloadable" in femnist
    assert _row(out, "digits").split()[1] == "embedded"


def test_list_shows_checksum_bad(fixture_root, capsys):
    corrupt_one_byte(fixture_root / "mnist" / "raw" / "train-labels-idx1-ubyte.gz")
    assert run("list", "--root", str(fixture_root)) == 0
    row = _row(capsys.readouterr().out, "mnist")
    assert row.split()[1:3] == ["checksum-bad", "3/4"] and "train-labels-idx1-ubyte.gz" in row


def test_verify_exit_codes(fixture_root, capsys):
    assert run("verify", "mnist", "--root", str(fixture_root)) == 0
    assert run("verify", "--root", str(fixture_root)) == 0  # nothing bad; absent datasets only reported
    out = capsys.readouterr().out
    assert "cifar10: missing" in out and "mnist: present (4/4 files ok)" in out
    assert run("verify", "mnist", "cifar10", "--root", str(fixture_root)) == 1  # a named dataset is missing
    assert run("verify", "nonsense", "--root", str(fixture_root)) == 2
    assert "known datasets" in capsys.readouterr().err


def test_verify_detects_corruption(fixture_root, capsys):
    assert run("list", "--root", str(fixture_root)) == 0  # fills the hash cache
    target = fixture_root / "mnist" / "raw" / "t10k-images-idx3-ubyte.gz"
    corrupt_one_byte(target)
    capsys.readouterr()
    assert run("verify", "--root", str(fixture_root)) == 1
    assert run("verify", "mnist", "--root", str(fixture_root)) == 1
    out = capsys.readouterr().out
    assert "mnist: checksum-bad" in out and "BAD      t10k-images-idx3-ubyte.gz" in out
    assert run("verify", "femnist", "--root", str(fixture_root)) == 0


def test_fetch(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GFLKIT_OFFLINE", "0")
    server = tmp_path / "server"
    spec, _ = make_mnist(server)
    base = (server / "mnist" / "raw").as_uri() + "/"
    served = dataclasses.replace(spec, files=tuple(dataclasses.replace(f, urls=(base + f.path,)) for f in spec.files))
    root = tmp_path / "root"
    with registered(served):
        assert run("fetch", "mnist", "--root", str(root), "-q") == 0
        assert "mnist: present (4/4 files ok)" in capsys.readouterr().out
        assert run("verify", "mnist", "--root", str(root)) == 0
        assert run("fetch", "femnist", "--root", str(root), "-q") == 1  # LEAF json has no URL
        out = capsys.readouterr().out
        assert "MISSING" in out and "preprocess.sh" in out
        assert run("fetch", "digits", "--root", str(root)) == 0
    assert sorted(p.name for p in (root / "mnist" / "raw").iterdir()) == sorted(f.path for f in spec.files)


def test_fetch_failure_is_reported(tmp_path, capsys):
    assert run("fetch", "cifar10", "--root", str(tmp_path / "root"), "-q") == 1  # GFLKIT_OFFLINE=1
    assert "cifar10: fetch failed" in capsys.readouterr().err
    assert not list((tmp_path / "root").rglob("*.tar.gz"))


@pytest.mark.integration
def test_list_and_verify_real_root(capsys):
    if not REAL_ROOT or not (Path(REAL_ROOT) / "mnist" / "raw" / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("real MNIST not found: set GFLKIT_DATA to a root holding mnist/raw/*.gz (CI: ../shared/datasets)")
    assert run("list", "--root", REAL_ROOT) == 0
    out = capsys.readouterr().out
    assert _row(out, "mnist").split()[1:3] == ["present", "4/4"]
    cifar = _row(out, "cifar10")
    if not (Path(REAL_ROOT) / "cifar10" / "raw" / "cifar-10-python.tar.gz").exists():
        assert cifar.split()[1:3] == ["missing", "0/1"] and "missing: cifar-10-python.tar.gz" in cifar
    assert run("verify", "mnist", "--root", REAL_ROOT) == 0


@pytest.mark.parametrize("command", ["list", "verify"])
@pytest.mark.parametrize("kind", ["absent", "file"])
def test_a_root_that_is_not_a_folder_is_an_error_not_a_list_of_missing_datasets(command, kind, tmp_path, capsys):
    root = tmp_path / "nowhere"
    if kind == "file":
        root.write_text("not a folder")
    assert run(command, "--root", str(root)) == 2
    captured = capsys.readouterr()
    assert f"the data root {root} {'is a file' if kind == 'file' else 'does not exist'}" in captured.err
    assert "missing" not in captured.out


def test_clean_removes_caches_and_keeps_raw_files(fixture_root, tmp_path, capsys):
    from gflkit.data import load_dataset

    raw_before = sorted(p for p in fixture_root.rglob("*"))
    load_dataset("mnist", fixture_root)
    cached = sorted((tmp_path / "cache" / "mnist").iterdir())
    assert any(p.name.startswith("mnist-") and p.suffix == ".pt" for p in cached)
    assert run("clean", "mnist", "--root", str(fixture_root)) == 0
    out = capsys.readouterr().out
    assert f"mnist: removed {len(cached)} cached file(s)" in out and "raw files are untouched" in out
    assert not (tmp_path / "cache" / "mnist").exists() and sorted(p for p in fixture_root.rglob("*")) == raw_before
    assert run("clean", "nonsense") == 2 and "unknown dataset 'nonsense'" in capsys.readouterr().err
