"""PEMS-BAY (DCRNN format) and PEMS-D4 / PEMS-D8 (ASTGCN format) on canonical-format fixtures: windows, split,
scaler, time of day, the Gaussian-kernel graph, ``load_traffic_graph``, checksums and missing files; and
(``integration``) the real sensor graphs (and readings, where present) under ``GFLKIT_DATA``."""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import shutil
import subprocess
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

import gflkit.data.loaders.pemsd as pemsd
from gflkit.data.integrity import git_blob_file
from gflkit.data.registry import RawFile
from data_fixtures import spec_for
from gflkit.data import ChecksumError, DatasetNotFoundError, get_spec, load_dataset, registered, verify_dataset
from gflkit.data.loaders.traffic import load_traffic_graph, split_windows, traffic_datasets, train_statistics
from gflkit.experiment import RunConfig, run
from gflkit.tasks import ForecastingTask
from gflkit.runtime import Runtime
from test_metr_la import dcrnn_windows, make_metr_la, timestamps, write_pandas_h5

REAL_ROOT = os.environ.get("GFLKIT_DATA")  # read at import: the autouse fixture hides it from the fixture tests
FILES = {"pemsd4": ("PEMS04.npz", "PEMS04.csv"), "pemsd8": ("PEMS08.npz", "PEMS08.csv")}


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GFLKIT_OFFLINE", "1")
    monkeypatch.delenv("GFLKIT_DATA", raising=False)


# --------------------------------------------------------------------------------------------- fixtures
def make_pems_bay(root: Path, speed: np.ndarray | None = None, num_steps: int = 120, num_sensors: int = 4,
                  readings: bool = True):
    """``pems-bay.h5`` (key ``speed``, integer column labels, as DCRNN's file) and ``adj_mx_bay.npz``.

    The graph lists the sensors in reverse column order, so reading order and graph order differ.
    Returns ``(spec, speed, sensor ids in column order)``.
    """
    import h5py

    if speed is None:
        rng = np.random.default_rng(0)
        speed = rng.uniform(20.0, 70.0, size=(num_steps, num_sensors))
        speed[rng.random(speed.shape) < 0.05] = 0.0
    ids = [str(400001 + 16 * i) for i in range(speed.shape[1])]
    raw = root / "pems_bay" / "raw"
    rel = []
    if readings:
        write_pandas_h5(raw / "pems-bay.h5", speed, timestamps(len(speed)), ids)
        with h5py.File(raw / "pems-bay.h5", "r+") as handle:
            handle.move("df", "speed")
            for node in ("axis0", "block0_items"):
                attrs = dict(handle["speed"][node].attrs, kind=np.bytes_("integer"))
                del handle["speed"][node]
                handle["speed"].create_dataset(node, data=np.array(ids, dtype=np.int64))
                handle["speed"][node].attrs.update(attrs)
        rel.append("pems-bay.h5")
    graph_ids = ids[::-1]
    adjacency = np.eye(len(ids), dtype=np.float32)
    adjacency[0, 1] = 0.25  # graph order: sensor ids[-1] → ids[-2]
    raw.mkdir(parents=True, exist_ok=True)
    np.savez(raw / "adj_mx_bay.npz", sensor_ids=np.array(graph_ids), sensor_id_to_ind_keys=np.array(graph_ids),
             sensor_id_to_ind_values=np.arange(len(ids), dtype=np.int64), adj_mx=adjacency)
    return spec_for("pems_bay", root, [*rel, "adj_mx_bay.npz"]), speed, ids


DISTANCES = "from,to,cost\r\n0,1,1.0\r\n1,2,1.5\r\n2,0,4.0\r\n"


