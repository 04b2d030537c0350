"""Graph dataset loaders (Planetoid, CoraFull, Flickr, PolBlogs) on canonical-format fixtures, their
checksum / missing-file errors, the CLI rows and (``integration``) the real files under ``GFLKIT_DATA``."""
from __future__ import annotations

import argparse
import dataclasses
import os
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch_geometric.io.planetoid as pyg_planetoid
from torch_geometric.data import Data

import gflkit.data.loaders.planetoid as planetoid
from data_fixtures import corrupt_one_byte
from gflkit.data import (
    ChecksumError,
    DatasetNotFoundError,
    dataset_names,
    get_spec,
    load_dataset,
    load_graph,
    registered,
    verify_dataset,
)
from gflkit.data.cli import add_data_commands
from gflkit.data.loaders.flickr import flickr_spec
from graph_fixtures import write_cora_full, write_flickr, write_planetoid

REAL_ROOT = os.environ.get("GFLKIT_DATA")  # read at import: the autouse fixture hides it from the fixture tests


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GFLKIT_OFFLINE", "1")
    monkeypatch.delenv("GFLKIT_DATA", raising=False)


def assert_canonical(data: Data) -> None:
    """edge_index is symmetric, sorted, without self-loops or duplicates."""
    row, col = data.edge_index
    assert data.edge_index.dtype == torch.long and (row != col).all()
    keys = row * data.num_nodes + col
    assert (keys[1:] > keys[:-1]).all()  # sorted and unique
    assert set(zip(row.tolist(), col.tolist())) == set(zip(col.tolist(), row.tolist()))


def pairs(data: Data) -> set[tuple[int, int]]:
    row, col = data.edge_index
    return {(i, j) for i, j in zip(row.tolist(), col.tolist()) if i < j}


# -------------------------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("name", ["cora", "citeseer", "pubmed"])
def test_planetoid_fixture(tmp_path, name):
    spec, truth = write_planetoid(tmp_path / "root", name)
    with registered(spec):
        data = load_graph(name, tmp_path / "root")
    assert isinstance(data, Data) and data.name == name and data.num_nodes == 516 and data.num_classes == 3
    assert data.x.dtype == torch.float32 and torch.equal(data.x, torch.from_numpy(truth["x"]))
    assert data.y.tolist() == truth["y"].tolist()  # test rows are back at their test.index positions
    assert_canonical(data)
    assert pairs(data) == truth["edges"]
    assert data.train_mask.sum() == 4 and data.val_mask.sum() == 500
    assert sorted(data.test_mask.nonzero().flatten().tolist()) == sorted(truth["test_index"].tolist())
    assert (tmp_path / "root" / "planetoid" / spec.folder.split("/")[1] / "raw" / f"ind.{name}.graph").is_file()


def test_normalize_features_divides_each_row_by_its_sum(tmp_path):
    spec, truth = write_planetoid(tmp_path / "root", "cora")
    with registered(spec):
        raw = load_graph("cora", tmp_path / "root")
        normalised = load_graph("cora", tmp_path / "root", normalize_features=True)
        with pytest.raises(ValueError, match="normalize_features must be True or False"):
            load_graph("cora", tmp_path / "root", normalize_features="yes")
    x = torch.from_numpy(truth["x"])
    sums = x.sum(1, keepdim=True)
    expected = torch.where(sums > 0, x / sums.clamp(min=1), x)
    assert torch.allclose(normalised.x, expected) and torch.equal(raw.x, x), "the raw graph is left as it was"
    assert torch.equal(normalised.edge_index, raw.edge_index) and torch.equal(normalised.y, raw.y)


def test_cora_full_fixture_binarises_attributes(tmp_path):
    spec, truth = write_cora_full(tmp_path / "root")
    with registered(spec):
        data = load_graph("cora_full", tmp_path / "root")
    assert torch.equal(data.x, torch.from_numpy((truth["x"] > 0).astype(np.float32)))
    assert data.y.tolist() == truth["y"].tolist() and data.num_classes == 4
    assert_canonical(data)
    assert pairs(data) == truth["edges"]
    assert "train_mask" not in data


def test_flickr_fixture_with_pinned_spec(tmp_path):
    spec, truth = write_flickr(tmp_path / "root")
    assert "flickr" not in dataset_names()  # no published sha256: registered only once pinned
    with registered(spec):
        data = load_graph("flickr", tmp_path / "root")
        assert "flickr" in dataset_names()
    assert torch.allclose(data.x, torch.from_numpy(truth["x"]).float())
    assert data.y.tolist() == truth["y"].tolist() and data.num_classes == 7
    assert_canonical(data)
    assert pairs(data) == truth["edges"]
    for mask, key in (("train_mask", "tr"), ("val_mask", "va"), ("test_mask", "te")):
        assert data[mask].nonzero().flatten().tolist() == truth["role"][key]


