r"""PEMS-D4 and PEMS-D8 traffic flow (Guo et al., ASTGCN, AAAI 2019): PeMS districts 4 and 8, one client per sensor.

Raw files (``<root>/pemsd4/raw/``, ``<root>/pemsd8/raw/``), ASTGCN's release under the names the
ASTGCN-pytorch / STSGCN / AGCRN releases use:

* ``readings``: ``PEMS04.npz`` / ``PEMS08.npz``, key ``data``: a ``(T, S, 3)`` array of five-minute
  (flow, occupancy, speed) readings, 16,992 × 307 (Jan–Feb 2018) and 17,856 × 170 (Jul–Aug 2016); read
  with ``allow_pickle=False``. No sha256 of these files is published: they are pinned by the git blob id
  of ASTGCN's ``data/PEMS0x/pems0x.npz`` (``git hash-object``, :attr:`ASTGCNFormat.readings_git_blob`,
  recorded in the shared copies' PROVENANCE.md; :class:`~gflkit.data.registry.RawFile` ``git_blob``), which
  ``gflkit data verify`` and the loader check like a sha256. They cannot be downloaded by gflkit (downloads
  are checked by sha256): the spec's ``obtain`` text says where to get them.
* ``graph``: ``PEMS04.csv`` / ``PEMS08.csv``, ASTGCN's ``distance.csv``: header ``from,to,cost``, one road
  link per row between sensor indices ``0 … S-1`` with its road distance (ASTGCN lists each link once;
  PEMS08 has exact duplicate rows and a few links in both directions).

Sensor graph (:func:`gaussian_kernel_adjacency`). The SFL paper: "The adjacency matrix is generated based
on Gaussian kernel"; we use DCRNN's thresholded Gaussian kernel of the road distances,

.. math::
    W_{ij} = \exp\!\left(-\frac{d_{ij}^2}{\sigma^2}\right) \text{ if this is } \ge \kappa = 0.1
    \text{, else } 0, \qquad W_{ii} = 1,

for the listed pairs (0 for unlisted ones), :math:`\sigma` the population standard deviation of the listed
distances (each distinct ``(from, to)`` pair once, as the finite entries of DCRNN's distance matrix), made
symmetric, :math:`W_{ij} = W_{ji} = \max` of the two directions, because the CSV lists undirected road
links. The sensors are ``"0" … "S-1"`` with :math:`S` one more than the largest index in the CSV (every
sensor of the real files appears in it: 307 and 170).

Samples (:mod:`.traffic`, the layout of METR-LA's): the target is the **flow** (feature 0); inputs are
the flow z-scored with the training windows' statistics and the time of day. The files hold no
timestamps: the time of day of step :math:`t` is :math:`(5t \bmod 1440) / 1440`, i.e. the recording is
assumed to start at midnight with five-minute steps (16,992 = 59 × 288 and 17,856 = 62 × 288 steps:
whole days). Split: the SFL paper's **70 % train, 20 % validation, 10 % test** of the windows
(chronological; DCRNN's is 70 / 10 / 20): PEMS-D4 11,878 / 3,394 / 1,697, PEMS-D8 12,483 / 3,567 / 1,783.
``y`` are the unscaled future flows, in which :class:`~gflkit.tasks.ForecastingTask` treats 0 as missing
(DCRNN's ``null_val = 0``, as the masked metrics of the PEMS-D literature). Loader options ``stride`` and
``max_windows`` as METR-LA's.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.loaders.traffic import (
    check_window_options,
    forecasting_samples,
    register_graph_reader,
    time_of_day,
)
from gflkit.data.conversion import cached_conversion
from gflkit.data.download import require_files
from gflkit.data.registry import DatasetSpec, RawFile, get_spec, register

__all__ = ["ASTGCNFormat", "PEMSD4", "PEMSD8", "astgcn_sensor_graph", "gaussian_kernel_adjacency",
           "load_astgcn", "read_distances"]

ASTGCN_COMMIT = "86efe627f8d7a1d461be9446a3c9d0960c301d0b"
SOURCE = "https://github.com/wanhuaiyu/ASTGCN"
ASTGCN_RAW = f"https://raw.githubusercontent.com/wanhuaiyu/ASTGCN/{ASTGCN_COMMIT}/data/"
#: The SFL paper's split of the windows — 70 % train, 10 % test (and 20 % validation).
TRAIN_FRACTION = 0.7
TEST_FRACTION = 0.1
#: DCRNN's threshold of the Gaussian kernel.
KAPPA = 0.1
MINUTES_PER_STEP = 5
FEATURES = ("flow", "occupancy", "speed")


@dataclass(frozen=True)
class ASTGCNFormat:
    """A dataset in ASTGCN's format: its registry name, raw files and where ASTGCN publishes them.

    Attributes:
        name: the registry name (``pemsd4``, ``pemsd8``).
        readings: the ``(T, S, 3)`` readings (group ``readings``), e.g. ``PEMS04.npz``.
        graph: the distance CSV (group ``graph``), e.g. ``PEMS04.csv``.
        folder: ASTGCN's folder ``data/<folder>/`` holding ``pems0x.npz`` and ``distance.csv``.
        readings_git_blob: the git blob id (``git hash-object``) of ASTGCN's readings file, which pins
            the readings while no sha256 is published.
    """

    name: str
    readings: str
    graph: str
    folder: str
    readings_git_blob: str

    @property
    def readings_url(self) -> str:
        """ASTGCN's readings file at :data:`ASTGCN_COMMIT`."""
        return f"{ASTGCN_RAW}{self.folder}/{self.folder.lower()}.npz"