def make_pemsd(root: Path, name: str = "pemsd4", flow: np.ndarray | None = None, num_steps: int = 80,
               num_sensors: int = 3, csv: str = DISTANCES, readings: bool = True):
    """``PEMS0x.npz`` (key ``data``: ``(T, S, 3)`` flow, occupancy, speed) and ``PEMS0x.csv`` (``from,to,cost``,
    CRLF as ASTGCN's). Returns ``(spec, flow)``."""
    if flow is None:
        flow = np.random.default_rng(1).integers(0, 400, size=(num_steps, num_sensors)).astype(np.float64)
    npz_name, csv_name = FILES[name]
    raw = root / name / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / csv_name).write_bytes(csv.encode())
    if readings:
        data = np.stack([flow, np.full(flow.shape, 0.05), np.full(flow.shape, 64.0)], axis=-1)
        np.savez(raw / npz_name, data=data)
    return spec_for(name, root, [npz_name, csv_name] if readings else [csv_name]), flow


def by_hand_adjacency() -> torch.Tensor:
    """:data:`DISTANCES` by hand: distances 1, 1.5, 4 → σ² = 31/18; exp(-d²/σ²) = 0.5595, 0.2708, 9.2e-5 < κ."""
    sigma2 = float(np.var([1.0, 1.5, 4.0]))
    assert sigma2 == pytest.approx(31 / 18)
    w01, w12 = math.exp(-1.0 / sigma2), math.exp(-2.25 / sigma2)
    assert math.exp(-16.0 / sigma2) < 0.1 < w12
    return torch.tensor([[1.0, w01, 0.0], [w01, 1.0, w12], [0.0, w12, 1.0]])


# ------------------------------------------------------------------------------------------------ splits
def test_split_sizes():
    # DCRNN's 70 / 10 / 20 for PEMS-BAY: 52,116 steps → 52,093 windows
    assert split_windows(52116 - 23) == (36465, 5209, 10419)
    # the SFL paper's 70 / 20 / 10 for PEMS-D4 / D8
    assert (pemsd.TRAIN_FRACTION, pemsd.TEST_FRACTION) == (0.7, 0.1)
    assert split_windows(16992 - 23, 0.7, 0.1) == (11878, 3394, 1697)
    assert split_windows(17856 - 23, 0.7, 0.1) == (12483, 3567, 1783)


def test_pemsd_windows_split_and_scaler_hand_checked(tmp_path):
    # 50 steps, flow[t, s] = 100 s + t + 1: 27 windows → 19 train, 5 val, 3 test (70 / 20 / 10)
    flow = 100.0 * np.arange(2)[None, :] + np.arange(1, 51)[:, None]
    spec, _ = make_pemsd(tmp_path / "root", flow=flow)
    with registered(spec):
        data = load_dataset("pemsd4", tmp_path / "root")
    assert len(data) == 27 * 2 and data.input_shape == (12, 2) and data.y.shape == (54, 12) and data.num_classes == 12
    assert data.x.dtype == torch.float32 and data.y.dtype == torch.float32
    assert data.info["windows"] == {"train": 19, "val": 5, "test": 3}
    assert data.is_test.tolist() == [False] * 48 + [True] * 6
    assert data.info["is_val"].tolist() == [False] * 38 + [True] * 10 + [False] * 6
    assert data.user.tolist() == [0, 1] * 27 and data.user_names == ["0", "1"]
    # DCRNN's scaler: mean / population std of the training windows' inputs
    x, _ = dcrnn_windows(flow, np.zeros(50))
    mean, std = data.info["mean"], data.info["std"]
    assert mean == pytest.approx(x[:19, ..., 0].mean(), rel=1e-9)
    assert std == pytest.approx(x[:19, ..., 0].std(), rel=1e-9)
    assert data.info["task_options"] == {"mean": mean, "std": std}
    # sample n = window * S + sensor; window 20 of sensor 1 reads steps 20..31, predicts steps 32..43
    n = 20 * 2 + 1
    assert data.x[n, :, 0] * std + mean == pytest.approx([100.0 + t + 1 for t in range(20, 32)], abs=1e-4)
    assert data.x[n, :, 0] == pytest.approx([(100.0 + t + 1 - mean) / std for t in range(20, 32)], abs=1e-5)
    assert data.y[n].tolist() == [100.0 + t + 1 for t in range(32, 44)]  # unscaled
    assert data.x[n, :, 1].tolist() == pytest.approx([t * 5 / 1440 for t in range(20, 32)])