def test_flickr_spec_rejects_bad_pins():
    with pytest.raises(ValueError, match="feats.npy"):
        flickr_spec({"adj_full.npz": "a" * 64, "class_map.json": "b" * 64, "role.json": "c" * 64})
    with pytest.raises(ValueError, match="role.json"):
        flickr_spec({"adj_full.npz": "a" * 64, "feats.npy": "b" * 64, "class_map.json": "c" * 64, "role.json": "XYZ"})


def test_second_load_uses_cache_and_root_stays_untouched(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = write_planetoid(root)
    before = sorted(root.rglob("*"))
    with registered(spec):
        first = load_graph("cora", root)
        monkeypatch.setattr(planetoid, "_convert", lambda *a: pytest.fail("parsed the raw files again"))
        second = load_graph("cora", root)
    assert torch.equal(first.x, second.x) and torch.equal(first.edge_index, second.edge_index)
    assert sorted(root.rglob("*")) == before
    assert list((tmp_path / "cache" / "cora").glob("cora-*.pt"))


def test_corrupted_pickle_is_never_unpickled(tmp_path, monkeypatch):
    root = tmp_path / "root"
    spec, _ = write_planetoid(root)
    target = spec.raw_dir(root) / "ind.cora.graph"
    corrupt_one_byte(target)
    monkeypatch.setattr(pyg_planetoid.pickle, "load", lambda *a, **k: pytest.fail("unpickled an unverified file"))
    with registered(spec), pytest.raises(ChecksumError) as info:
        load_graph("cora", root)
    assert "ind.cora.graph" in str(info.value) and spec.files[6].sha256 in str(info.value)
    with registered(spec):
        states = {s.relpath: s.state for s in verify_dataset("cora", root)}
    assert states["ind.cora.graph"] == "checksum-bad" and list(states.values()).count("present") == 7


def test_missing_file_offline_names_dataset_file_root_and_fix(tmp_path):
    root = tmp_path / "root"
    spec, _ = write_planetoid(root, "pubmed")
    (spec.raw_dir(root) / "ind.pubmed.allx").unlink()
    with registered(spec), pytest.raises(DatasetNotFoundError) as info:
        load_graph("pubmed", root)
    message = str(info.value)
    for part in ("dataset 'pubmed'", "'ind.pubmed.allx'", str(root), "planetoid/PubMed/raw/ind.pubmed.allx",
                 "GFLKIT_DATA", "gflkit data fetch pubmed", "GFLKIT_OFFLINE"):
        assert part in message


def test_download_is_verified(tmp_path, monkeypatch):
    monkeypatch.setenv("GFLKIT_OFFLINE", "0")
    spec, truth = write_cora_full(tmp_path / "server")
    url = (spec.raw_dir(tmp_path / "server") / "cora.npz").as_uri()
    served = dataclasses.replace(spec, files=(dataclasses.replace(spec.files[0], urls=(url,)),))
    with registered(served):
        data = load_graph("cora_full", tmp_path / "root")
    assert data.num_nodes == len(truth["y"]) and (tmp_path / "root" / "cora_full" / "raw" / "cora.npz").is_file()
    corrupt_one_byte(spec.raw_dir(tmp_path / "server") / "cora.npz")
    with registered(served), pytest.raises(ChecksumError, match="nothing was kept"):
        load_graph("cora_full", tmp_path / "other")
    assert not list((tmp_path / "other").rglob("*.npz"))


def test_kinds_and_options_are_checked(tmp_path):
    with pytest.raises(ValueError, match=r"graph dataset: load it with load_graph\('cora'\)"):
        load_dataset("cora", tmp_path)
    with pytest.raises(ValueError, match=r"load_dataset\('mnist'\).*graph datasets are: .*cora"):
        load_graph("mnist", tmp_path)
    with pytest.raises(ValueError, match="unknown dataset 'corra'"):
        load_graph("corra", tmp_path)
    spec, _ = write_planetoid(tmp_path / "root")
    with registered(spec), pytest.raises(TypeError, match="largest_component"):
        load_graph("cora", tmp_path / "root", largest_component=True)


def test_production_specs():
    for name in ("cora", "citeseer", "pubmed"):
        spec = get_spec(name)
        assert spec.kind == "graph" and [f.path for f in spec.files] == [
            f"ind.{name}.{s}" for s in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]
        assert all(len(f.urls) == 2 and f.urls[0].endswith("/data/" + f.path) for f in spec.files)
    assert get_spec("cora").folder == "planetoid/Cora" and get_spec("citeseer").folder == "planetoid/CiteSeer"
    assert [f.path for f in get_spec("cora_full").files] == ["cora.npz"]
    assert get_spec("polblogs").groups == ("default", "gml")


@pytest.mark.parametrize("name", ["planetoid", "polblogs"])
def test_production_pins_match_provenance(name):
    provenance = Path(REAL_ROOT or "/nonexistent") / name / "PROVENANCE.md"
    if not provenance.is_file():
        pytest.skip(f"{provenance} not available (set GFLKIT_DATA to the shared datasets folder)")
    text = provenance.read_text()
    specs = [get_spec(n) for n in (("cora", "citeseer", "pubmed") if name == "planetoid" else ("polblogs",))]
    for spec in specs:
        for raw in spec.files:
            relpath = f"{spec.folder.split('/', 1)[1]}/raw/{raw.path}" if spec.folder else f"raw/{raw.path}"
            row = next((line for line in text.splitlines() if line.startswith(f"| {relpath} |")), None)
            if row is None:  # PubMed's allx is only described in prose (missing from the copy)
                assert raw.path == "ind.pubmed.allx" and raw.sha256 in text and "7,578,385" in text
                continue
            assert raw.sha256 in row and f"| {raw.size} |" in row


def run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="gflkit")
    add_data_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["data", *argv])
    return args.func(args)