PEMSD4 = ASTGCNFormat("pemsd4", "PEMS04.npz", "PEMS04.csv", "PEMS04", "a1a39eac4b86963b1ac22874fd1cc693eb642cd2")
PEMSD8 = ASTGCNFormat("pemsd8", "PEMS08.npz", "PEMS08.csv", "PEMS08", "f5f3e84a00417573aa8487fe1e9e8cd13c6026c8")


# ------------------------------------------------------------------------------------------- the graph
def read_distances(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """ASTGCN's distance CSV (header ``from,to,cost``): ``(edges (E, 2) int64, distances (E,) float64)``."""
    lines = [line.strip() for line in Path(path).read_text().splitlines() if line.strip()]
    if not lines or [c.strip() for c in lines[0].split(",")] != ["from", "to", "cost"]:
        raise ValueError(f"{path}: expected the header 'from,to,cost' (ASTGCN's distance.csv), "
                         f"got {lines[0] if lines else 'an empty file'!r}")
    edges, distances = [], []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(",")
        try:
            if len(fields) != 3:
                raise ValueError("not three fields")
            edges.append((int(fields[0]), int(fields[1])))
            distances.append(float(fields[2]))
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: expected 'from,to,cost' with sensor indices and a "
                             f"distance, got {line!r} ({exc})") from None
    edges_array = np.array(edges, dtype=np.int64).reshape(-1, 2)
    if (edges_array < 0).any():
        raise ValueError(f"{path}: sensor indices must be non-negative")
    return edges_array, np.array(distances, dtype=np.float64)