def test_pemsd_time_of_day_assumes_a_midnight_start(tmp_path):
    spec, _ = make_pemsd(tmp_path / "root", num_steps=320, num_sensors=2)
    with registered(spec):
        data = load_dataset("pemsd4", tmp_path / "root")
    tod = data.x[:, :, 1].reshape(-1, 2, 12)[:, 0]  # (windows, 12)
    assert tod[0].tolist() == pytest.approx([t / 288 for t in range(12)])
    assert tod[280].tolist() == pytest.approx([(280 + t) % 288 / 288 for t in range(12)])  # wraps at step 288
    assert float(tod.max()) < 1.0 and float(tod.min()) == 0.0


def test_pemsd_samples_invert_and_score_with_forecasting_task(tmp_path):
    spec, flow = make_pemsd(tmp_path / "root", name="pemsd8", num_steps=90, num_sensors=3)
    with registered(spec):
        data = load_dataset("pemsd8", tmp_path / "root")
    mean, std = data.info["mean"], data.info["std"]
    num_train = data.info["windows"]["train"]
    assert (mean, std) == pytest.approx(train_statistics(flow, num_train))
    windows = data.x[..., 0].reshape(-1, 3, 12) * std + mean  # (W, S, 12)
    assert torch.allclose(windows[:, 2, 0], torch.tensor(flow[:len(windows), 2], dtype=torch.float32), atol=1e-3)
    task = ForecastingTask(**data.info["task_options"])
    perfect = (data.y - mean) / std
    assert float(task.loss(perfect, data.y)) == pytest.approx(0.0, abs=1e-5)
    assert float(task.loss(perfect + 1.0, data.y)) == pytest.approx(1.0, abs=1e-5)  # one σ off: error 1 (scaled)


def test_pemsd_stride_max_windows_and_options(tmp_path):
    spec, flow = make_pemsd(tmp_path / "root", num_steps=100, num_sensors=2)
    with registered(spec):
        full = load_dataset("pemsd4", tmp_path / "root")
        strided = load_dataset("pemsd4", tmp_path / "root", stride=4)
        short = load_dataset("pemsd4", tmp_path / "root", max_windows=40)
        with pytest.raises(TypeError, match="unknown option.*horizon"):
            load_dataset("pemsd4", tmp_path / "root", horizon=3)
        with pytest.raises(ValueError, match="stride"):
            load_dataset("pemsd4", tmp_path / "root", stride=0)
        with pytest.raises(ValueError, match="too few"):
            load_dataset("pemsd4", tmp_path / "root", max_windows=2)
    keep = torch.arange(77).repeat_interleave(2) % 4 == 0
    assert torch.equal(strided.x, full.x[keep]) and torch.equal(strided.y, full.y[keep])
    assert torch.equal(strided.info["is_val"], full.info["is_val"][keep]) and strided.info["mean"] == full.info["mean"]
    assert len(short) == 80 and short.info["windows"] == {"train": 28, "val": 8, "test": 4}


def test_pemsd_rejects_readings_of_another_shape(tmp_path):
    spec, _ = make_pemsd(tmp_path / "root")
    raw = tmp_path / "root" / "pemsd4" / "raw"
    np.savez(raw / "PEMS04.npz", data=np.zeros((80, 3)))
    with registered(spec_for("pemsd4", tmp_path / "root")), pytest.raises(ValueError, match=r"\(steps, sensors, 3\)"):
        load_dataset("pemsd4", tmp_path / "root")


def test_pemsd_forecasting_runs_end_to_end(tmp_path):
    spec, _ = make_pemsd(tmp_path / "root", num_steps=150, num_sensors=4,
                         csv="from,to,cost\n0,1,1.0\n1,2,1.5\n2,3,4.0\n")
    config = RunConfig(dataset="pemsd4", model="gru_seq2seq", task="forecasting", num_clients=4, partition="natural",
                       test_ratio=None, batch_size=64, lr=0.01, rounds=1, method="fedavg",
                       model_options={"hidden": 8})
    with registered(spec):
        records = run(config, Runtime(data_root=tmp_path / "root", device="cpu"), progress=False)
    assert records["client"].nunique() == 4 and records["mae"].dropna().map(math.isfinite).all()


