r"""PEMS-BAY traffic speeds (Li et al., DCRNN, ICLR 2018): 325 Bay Area PeMS sensors, one client per sensor.

The same format and samples as METR-LA (:mod:`.metr_la`, :class:`~.metr_la.DCRNNFormat`; windows, split
and scaler in :mod:`.traffic`). Raw files (``<root>/pems_bay/raw/``):

* ``readings``: ``pems-bay.h5``, DCRNN's pandas HDFStore (key ``speed``): 52,116 five-minute steps
  (2017) × 325 sensors (integer column labels, read as strings), speeds in mph,
  0 = missing. Official distribution: the DCRNN README's Google Drive / Baidu links; ``gflkit data fetch
  pems_bay`` downloads it from the Git-LFS mirror whose pointer pins the sha256 (135,930,936 bytes).
* ``graph``: ``adj_mx_bay.npz``, the pickle-free twin of DCRNN's ``adj_mx_bay.pkl`` (same keys as METR-LA's
  ``adj_mx.npz``; ``adj_mx`` 325 × 325, 2,694 non-zeros, directed); the sensor ids come from it (PEMS-BAY
  has no ``graph_sensor_ids.txt``).
* ``extras``: ``adj_mx_bay.pkl`` (a pickle: pinned, never unpickled), ``graph_sensor_locations_bay.csv``
  and ``distances_bay_2017.csv`` (the road distances the graph was built from).

Samples: DCRNN's 70 / 10 / 20 split of the 52,093 windows (36,465 / 5,209 / 10,419), speed z-scored with
the training windows' statistics, time of day from the timestamps; ``x`` ``(N, 12, 2)``, ``y`` the
unscaled speeds ``(N, 12)``, window-major. Memory as METR-LA's: with ``stride=1`` the 16.9 M samples are
views of one ``(T, S, 2)`` buffer (136 MB) and the speeds (68 MB).
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from gflkit.data.dataset import SampleDataset
from gflkit.data.loaders.metr_la import DCRNN_RAW, LFS_MIRROR, SOURCE, DCRNNFormat, dcrnn_sensor_graph, load_dcrnn
from gflkit.data.loaders.traffic import register_graph_reader
from gflkit.data.registry import DatasetSpec, RawFile, register

NAME = "pems_bay"
PEMS_BAY = DCRNNFormat(NAME, "pems-bay.h5", "adj_mx_bay.npz", hdf_key="speed")
H5_MIRROR = LFS_MIRROR + "pems-bay.h5"
OBTAIN = (
    "pems-bay.h5 is distributed by DCRNN (README 'Data Preparation', the same Google Drive / Baidu Yun folders as "
    "metr-la.h5); `gflkit data fetch pems_bay` downloads it from the Git-LFS mirror " + H5_MIRROR + " (sha256 "
    "pinned, 135,930,936 bytes). Put it at <root>/pems_bay/raw/pems-bay.h5. adj_mx_bay.npz is the pickle-free twin "
    "of DCRNN's data/sensor_graph/adj_mx_bay.pkl (np.savez of sensor_ids, sensor_id_to_ind_keys, "
    "sensor_id_to_ind_values, adj_mx; see the shared copy's PROVENANCE.md); pointing GFLKIT_DATA at the shared "
    "offline copies is the easiest fix for the graph."
)


def load_pems_bay(spec: DatasetSpec, root: Path, *, download: bool = True, stride: int = 1,
                  max_windows: int | None = None, **options: Any) -> SampleDataset:
    """PEMS-BAY (window, sensor) samples, exactly as METR-LA's (:func:`~.metr_la.load_dcrnn`).

    Args:
        stride: keep every ``stride``-th window (1: all, DCRNN).
        max_windows: use only the first ``max_windows + 23`` steps of the recording (None: all).
    """
    return load_dcrnn(PEMS_BAY, spec, root, download=download, stride=stride, max_windows=max_windows, **options)


SPEC = register(DatasetSpec(
    name=NAME,
    description="PEMS-BAY traffic speed, 325 sensors × 52,116 5-minute steps; 12→12-step windows, client = sensor",
    source=SOURCE,
    files=(
        RawFile("pems-bay.h5", "65d69fb0a2323dba9867179eb7af47c8b814186bc459ff0a4937d21614153c8f", 135930936,
                (H5_MIRROR,), group="readings"),
        RawFile("adj_mx_bay.npz", "731bf090b7edd5e2bc1ffc776949f0d7cfc3095361a225229074e8050147d164", 441770,
                group="graph"),
        RawFile("adj_mx_bay.pkl", "116275f5704d0d492018e14c047f7ae5004385b450aa907f88424055a4a97370", 1681480,
                (DCRNN_RAW + "adj_mx_bay.pkl",), group="extras"),
        RawFile("graph_sensor_locations_bay.csv", "276ee01059610774d4e59572507f7e32eaac21f1f5882fcd9e3d7d426a4b7a6c",
                9750, (DCRNN_RAW + "graph_sensor_locations_bay.csv",), group="extras"),
        RawFile("distances_bay_2017.csv", "e5feed06bfa1ba4c554a946d0e03d99f2018365eec5a8f28fd8504dea9d082b5",
                175771, (DCRNN_RAW + "distances_bay_2017.csv",), group="extras"),
    ),
    loader=load_pems_bay,
    obtain=OBTAIN,
    license="DCRNN repository MIT (Copyright (c) 2017 Yaguang Li); PeMS data are public Caltrans data",
))
register_graph_reader(NAME, partial(dcrnn_sensor_graph, PEMS_BAY))
