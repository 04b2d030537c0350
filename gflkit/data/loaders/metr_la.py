r"""METR-LA traffic speeds (Li et al., DCRNN, ICLR 2018): 207 Los Angeles loop detectors, one client per sensor;
and DCRNN's file format, which PEMS-BAY (:mod:`.pems_bay`) shares.

DCRNN format (:class:`DCRNNFormat`: one frozen description per dataset; :func:`load_dcrnn` and
:func:`dcrnn_sensor_graph` read any of them): a pandas HDF frame of readings, the pickle-free ``.npz``
twin of DCRNN's ``adj_mx*.pkl`` sensor graph and, for METR-LA, the ids file ``graph_sensor_ids.txt``.
Windows, split, scaler and sample layout are shared with every traffic dataset (:mod:`.traffic`).

Raw files (``<root>/metr_la/raw/``), in three groups:

* ``readings``: ``metr-la.h5``, DCRNN's pandas HDFStore (key ``df``): a DataFrame of 34,272 five-minute
  steps (2012-03-01 … 2012-06-27) × 207 sensors, speeds in mph, **0 = missing reading**. Official
  distribution: the Google Drive / Baidu links in the DCRNN README (:data:`OBTAIN`); ``gflkit data fetch``
  downloads it from a Git-LFS mirror whose pointer pins the same sha256.
* ``graph``: ``adj_mx.npz``, the pickle-free twin of DCRNN's ``adj_mx.pkl`` (``sensor_ids``,
  ``sensor_id_to_ind_keys`` / ``_values``, ``adj_mx`` 207×207 float32), and ``graph_sensor_ids.txt``
  (the ids, comma-separated), read by :func:`load_sensor_graph`.
* ``extras``: DCRNN's ``adj_mx.pkl`` (a Python pickle: pinned and verifiable, never unpickled here) and
  ``graph_sensor_locations.csv``.

Reading ``metr-la.h5`` (:func:`read_hdf_frame`) uses h5py on pandas' "fixed" layout, so PyTables is not
needed: ``/df/axis0`` column labels (byte strings, or integers), ``/df/axis1`` the index as ``int64``
(``kind`` attribute ``datetime64`` = nanoseconds in files of pandas < 3, ``datetime64[us]`` etc. in newer
ones), ``/df/block0_values`` the ``(steps, sensors)`` float values, ``/df/block0_items`` = ``axis0``.
PyTables attributes that are pickles (``freq``, ``name``) are never unpickled.

Samples, exactly as DCRNN's ``scripts/generate_training_data.py`` and ``lib/utils.load_dataset``:

1. per step the features ``[speed, time of day]`` with time of day
   :math:`(t - \lfloor t \rfloor_{\text{day}}) / 1\,\text{day} \in [0, 1)`;
2. windows: for every step :math:`t` with a full history and future, inputs at offsets
   :math:`-11 \dots 0` and targets at :math:`1 \dots 12`: window :math:`w = 0 \dots W-1` has
   ``x = steps w .. w+11`` and ``y = speed at steps w+12 .. w+23``, :math:`W = T - 23` (34,249);
3. a chronological split of the windows: ``num_test = round(0.2 W)``, ``num_train = round(0.7 W)``, the
   rest is validation (METR-LA: 23,974 / 3,425 / 6,850);
4. the z-score :math:`z = (v - \mu) / \sigma` of the speed with DCRNN's statistics: mean and population
   standard deviation over the *training windows' inputs* (``x_train[..., 0]``; each step weighted by the
   number of training windows that contain it; zeros included, as in DCRNN), applied to the speed
   feature of every input (zeros too). Time of day is not scaled.

One sample per (window, sensor): ``x`` ``float32`` ``(N, 12, 2)`` (scaled speed, time of day), ``y``
``float32`` ``(N, 12)`` the **unscaled** future speeds (0 = missing, masked by
:class:`~gflkit.tasks.ForecastingTask`, which scales them itself with ``info["task_options"]``), ``user`` =
the sensor's column index, ``user_names`` = the sensor ids in the file's column order, ``is_test`` = the
window is in the test split, ``num_classes`` = 12 (the horizon: the models' output size). Samples are
ordered window-major: sample ``n`` is window ``n // S`` of sensor ``n % S``.

``info["user_graph"]`` is the sensor graph (:func:`load_sensor_graph`) with rows and columns in the
order of ``user`` when its files are present: the pre-defined client graph of FedSKA's METR-LA runs.

Validation windows stay in the pool (``is_test`` False) and are marked by ``info["is_val"]`` (a bool
tensor over the samples): a run that follows DCRNN excludes them from training.

Memory: all 34,249 × 207 = 7.09 M samples as plain tensors would take 1 GB. With ``stride=1`` (default)
``x`` and ``y`` are zero-copy strided views of one ``(T, S, 2)`` feature buffer and the ``(T, S)`` speeds
(57 MB + 28 MB; samples share memory, so never write into them in place); ``user`` (57 MB) and the markers (14 MB)
are plain. Copying ``x`` / ``y`` to a GPU materialises them (0.68 + 0.34 GB). ``stride=k`` keeps the
windows ``w ≡ 0 (mod k)`` (as plain tensors, 1/k of the size); ``max_windows=m`` keeps only the first
:math:`m + 23` steps of the recording (a shorter series: split and statistics are computed on it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.loaders.traffic import (
    HORIZON,
    STEPS,
    check_window_options,
    forecasting_samples,
    register_graph_reader,
    sensor_graph_for,
    split_windows,
    time_of_day,
    train_statistics,
    window_views,
)
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec, RawFile, get_spec, register

__all__ = ["DCRNNFormat", "HORIZON", "METR_LA", "NAME", "SPEC", "STEPS", "dcrnn_sensor_graph", "load_dcrnn",
           "load_metr_la", "load_sensor_graph", "read_hdf_frame", "sensor_graph_for", "split_windows",
           "time_of_day", "train_statistics", "window_views"]

NAME = "metr_la"
TRAIN_FRACTION = 0.7
TEST_FRACTION = 0.2
DCRNN_COMMIT = "602afd9d767d3aa1c9b3eac51710d6aeee12c227"
SOURCE = "https://github.com/liyaguang/DCRNN"
#: DCRNN's ``data/sensor_graph/`` at :data:`DCRNN_COMMIT` (the graph files of METR-LA and PEMS-BAY).
DCRNN_RAW = f"https://raw.githubusercontent.com/liyaguang/DCRNN/{DCRNN_COMMIT}/data/sensor_graph/"
#: Git-LFS mirror of DCRNN's h5 files (wmmxk/MTGNNData) at this commit; its LFS pointers pin their sha256.
LFS_MIRROR = "https://media.githubusercontent.com/media/wmmxk/MTGNNData/942057b5581f0140c5db05280e89050a7e9f9228/"
H5_MIRROR = LFS_MIRROR + "metr-la.h5"
OBTAIN = (
    "metr-la.h5 is distributed by DCRNN (README 'Data Preparation') on Google Drive "
    "(https://drive.google.com/open?id=10FOTa6HXPqX8Pf5WRoRwcFnW9BrNZEIX) and Baidu Yun "
    "(https://pan.baidu.com/s/14Yy9isAIZYdU__OYEQGa_g); `gflkit data fetch metr_la` downloads it from the Git-LFS "
    "mirror " + H5_MIRROR + " (sha256 pinned, 57,038,056 bytes). Put it at <root>/metr_la/raw/metr-la.h5. "
    "adj_mx.npz is the pickle-free twin of DCRNN's data/sensor_graph/adj_mx.pkl (np.savez of sensor_ids, "
    "sensor_id_to_ind_keys, sensor_id_to_ind_values, adj_mx; see the shared copy's PROVENANCE.md); pointing "
    "GFLKIT_DATA at the shared offline copies is the easiest fix."
)


@dataclass(frozen=True)
class DCRNNFormat:
    """A dataset in DCRNN's format: which raw files hold its readings and sensor graph.

    Attributes:
        name: the registry name (``metr_la``, ``pems_bay``).
        readings: the pandas HDF file of readings (group ``readings``), e.g. ``metr-la.h5``.
        graph: the pickle-free sensor graph (group ``graph``), e.g. ``adj_mx.npz``.
        hdf_key: the HDFStore key of the readings' DataFrame (``df`` in ``metr-la.h5``, ``speed`` in
            ``pems-bay.h5``).
        ids_file: a file listing the graph's sensor ids comma-separated (``graph_sensor_ids.txt``), checked
            against the ``.npz``; None when the dataset has none (its ids then come from the ``.npz``).
    """

    name: str
    readings: str
    graph: str
    hdf_key: str = "df"
    ids_file: str | None = None


METR_LA = DCRNNFormat(NAME, "metr-la.h5", "adj_mx.npz", hdf_key="df", ids_file="graph_sensor_ids.txt")


# ----------------------------------------------------------------------------------- reading the h5 file
def _datetime_unit(kind: str) -> str:
    match = re.fullmatch(r"datetime64(?:\[(\w+)\])?", kind)
    if match is None:
        raise ValueError(f"the index must be a DatetimeIndex (kind 'datetime64'), got kind {kind!r}")
    return match.group(1) or "ns"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_hdf_frame(path: str | Path, key: str = "df") -> tuple[np.ndarray, np.ndarray, list[str]]:
    """A single-block float DataFrame with a DatetimeIndex, as pandas' ``to_hdf(key=key)`` ("fixed") writes it.

    Returns ``(values (steps, columns) float64, index datetime64, column labels as str)``.
    """
    import h5py

    with h5py.File(path, "r") as handle:
        group = handle.get(key)
        if not isinstance(group, h5py.Group) or _text(group.attrs.get("pandas_type", b"")) != "frame":
            raise ValueError(f"{path} holds no pandas DataFrame under key {key!r} (fixed format)")
        if int(group.attrs.get("nblocks", 0)) != 1:
            raise ValueError(f"{path}: expected a DataFrame with one float block, got {group.attrs.get('nblocks')}")
        axis1 = group["axis1"]
        if "tz" in axis1.attrs:
            raise ValueError(f"{path}: a time-zone-aware index is not supported (DCRNN's files use naive local time)")
        unit = _datetime_unit(_text(axis1.attrs.get("kind", b"")))
        index = axis1[()].astype(np.int64).astype(f"datetime64[{unit}]")
        columns = [_text(c) for c in group["axis0"][()]]
        items = [_text(c) for c in group["block0_items"][()]]
        values = np.asarray(group["block0_values"][()], dtype=np.float64)
    if items != columns:
        raise ValueError(f"{path}: block0_items differ from the columns (axis0)")
    if values.shape != (len(index), len(columns)):
        raise ValueError(f"{path}: values of shape {values.shape} for {len(index)} steps × {len(columns)} columns")
    if len(index) > 1 and not (np.diff(index.astype(np.int64)) > 0).all():
        raise ValueError(f"{path}: the time index is not strictly increasing")
    return values, index, columns


def _convert(dataset: DCRNNFormat, paths: dict[str, Path]) -> dict[str, Any]:
    values, index, columns = read_hdf_frame(paths[dataset.readings], dataset.hdf_key)
    return {"speed": torch.from_numpy(values.astype(np.float32)),
            "time_of_day": torch.from_numpy(time_of_day(index).astype(np.float32)),
            "sensor_ids": columns, "start": str(index[0]), "end": str(index[-1])}


# -------------------------------------------------------------------------------------------- loaders
def load_dcrnn(dataset: DCRNNFormat, spec: DatasetSpec, root: Path, *, download: bool = True, stride: int = 1,
               max_windows: int | None = None, **options: Any) -> SampleDataset:
    """The (window, sensor) samples of a DCRNN-format dataset, DCRNN's 70 / 10 / 20 split (:mod:`.traffic`).

    Args:
        stride: keep every ``stride``-th window (1: all, DCRNN).
        max_windows: use only the first ``max_windows + 23`` steps of the recording (None: all).
    """
    check_window_options(spec, options, stride, max_windows)
    require_files(spec, root, download=download, group="readings")
    data = cached_conversion(spec, root, spec.files_in("readings"), partial(_convert, dataset), variant="readings")
    return forecasting_samples(
        spec, root, data["speed"], data["time_of_day"], list(data["sensor_ids"]), download=download, stride=stride,
        max_windows=max_windows, fractions=(TRAIN_FRACTION, TEST_FRACTION),
        info={"features": ["speed (z-scored with mean, std)", "time of day in [0, 1)"],
              "target": "speed in mph, unscaled; 0 = missing reading", "start": data["start"], "end": data["end"]})


def load_metr_la(spec: DatasetSpec, root: Path, *, download: bool = True, stride: int = 1,
                 max_windows: int | None = None, **options: Any) -> SampleDataset:
    """METR-LA (window, sensor) samples for one-client-per-sensor forecasting (see the module docstring).

    Args:
        stride: keep every ``stride``-th window (1: all, DCRNN).
        max_windows: use only the first ``max_windows + 23`` steps of the recording (None: all).
    """
    return load_dcrnn(METR_LA, spec, root, download=download, stride=stride, max_windows=max_windows, **options)


# --------------------------------------------------------------------------------------- sensor graph
def _convert_graph(dataset: DCRNNFormat, paths: dict[str, Path]) -> dict[str, Any]:
    with np.load(paths[dataset.graph], allow_pickle=False) as npz:
        ids = [str(s) for s in npz["sensor_ids"]]
        keys = [str(s) for s in npz["sensor_id_to_ind_keys"]]
        positions = npz["sensor_id_to_ind_values"].astype(np.int64)
        adjacency = np.asarray(npz["adj_mx"], dtype=np.float32)
    if adjacency.shape != (len(ids), len(ids)):
        raise ValueError(f"{dataset.graph}: adjacency of shape {adjacency.shape} for {len(ids)} sensors")
    if sorted(keys) != sorted(ids) or any(ids[p] != k for k, p in zip(keys, positions)):
        raise ValueError(f"{dataset.graph}: sensor_id_to_ind does not map every sensor id to its position")
    if dataset.ids_file is not None:
        listed = paths[dataset.ids_file].read_text().strip().split(",")
        if [s.strip() for s in listed] != ids:
            raise ValueError(f"{dataset.ids_file} lists other sensors (or another order) than {dataset.graph}")
    return {"sensor_ids": ids, "adjacency": torch.from_numpy(adjacency)}


def dcrnn_sensor_graph(dataset: DCRNNFormat, root: str | Path | None = None, *,
                       download: bool = True) -> tuple[list[str], torch.Tensor]:
    r"""DCRNN's sensor graph of ``dataset``: ``(sensor_ids, adjacency)``.

    ``adjacency`` is the ``S × S`` float32 matrix of ``adj_mx``: DCRNN's thresholded Gaussian kernel of the
    road distances, :math:`W_{ij} = \exp(-d_{ij}^2 / \sigma^2)` if it is at least 0.1, else 0
    (self-loops 1, directed: not symmetric), rows and columns in the order of ``sensor_ids``. Read from
    the pickle-free ``.npz`` after its sha256 matched (``allow_pickle=False``) and checked against the ids
    file when the dataset has one; root as for :func:`~gflkit.data.load_dataset`.
    """
    spec = get_spec(dataset.name)
    files = spec.files_in("graph")
    require_files(spec, root, download=download, group="graph")
    data = cached_conversion(spec, root, files, partial(_convert_graph, dataset), variant="graph")
    return list(data["sensor_ids"]), data["adjacency"]


def load_sensor_graph(root: str | Path | None = None, *, download: bool = True) -> tuple[list[str], torch.Tensor]:
    """DCRNN's METR-LA sensor graph: ``(sensor_ids, adjacency)`` (:func:`dcrnn_sensor_graph`), checked
    against ``graph_sensor_ids.txt``."""
    return dcrnn_sensor_graph(METR_LA, root, download=download)


SPEC = register(DatasetSpec(
    name=NAME,
    description="METR-LA traffic speed, 207 sensors × 34,272 5-minute steps; 12→12-step windows, client = sensor",
    source=SOURCE,
    files=(
        RawFile("metr-la.h5", "64784b76d6fb8ec9bff4b6decafb354da2bb37840468fdccee5044e511277c05", 57038056,
                (H5_MIRROR,), group="readings"),
        RawFile("adj_mx.npz", "18cd6abc90cfd70000eabdedde87b50c615ab22afbbf579fcc91777e49c35585", 184058,
                group="graph"),
        RawFile("graph_sensor_ids.txt", "3ba026caa2e6263ab0ea54b0fa1b125dbfa7216544cd05313b555e826292b990", 1448,
                (DCRNN_RAW + "graph_sensor_ids.txt",), group="graph"),
        RawFile("adj_mx.pkl", "a35687c6e15aa228dc45027b0ed2a0ea0f4ec78f573deb992c595092d12f61b3", 680459,
                (DCRNN_RAW + "adj_mx.pkl",), group="extras"),
        RawFile("graph_sensor_locations.csv", "eb8ea96e07358b45d0e4ba3b89c2673fa20c54af50150249e627389e749ade6f",
                6341, (DCRNN_RAW + "graph_sensor_locations.csv",), group="extras"),
    ),
    loader=load_metr_la,
    obtain=OBTAIN,
    license="DCRNN repository MIT (Copyright (c) 2017 Yaguang Li); no separate data licence stated",
))
register_graph_reader(NAME, load_sensor_graph)