# ----------------------------------------------------------------------------------------------- PEMS-BAY
def test_pems_bay_follows_dcrnn(tmp_path):
    spec, speed, ids = make_pems_bay(tmp_path / "root")
    with registered(spec):
        data = load_dataset("pems_bay", tmp_path / "root")
    x, y = dcrnn_windows(speed, (np.arange(120) * 5 % 1440) / 1440)  # (W, 12, S, 2)
    assert data.info["windows"] == {"train": 68, "val": 10, "test": 19}  # 97 windows, 70 / 10 / 20
    mean, std = data.info["mean"], data.info["std"]
    assert mean == pytest.approx(x[:68, ..., 0].mean(), rel=1e-6)
    assert std == pytest.approx(x[:68, ..., 0].std(), rel=1e-6)
    ours_x = data.x.reshape(97, 4, 12, 2).numpy()
    assert np.allclose(ours_x[..., 0] * std + mean, x[..., 0].transpose(0, 2, 1), atol=1e-4)
    assert np.allclose(ours_x[..., 1], x[..., 1].transpose(0, 2, 1), atol=1e-6)
    assert np.allclose(data.y.reshape(97, 4, 12).numpy(), y[..., 0].transpose(0, 2, 1), atol=1e-4)
    assert data.user_names == ids and data.info["start"].startswith("2012-03-01T00:00")
    expected = torch.eye(4)
    expected[3, 2] = 0.25  # graph entry (0, 1) = (ids[3], ids[2]), in reading order
    assert torch.equal(data.info["user_graph"], expected)


# ----------------------------------------------------------------------------------------- sensor graphs
def test_gaussian_kernel_adjacency_by_hand(tmp_path):
    spec, _ = make_pemsd(tmp_path / "root", readings=False)
    with registered(spec):
        sensor_ids, adjacency = load_traffic_graph("pemsd4", tmp_path / "root")
    assert sensor_ids == ["0", "1", "2"] and adjacency.dtype == torch.float32
    assert torch.allclose(adjacency, by_hand_adjacency(), atol=1e-6)


def test_gaussian_kernel_counts_pairs_once_and_checks_them():
    edges, distances = np.array([[0, 1], [1, 2], [2, 0], [0, 1]]), np.array([1.0, 1.5, 4.0, 1.0])
    assert torch.allclose(torch.from_numpy(pemsd.gaussian_kernel_adjacency(edges, distances, 3)),
                          by_hand_adjacency(), atol=1e-6)  # the repeated row changes nothing
    with pytest.raises(ValueError, match="different distances"):
        pemsd.gaussian_kernel_adjacency(edges, np.array([1.0, 1.5, 4.0, 2.0]), 3)
    with pytest.raises(ValueError, match="no spread"):
        pemsd.gaussian_kernel_adjacency(edges[:1], distances[:1], 3)
    with pytest.raises(ValueError, match=r"0 … 1"):
        pemsd.gaussian_kernel_adjacency(edges, distances, 2)


def test_distance_csv_errors_name_the_file(tmp_path):
    spec, _ = make_pemsd(tmp_path / "root", csv="src,dst,km\n0,1,1.0\n", readings=False)
    with registered(spec), pytest.raises(ValueError, match=r"PEMS04.csv: expected the header 'from,to,cost'"):
        load_traffic_graph("pemsd4", tmp_path / "root")
    spec, _ = make_pemsd(tmp_path / "root", csv="from,to,cost\n0,1,1.0\n1,x,2.0\n", readings=False)
    with registered(spec), pytest.raises(ValueError, match=r"PEMS04.csv, line 3"):
        load_traffic_graph("pemsd4", tmp_path / "root")


