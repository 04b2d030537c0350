r"""What the traffic-forecasting loaders share: windows, split, scaler, sample assembly and sensor graphs.

The datasets (METR-LA and PEMS-BAY in DCRNN's format, :mod:`.metr_la` / :mod:`.pems_bay`; PEMS-D4 and
PEMS-D8 in ASTGCN's format, :mod:`.pemsd`) differ only in how their raw files are read. Each loader turns
its readings into one ``(T, S)`` series of the target variable :math:`v_{t,s}` (speed, flow) and the time
of day :math:`\tau_t \in [0, 1)` of each step, and :func:`forecasting_samples` builds the samples:

1. windows: window :math:`w = 0 \dots W-1` has inputs at steps :math:`w \dots w + 11` and targets at
   steps :math:`w + 12 \dots w + 23` (12 in, 12 out), :math:`W = T - 23`;
2. a chronological split of the windows (:func:`split_windows`): ``num_test = round(f_test W)``,
   ``num_train = round(f_train W)``, the rest is validation (DCRNN 70 / 10 / 20, the SFL paper's
   PEMS-D 70 / 20 / 10);
3. the z-score :math:`z = (v - \mu) / \sigma` with the mean and population standard deviation of the
   *training windows' inputs* (:func:`train_statistics`, DCRNN's scaler), applied to every input.

One sample per (window, sensor), ordered window-major (sample ``n`` is window ``n // S`` of sensor
``n % S``): ``x`` ``float32`` ``(N, 12, 2)`` = (:math:`z`, :math:`\tau`), ``y`` ``float32`` ``(N, 12)``
the **unscaled** future values (0 = missing; :class:`~gflkit.tasks.ForecastingTask` masks them and scales
the targets itself with ``info["task_options"]`` = ``{"mean": μ, "std": σ}``), ``user`` = the sensor,
``is_test`` = the window is a test window, ``info["is_val"]`` marks validation windows (they stay in the
pool with ``is_test`` False), ``num_classes`` = 12 (the horizon), ``info["user_graph"]`` the sensor graph
in the order of ``user`` when its files are present.

:func:`load_traffic_graph` reads a dataset's sensor graph alone (only the graph files), e.g. to draw it
when the readings are missing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from gflkit.data.dataset import SampleDataset
from gflkit.data.errors import DatasetNotFoundError
from gflkit.data.registry import DatasetSpec, dataset_names, get_spec, reject_options

__all__ = ["HORIZON", "STEPS", "check_window_options", "forecasting_samples", "load_traffic_graph",
           "register_graph_reader", "sensor_graph_for", "split_windows", "time_of_day", "train_statistics",
           "traffic_datasets", "window_views"]

STEPS = 12
HORIZON = 12
#: A dataset's sensor graph from its graph files — ``reader(root, download=...) -> (sensor_ids, adjacency)``.
GraphReader = Callable[..., tuple[list[str], torch.Tensor]]
_GRAPH_READERS: dict[str, GraphReader] = {}


# --------------------------------------------------------------------------------------------- windows
def time_of_day(index: np.ndarray) -> np.ndarray:
    """Fraction of the day elapsed at each timestamp, in ``[0, 1)`` (DCRNN's ``time_in_day``)."""
    return ((index - index.astype("datetime64[D]")) / np.timedelta64(1, "D")).astype(np.float64)


def split_windows(num_windows: int, train_fraction: float = 0.7, test_fraction: float = 0.2) -> tuple[int, int, int]:
    """Chronological split sizes ``(train, val, test)``: ``round(test_fraction W)`` test windows (the last),
    ``round(train_fraction W)`` training windows (the first), the rest validation; DCRNN's 70 / 10 / 20 by
    default."""
    num_test = round(num_windows * test_fraction)
    num_train = round(num_windows * train_fraction)
    return num_train, num_windows - num_train - num_test, num_test


def train_statistics(speed: np.ndarray, num_train: int, steps: int = STEPS) -> tuple[float, float]:
    r"""Mean and population std of the inputs of the first ``num_train`` windows, as DCRNN's scaler.

    ``speed`` is the ``(T, S)`` series (any target variable). Window :math:`w` covers steps
    :math:`w \dots w + steps - 1`, so step :math:`t` is counted
    :math:`c_t = |\{w < \text{num\_train}: w \le t < w + steps\}|` times (a convolution of two boxes):
    :math:`\mu = \sum_t c_t \sum_s v_{t,s} / (S \sum_t c_t)`,
    :math:`\sigma^2 = \sum_t c_t \sum_s (v_{t,s} - \mu)^2 / (S \sum_t c_t)`.
    """
    counts = np.convolve(np.ones(num_train), np.ones(steps))
    values = np.asarray(speed[: len(counts)], dtype=np.float64)
    total = counts.sum() * values.shape[1]
    mean = float(counts @ values.sum(axis=1) / total)
    var = float(counts @ np.square(values - mean).sum(axis=1) / total)
    return mean, float(np.sqrt(var))


def window_views(series: torch.Tensor, target: torch.Tensor, steps: int = STEPS,
                 horizon: int = HORIZON) -> tuple[torch.Tensor, torch.Tensor]:
    """All (window, sensor) samples as strided views: ``x`` ``(W·S, steps, F)``, ``y`` ``(W·S, horizon)``.

    ``series`` is ``(T, S, F)`` and ``target`` ``(T, S)``, both contiguous; sample ``n = w·S + s`` has
    ``x[n] = series[w : w+steps, s]`` and ``y[n] = target[w+steps : w+steps+horizon, s]``,
    :math:`W = T - steps - horizon + 1`. No data are copied.
    """
    num_steps, num_sensors, num_features = series.shape
    if not (series.is_contiguous() and target.is_contiguous()) or target.shape != (num_steps, num_sensors):
        raise ValueError("series (T, S, F) and target (T, S) must be contiguous tensors with the same T and S")
    num_samples = (num_steps - steps - horizon + 1) * num_sensors
    x = series.as_strided((num_samples, steps, num_features), (num_features, num_sensors * num_features, 1),
                          series.storage_offset())
    y = target.as_strided((num_samples, horizon), (1, num_sensors), target.storage_offset() + steps * num_sensors)
    return x, y


# ------------------------------------------------------------------------------------------- samples
def check_window_options(spec: DatasetSpec, options: Mapping[str, Any], stride: int,
                         max_windows: int | None) -> None:
    """Reject unknown loader options and non-positive ``stride`` / ``max_windows`` before any file is read."""
    reject_options(spec, options, ["stride", "max_windows"])
    if stride < 1:
        raise ValueError(f"{spec.name}: stride must be a positive number of windows, got {stride}")
    if max_windows is not None and max_windows < 1:
        raise ValueError(f"{spec.name}: max_windows must be positive, got {max_windows}")


def forecasting_samples(spec: DatasetSpec, root: str | Path | None, value: torch.Tensor, tod: torch.Tensor,
                        sensor_ids: list[str], *, download: bool, stride: int, max_windows: int | None,
                        fractions: tuple[float, float], info: Mapping[str, Any]) -> SampleDataset:
    """The (window, sensor) samples of a ``(T, S)`` series (see the module docstring).

    Args:
        value: ``(T, S)`` ``float32`` readings of the target variable, column ``s`` = ``sensor_ids[s]``.
        tod: ``(T,)`` time of day of each step in ``[0, 1)``.
        stride: keep the windows ``w ≡ 0 (mod stride)`` (as plain tensors; 1: all, as zero-copy views).
        max_windows: use only the first ``max_windows + 23`` steps (split and statistics are computed on
            them); None: all.
        fractions: ``(train, test)`` fractions of the windows (:func:`split_windows`).
        info: dataset facts added to ``SampleDataset.info`` (``features``, ``target``, ...).
    """
    if max_windows is not None:
        value, tod = value[: max_windows + STEPS + HORIZON - 1], tod[: max_windows + STEPS + HORIZON - 1]
    num_steps, num_sensors = value.shape
    num_windows = num_steps - STEPS - HORIZON + 1
    num_train, num_val, num_test = split_windows(max(num_windows, 0), *fractions)
    if num_train < 1 or num_test < 1:
        raise ValueError(f"{spec.name}: {num_steps} steps give {max(num_windows, 0)} windows, too few for a "
                         f"train / test split (need at least {STEPS + HORIZON + 3} steps)")
    mean, std = train_statistics(value.numpy(), num_train)
    series = torch.stack([(value - mean) / std, tod[:, None].expand(num_steps, num_sensors)], dim=-1).contiguous()
    x, y = window_views(series, value.contiguous())
    window = torch.arange(num_windows).repeat_interleave(num_sensors)
    if stride > 1:
        keep = (window % stride == 0).nonzero().flatten()
        x, y, window = x[keep], y[keep], window[keep]
    user = torch.arange(num_sensors).repeat(len(x) // num_sensors)
    is_val = (window >= num_train) & (window < num_train + num_val)
    graph = sensor_graph_for(spec, sensor_ids, root, download)
    return SampleDataset(
        spec.name, x, y, HORIZON, window >= num_train + num_val, user, list(sensor_ids),
        info={"mean": mean, "std": std, "task_options": {"mean": mean, "std": std}, "is_val": is_val,
              "windows": {"train": num_train, "val": num_val, "test": num_test}, "stride": stride,
              "max_windows": max_windows, "steps": STEPS, "horizon": HORIZON, **info,
              **({"user_graph": graph} if graph is not None else {})},
    )


# -------------------------------------------------------------------------------------- sensor graphs
def register_graph_reader(name: str, reader: GraphReader) -> None:
    """Make ``name``'s sensor graph available to :func:`load_traffic_graph` (done by each traffic loader)."""
    _GRAPH_READERS[name] = reader


def traffic_datasets() -> list[str]:
    """The registered datasets with a sensor graph (``metr_la``, ``pems_bay``, ``pemsd4``, ``pemsd8``)."""
    return [name for name in dataset_names() if name in _GRAPH_READERS]  # dataset_names loads the built-ins


def load_traffic_graph(name: str, root: str | Path | None = None,
                       download: bool = True) -> tuple[list[str], torch.Tensor]:
    """A traffic dataset's sensor graph ``(sensor_ids, adjacency)``, read from its graph files only.

    ``adjacency`` is the ``S × S`` ``float32`` weight matrix with rows and columns in the order of
    ``sensor_ids``: DCRNN's ``adj_mx`` for ``metr_la`` / ``pems_bay`` (directed), the symmetric Gaussian
    kernel of the road distances for ``pemsd4`` / ``pemsd8`` (:func:`.pemsd.gaussian_kernel_adjacency`).
    Files are verified against their pinned sha256 first; root as for :func:`~gflkit.data.load_dataset`.

    Raises:
        ~gflkit.data.errors.UnknownDatasetError: ``name`` is not registered.
        ValueError: ``name`` is not a traffic dataset.
        ~gflkit.data.errors.DatasetNotFoundError: the graph files are missing (the message says how to get them).
    """
    spec = get_spec(name)
    reader = _GRAPH_READERS.get(spec.name)
    if reader is None:
        raise ValueError(f"dataset {name!r} has no sensor graph; traffic datasets: {', '.join(traffic_datasets())}")
    return reader(root, download=download)


def sensor_graph_for(spec: DatasetSpec, sensor_ids: list[str], root: str | Path | None,
                     download: bool = True) -> torch.Tensor | None:
    """The sensor graph with rows and columns in the order of ``sensor_ids`` (the readings' columns).

    ``None`` when ``spec`` lists no graph files or they are missing: forecasting needs only the
    readings, and a method that asks for the dataset's client graph says then which files to fetch.
    """
    if not spec.files_in("graph"):
        return None
    try:
        graph_ids, adjacency = load_traffic_graph(spec.name, root, download=download)
    except DatasetNotFoundError:
        return None
    position = {sensor: i for i, sensor in enumerate(graph_ids)}
    unknown = [sensor for sensor in sensor_ids if sensor not in position]
    if unknown:
        files = ", ".join(f.path for f in spec.files_in("graph"))
        raise ValueError(f"{spec.name}: sensors {unknown[:5]} of the readings are not in the sensor graph ({files})")
    order = torch.tensor([position[sensor] for sensor in sensor_ids])
    return adjacency[order][:, order]