def gaussian_kernel_adjacency(edges: np.ndarray, distances: np.ndarray, num_sensors: int,
                              threshold: float = KAPPA) -> np.ndarray:
    r"""The symmetric thresholded Gaussian-kernel adjacency of listed road distances, ``float32`` ``S × S``.

    With :math:`\sigma` the population standard deviation of the distances of the distinct listed
    ``(from, to)`` pairs (repeated rows count once; they must agree):

    .. math::
        w_{ij} = \exp(-d_{ij}^2 / \sigma^2), \qquad
        W_{ij} = W_{ji} = \max(\tilde w_{ij}, \tilde w_{ji}), \qquad W_{ii} = 1,

    where :math:`\tilde w_{ij} = w_{ij}` if :math:`(i, j)` is listed and :math:`w_{ij} \ge \kappa`
    (``threshold``, DCRNN's 0.1), else 0.

    Raises:
        ValueError: an index outside ``0 … num_sensors-1``, a pair listed with different distances, or
            distances without spread (:math:`\sigma = 0`).
    """
    if len(edges) and (edges.min() < 0 or edges.max() >= num_sensors):
        raise ValueError(f"sensor indices must lie in 0 … {num_sensors - 1}")
    keys = edges[:, 0] * num_sensors + edges[:, 1]
    unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if (distances != distances[first][inverse.reshape(-1)]).any():
        raise ValueError("a (from, to) pair is listed more than once with different distances")
    listed = distances[first]
    sigma = float(listed.std())
    if not sigma > 0:
        raise ValueError(f"the listed distances have no spread (σ = {sigma}): the Gaussian kernel is undefined")
    weights = np.exp(-np.square(listed / sigma))
    weights[weights < threshold] = 0.0
    adjacency = np.zeros((num_sensors, num_sensors))
    adjacency[unique // num_sensors, unique % num_sensors] = weights
    adjacency = np.maximum(adjacency, adjacency.T)
    np.fill_diagonal(adjacency, 1.0)
    return adjacency.astype(np.float32)


def _convert_graph(dataset: ASTGCNFormat, paths: dict[str, Path]) -> dict[str, Any]:
    edges, distances = read_distances(paths[dataset.graph])
    num_sensors = int(edges.max()) + 1 if len(edges) else 0
    try:
        adjacency = gaussian_kernel_adjacency(edges, distances, num_sensors)
    except ValueError as exc:
        raise ValueError(f"{paths[dataset.graph]}: {exc}") from None
    return {"sensor_ids": [str(s) for s in range(num_sensors)], "adjacency": torch.from_numpy(adjacency)}


def astgcn_sensor_graph(dataset: ASTGCNFormat, root: str | Path | None = None, *,
                        download: bool = True) -> tuple[list[str], torch.Tensor]:
    """The sensor graph of ``dataset`` from its distance CSV alone: ``(["0", …, "S-1"], adjacency)``.

    ``adjacency`` is :func:`gaussian_kernel_adjacency` of the CSV (symmetric, self-loops 1), rows and
    columns in sensor order; the CSV is verified against its pinned sha256 first.
    """
    spec = get_spec(dataset.name)
    require_files(spec, root, download=download, group="graph")
    data = cached_conversion(spec, root, spec.files_in("graph"), partial(_convert_graph, dataset), variant="graph")
    return list(data["sensor_ids"]), data["adjacency"]


# ---------------------------------------------------------------------------------------- the readings
def _convert(dataset: ASTGCNFormat, paths: dict[str, Path]) -> dict[str, Any]:
    with np.load(paths[dataset.readings], allow_pickle=False) as npz:
        if "data" not in npz.files:
            raise ValueError(f"{paths[dataset.readings]} has no array 'data' (keys: {npz.files})")
        data = npz["data"]
    if data.ndim != 3 or data.shape[2] != len(FEATURES):
        raise ValueError(f"{paths[dataset.readings]}: 'data' must be (steps, sensors, 3) = {FEATURES}, "
                         f"got shape {data.shape}")
    return {"flow": torch.from_numpy(np.ascontiguousarray(data[..., 0], dtype=np.float32)),
            "sensor_ids": [str(s) for s in range(data.shape[1])]}


def load_astgcn(dataset: ASTGCNFormat, spec: DatasetSpec, root: Path, *, download: bool = True, stride: int = 1,
                max_windows: int | None = None, **options: Any) -> SampleDataset:
    """The (window, sensor) flow samples of an ASTGCN-format dataset (see the module docstring): the SFL
    paper's 70 % train / 20 % validation / 10 % test split, time of day from the step index (midnight start).

    Args:
        stride: keep every ``stride``-th window (1: all).
        max_windows: use only the first ``max_windows + 23`` steps of the recording (None: all).
    """
    check_window_options(spec, options, stride, max_windows)
    require_files(spec, root, download=download, group="readings")
    data = cached_conversion(spec, root, spec.files_in("readings"), partial(_convert, dataset), variant="readings")
    flow = data["flow"]
    steps = np.datetime64("2000-01-01T00:00") + np.arange(len(flow)) * np.timedelta64(MINUTES_PER_STEP, "m")
    return forecasting_samples(
        spec, root, flow, torch.from_numpy(time_of_day(steps).astype(np.float32)), list(data["sensor_ids"]),
        download=download, stride=stride, max_windows=max_windows, fractions=(TRAIN_FRACTION, TEST_FRACTION),
        info={"features": ["flow (z-scored with mean, std)", "time of day in [0, 1) (midnight start assumed)"],
              "target": "flow in vehicles per 5 minutes, unscaled; 0 = missing reading"})


# ------------------------------------------------------------------------------------------------ specs
def _obtain(dataset: ASTGCNFormat) -> str:
    return (f"{dataset.readings} is ASTGCN's data/{dataset.folder}/{dataset.folder.lower()}.npz ({SOURCE}, "
            f"git blob {dataset.readings_git_blob}): download {dataset.readings_url} and save it as "
            f"<root>/{dataset.name}/raw/{dataset.readings}. No sha256 is published, so gflkit does not download it "
            f"and checks the file by its git blob id (`git hash-object {dataset.readings}` must print "
            f"{dataset.readings_git_blob}). {dataset.graph} is ASTGCN's data/{dataset.folder}/distance.csv, renamed; "
            f"pointing GFLKIT_DATA at the shared offline copies is the easiest fix for the graph.")


def _register(dataset: ASTGCNFormat, description: str, graph_sha256: str, graph_size: int) -> DatasetSpec:
    """Register ``dataset``'s spec and its sensor graph (:func:`~.traffic.load_traffic_graph`)."""
    register_graph_reader(dataset.name, partial(astgcn_sensor_graph, dataset))
    return register(DatasetSpec(
        name=dataset.name,
        description=description,
        source=SOURCE,
        files=(
            RawFile(dataset.readings, None, group="readings", git_blob=dataset.readings_git_blob),
            RawFile(dataset.graph, graph_sha256, graph_size, (f"{ASTGCN_RAW}{dataset.folder}/distance.csv",),
                    group="graph"),
        ),
        loader=partial(load_astgcn, dataset),
        obtain=_obtain(dataset),
        license="ASTGCN repository without licence file; PeMS data are public Caltrans data (research use)",
    ))


SPEC_PEMSD4 = _register(PEMSD4, "PEMS-D4 traffic flow, 307 sensors × 16,992 5-minute steps; 12→12-step windows, "
                                "client = sensor", "68ffaa80447eb34428a9999dc28363c61406ec0fd714686d0582d2386ac6f5f7",
                        4852)
SPEC_PEMSD8 = _register(PEMSD8, "PEMS-D8 traffic flow, 170 sensors × 17,856 5-minute steps; 12→12-step windows, "
                                "client = sensor", "859d68e7583ed4e6016588eaaca494d3ece286dae361614c5c1833017f87eaa7",
                        4032)