def test_load_traffic_graph_for_each_dataset(tmp_path):
    root = tmp_path / "root"
    metr_spec, _, metr_ids = make_metr_la(root)
    bay_spec, _, bay_ids = make_pems_bay(root, readings=False)
    d4_spec, _ = make_pemsd(root, "pemsd4", readings=False)
    d8_spec, _ = make_pemsd(root, "pemsd8", csv="from,to,cost\n0,3,1.0\n3,0,1.0\n1,2,2.0\n2,3,3.0\n", readings=False)
    with registered(metr_spec), registered(bay_spec), registered(d4_spec), registered(d8_spec):
        assert traffic_datasets() == ["metr_la", "pems_bay", "pemsd4", "pemsd8"]
        metr = load_traffic_graph("metr_la", root)
        bay = load_traffic_graph("pems_bay", root)
        d4 = load_traffic_graph("pemsd4", root)
        d8 = load_traffic_graph("pemsd8", root)
        with pytest.raises(ValueError, match="no sensor graph; traffic datasets: metr_la, pems_bay, pemsd4, pemsd8"):
            load_traffic_graph("mnist", root)
    assert metr[0] == metr_ids and float(metr[1][0, 1]) == 0.5
    assert bay[0] == bay_ids[::-1] and float(bay[1][0, 1]) == 0.25 and float(bay[1][1, 0]) == 0.0  # directed
    assert torch.allclose(d4[1], by_hand_adjacency(), atol=1e-6)
    # distinct pairs 0→3, 3→0, 1→2, 2→3 with distances 1, 1, 2, 3: σ² = 0.6875; only d = 1 passes κ
    expected = torch.eye(4)
    expected[0, 3] = expected[3, 0] = math.exp(-1.0 / 0.6875)
    assert math.exp(-4.0 / 0.6875) < 0.1
    assert d8[0] == ["0", "1", "2", "3"] and torch.allclose(d8[1], expected, atol=1e-6)