def test_cli_lists_and_verifies_graph_datasets(tmp_path, capsys):
    root = tmp_path / "root"
    spec, _ = write_planetoid(root)
    with registered(spec):
        assert run_cli("list", "--root", str(root)) == 0
        out = capsys.readouterr().out
        rows = {line.split()[0]: line for line in out.splitlines()[2:]}
        assert rows["cora"].split()[1:3] == ["present", "8/8"]
        assert rows["pubmed"].split()[1:3] == ["missing", "0/8"] and "fetch pubmed" in rows["pubmed"]
        assert rows["cora_full"].split()[1:3] == ["missing", "0/1"]
        assert rows["polblogs"].split()[1:3] == ["missing", "0/2"]
        assert run_cli("verify", "cora", "--root", str(root)) == 0
        assert "cora: present (8/8 files ok)" in capsys.readouterr().out
        assert run_cli("verify", "citeseer", "--root", str(root)) == 1
        assert "MISSING  ind.citeseer.x" in capsys.readouterr().out


# ------------------------------------------------------------------------------------- real data (CI)
def _real(relpath: str) -> Path:
    if not REAL_ROOT:
        pytest.skip("GFLKIT_DATA is not set: real-data tests need the shared datasets folder")
    root = Path(REAL_ROOT)
    if not (root / relpath).is_file():
        pytest.skip(f"{root / relpath} not found")
    return root


@pytest.fixture(scope="module")
def real_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gflkit-graph-cache")


def _load_real(real_cache: Path, name: str, **options) -> Data:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GFLKIT_CACHE", str(real_cache))
        return load_graph(name, REAL_ROOT, download=False, **options)


@pytest.mark.integration
@pytest.mark.parametrize("name,relpath,nodes,edges,features,classes", [
    ("cora", "planetoid/Cora/raw/ind.cora.graph", 2708, 10556, 1433, 7),
    ("citeseer", "planetoid/CiteSeer/raw/ind.citeseer.graph", 3327, 9104, 3703, 6),
])
def test_real_planetoid(real_cache, name, relpath, nodes, edges, features, classes):
    root = _real(relpath)
    assert all(s.ok for s in verify_dataset(name, root))
    data = _load_real(real_cache, name)
    assert (data.num_nodes, data.edge_index.size(1), data.num_features, data.num_classes) == (nodes, edges, features,
                                                                                             classes)
    assert_canonical(data)
    assert int(data.train_mask.sum()) == 20 * classes and int(data.val_mask.sum()) == 500
    assert int(data.test_mask.sum()) == 1000


@pytest.mark.integration
def test_real_polblogs(real_cache):
    root = _real("polblogs/raw/polblogs.npz")
    assert all(s.ok for s in verify_dataset("polblogs", root))
    lcc = _load_real(real_cache, "polblogs")
    assert lcc.num_nodes == 1222 and lcc.edge_index.size(1) == 2 * 16714 and lcc.num_classes == 2
    assert torch.equal(lcc.x, torch.eye(1222))
    assert_canonical(lcc)
    full = _load_real(real_cache, "polblogs", largest_component=False)
    assert full.num_nodes == 1490 and full.edge_index.size(1) == 2 * 16715
    assert torch.bincount(full.y).tolist() == [758, 732]


@pytest.mark.integration
def test_real_pubmed_without_allx_fails_clearly():
    root = _real("planetoid/PubMed/raw/ind.pubmed.graph")
    if (root / "planetoid" / "PubMed" / "raw" / "ind.pubmed.allx").exists():
        pytest.skip("the shared copy now has ind.pubmed.allx")
    with pytest.raises(DatasetNotFoundError, match=re.escape("'ind.pubmed.allx' not found under data root")):
        load_graph("pubmed", root, download=False)