def test_graph_is_verified_before_parsing(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_pemsd(root, readings=False)
    with registered(spec_for("pemsd4", root, ["PEMS04.csv"])):  # pinned to the fixture CSV
        (root / "pemsd4" / "raw" / "PEMS04.csv").write_text(DISTANCES.replace("4.0", "4.5"))
        with pytest.raises(ChecksumError, match="PEMS04.csv"):
            load_traffic_graph("pemsd4", root)


# --------------------------------------------------------------------------------------- missing / pins
@pytest.mark.parametrize("name, readings", [("pems_bay", "pems-bay.h5"), ("pemsd4", "PEMS04.npz"),
                                            ("pemsd8", "PEMS08.npz")])
def test_missing_readings_name_the_file(tmp_path, name, readings):
    root = tmp_path / "root"
    if name == "pems_bay":
        spec, _, _ = make_pems_bay(root, readings=False)
    else:
        spec, _ = make_pemsd(root, name, readings=False)
    production_readings = get_spec(name).files_in("readings")
    with registered(dataclasses.replace(spec, files=production_readings + spec.files)):
        assert load_traffic_graph(name, root, download=False)[0]  # the graph alone loads
        with pytest.raises(DatasetNotFoundError) as info:
            load_dataset(name, root, download=False)
    message = str(info.value)
    assert readings in message and "GFLKIT_DATA" in message and str(root / name / "raw") in message
    if name == "pems_bay":
        assert "gflkit data fetch pems_bay" in message
    else:
        assert "git hash-object" in message and get_spec(name).source in message


def git_blob(path: Path) -> str:
    content = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def test_pemsd_readings_are_pinned_by_their_git_blob_id_in_load_and_verify(tmp_path):
    root = tmp_path / "root"
    spec, _ = make_pemsd(root)
    npz = root / "pemsd4" / "raw" / "PEMS04.npz"
    assert git_blob_file(npz) == git_blob(npz)
    if shutil.which("git"):
        assert subprocess.run(["git", "hash-object", str(npz)], capture_output=True, text=True,
                              check=True).stdout.strip() == git_blob(npz)
    production = get_spec("pemsd4").files_in("readings")[0]
    assert production.sha256 is None and production.pin == ("git blob", pemsd.PEMSD4.readings_git_blob)
    wrong = dataclasses.replace(spec, files=(production, *spec.files_in("graph")))
    with registered(wrong):
        (status,) = [s for s in verify_dataset("pemsd4", root) if s.relpath == "PEMS04.npz"]
        assert status.state == "checksum-bad" and status.kind == "git blob"
        with pytest.raises(ChecksumError, match=f"git blob mismatch .* expected {pemsd.PEMSD4.readings_git_blob}"):
            load_dataset("pemsd4", root)
    right = dataclasses.replace(production, git_blob=git_blob(npz))
    with registered(dataclasses.replace(spec, files=(right, *spec.files_in("graph")))):
        assert all(s.ok for s in verify_dataset("pemsd4", root))
        data = load_dataset("pemsd4", root)
    with registered(spec):
        pinned = load_dataset("pemsd4", root)
    assert torch.equal(data.x, pinned.x) and torch.equal(data.y, pinned.y)
    with pytest.raises(ValueError, match="exactly one of sha256 and git_blob"):
        RawFile("x.npz", None)
    with pytest.raises(ValueError, match="cannot be downloaded here"):
        RawFile("x.npz", None, urls=("https://example.org/x.npz",), git_blob="0" * 40)


def _provenance_row(text: str, path: str) -> str:
    return next(line for line in text.splitlines() if f"raw/{path} |" in line)


def test_production_pins():
    bay = get_spec("pems_bay")
    assert bay.groups == ("readings", "graph", "extras")
    h5 = bay.files_in("readings")[0]
    assert (h5.path, h5.sha256, h5.size) == (
        "pems-bay.h5", "65d69fb0a2323dba9867179eb7af47c8b814186bc459ff0a4937d21614153c8f", 135930936)
    assert h5.urls and all(u.endswith("pems-bay.h5") for u in h5.urls)
    assert not bay.files_in("graph")[0].downloadable  # adj_mx_bay.npz is derived, not distributed
    for name, (npz, csv) in FILES.items():
        spec = get_spec(name)
        assert [f.path for f in spec.files] == [npz, csv] and spec.groups == ("readings", "graph")
        readings = spec.files_in("readings")[0]
        assert readings.sha256 is None and readings.git_blob and not readings.downloadable
        assert spec.files_in("graph")[0].urls[0].endswith("/distance.csv")
    shared = Path(REAL_ROOT or "/nonexistent")
    if not (shared / "pems_bay" / "PROVENANCE.md").is_file():
        pytest.skip(f"PROVENANCE.md files not under {shared} (set GFLKIT_DATA to the shared datasets folder)")
    text = (shared / "pems_bay" / "PROVENANCE.md").read_text()
    assert h5.sha256 in text and "135,930,936" in text
    for raw in bay.files[1:]:
        row = _provenance_row(text, raw.path)
        assert raw.sha256 in row and f"| {raw.size} |" in row
    for name, dataset in (("pemsd4", pemsd.PEMSD4), ("pemsd8", pemsd.PEMSD8)):
        text = (shared / name / "PROVENANCE.md").read_text()
        graph = get_spec(name).files_in("graph")[0]
        row = _provenance_row(text, graph.path)
        assert graph.sha256 in row and f"| {graph.size} |" in row
        assert f"git blob `{dataset.readings_git_blob}`" in text


# ------------------------------------------------------------------------------------- real data (CI)
def _real(name: str, relpath: str) -> Path:
    if not REAL_ROOT:
        pytest.skip("GFLKIT_DATA is not set: real-data tests need a root holding the raw files "
                    "(CI uses ../shared/datasets)")
    root = Path(REAL_ROOT)
    if not (root / name / "raw" / relpath).is_file():
        pytest.skip(f"real {name} {relpath} not found under {root}/{name}/raw")
    return root


@pytest.mark.integration
def test_real_pems_bay_graph():
    root = _real("pems_bay", "adj_mx_bay.npz")
    assert all(s.ok for s in verify_dataset("pems_bay", root, group="graph"))
    assert all(s.ok for s in verify_dataset("pems_bay", root, group="extras"))
    sensor_ids, adjacency = load_traffic_graph("pems_bay", root, download=False)
    assert len(sensor_ids) == 325 and sensor_ids[:3] == ["400001", "400017", "400030"]
    assert adjacency.shape == (325, 325) and int((adjacency != 0).sum()) == 2694
    assert torch.equal(adjacency.diagonal(), torch.ones(325)) and not torch.equal(adjacency, adjacency.T)
    assert float(adjacency[adjacency > 0].min()) >= 0.1


@pytest.mark.integration
@pytest.mark.parametrize("name, num_sensors, non_zeros",
                         [("pemsd4", 307, 307 + 2 * 209), ("pemsd8", 170, 170 + 2 * 135)])
def test_real_pemsd_graph(name, num_sensors, non_zeros):
    root = _real(name, FILES[name][1])
    assert all(s.ok for s in verify_dataset(name, root, group="graph"))
    sensor_ids, adjacency = load_traffic_graph(name, root, download=False)
    assert sensor_ids == [str(s) for s in range(num_sensors)] and adjacency.shape == (num_sensors, num_sensors)
    assert torch.equal(adjacency, adjacency.T) and torch.equal(adjacency.diagonal(), torch.ones(num_sensors))
    # PEMS04: 340 listed links, 209 of them ≥ κ; PEMS08: 277 distinct pairs (3 links listed both ways),
    # 137 of them ≥ κ (2 of the doubly listed links among them): 135 links
    assert int((adjacency != 0).sum()) == non_zeros and float(adjacency[adjacency > 0].min()) >= 0.1


@pytest.mark.integration
def test_real_metr_la_graph_through_load_traffic_graph():
    root = _real("metr_la", "adj_mx.npz")
    sensor_ids, adjacency = load_traffic_graph("metr_la", root, download=False)
    assert len(sensor_ids) == 207 and int((adjacency != 0).sum()) == 1722


@pytest.mark.integration
def test_real_pems_bay_readings():
    root = _real("pems_bay", "pems-bay.h5")  # not in the offline copies: skipped there
    data = load_dataset("pems_bay", root, download=False, stride=12)
    assert data.info["windows"] == {"train": 36465, "val": 5209, "test": 10419}
    assert len(data.user_names) == 325 and data.info["user_graph"].shape == (325, 325)


@pytest.mark.integration
@pytest.mark.parametrize("name, windows", [("pemsd4", {"train": 11878, "val": 3394, "test": 1697}),
                                           ("pemsd8", {"train": 12483, "val": 3567, "test": 1783})])
def test_real_pemsd_readings(name, windows):
    root = _real(name, FILES[name][0])  # not in the offline copies: skipped there
    data = load_dataset(name, root, download=False, stride=12)
    assert data.info["windows"] == windows and data.info["user_graph"].shape == (len(data.user_names),) * 2


def test_sfl_table2_runs_sfl_over_the_sensor_graph_and_sfl_star_over_a_learned_one(tmp_path):
    from gflkit.papers import sfl
    from gflkit.profiles import resolve_profile

    spec, flow = make_pemsd(tmp_path / "root")
    params = resolve_profile(sfl.PROFILES, "smoke", overrides={"traffic": ["pemsd4", "pemsd8"], "rounds": 1,
                                                               "batch_size": 64, "lr": 0.01})
    with registered(spec):
        runs = sfl.grids(params, ["table2"], runtime=Runtime(data_root=tmp_path / "root"))["table2"]
        assert [run.labels["variant"] for run in runs] == list(sfl.TABLE2), "pemsd8's readings are absent"
        table2 = [run.config for run in runs]
        assert {c.dataset for c in table2} == {"pemsd4"} and {c.model for c in table2} == {"rnn"}
        assert table2[2].method_options["graph"] == "dataset" and table2[3].method_options["graph"] == "learned"
        for config in table2[2:]:
            records = run(config, Runtime(data_root=tmp_path / "root", device="cpu"), progress=False)
            assert records["client"].nunique() == flow.shape[1] and records["mae"].map(math.isfinite).all()
