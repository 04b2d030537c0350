"""Executors for a grid of runs: where :func:`run_grid` computes its runs.

``serial`` computes them one after another in this process (the default). ``ray`` makes each run not
yet stored a Ray task (https://docs.ray.io) that calls :func:`~gflkit.experiment.run` in a worker with
the runtime's ``threads`` torch threads (one by default), holding as many of Ray's CPUs, so the workers do not
oversubscribe the cores. Every other field of the :class:`~gflkit.runtime.Runtime` reaches the workers too: the
data root, the device type, the store and the local training, resolved on the driver. Ray schedules the tasks; gflkit
does not. The workers write into the grid's :class:`~gflkit.results.ResultStore` and the grid reads
the records back from it, so the results folder and the data root must be paths every worker sees
(the same path on a shared filesystem when the cluster has several machines), and every worker needs
gflkit installed. A task whose worker dies is retried (:data:`MAX_RETRIES`) and resumes from the run's
last checkpoint, as any interrupted run does. A lock left by a worker that died on another host is not
taken over (:meth:`~gflkit.results.ResultStore.lock`): remove it by hand.

Ray is imported only by the ``ray`` executor (``pip install -e .[ray]``, part of ``make setup``).
"""
from __future__ import annotations

import os
import socket
from typing import Any, Sequence

import pandas as pd

from gflkit.algorithms import Algorithm, register_method, registered_methods
from gflkit.data import data_root as resolve_data_root
from gflkit.experiment import Run, RunConfig, as_run, run, stored_key
from gflkit.progress import outer_progress, progress_bar
from gflkit.results import ResultStore, config_key
from gflkit.runtime import Runtime, resolve_local_training

#: How often Ray runs a task again after its worker died (the run resumes from its checkpoint).
MAX_RETRIES = 3
#: torch threads per Ray task when the runtime names none — one task per core.
WORKER_THREADS = 1


def execute_grid(configs: Sequence[RunConfig], runtime: Runtime | None = None) -> list[pd.DataFrame]:
    """The records of every config (as :func:`~gflkit.experiment.run` returns them), in the configs' order,
    computed by the runtime's executor (``ray``: on its Ray cluster, None: a local one).

    Raises:
        ValueError: the ``ray`` executor without a store.
        ImportError: the ``ray`` executor without Ray installed.
    """
    runtime = runtime or Runtime()
    if runtime.executor == "serial":
        return run_serial(configs, runtime)
    if runtime.store is None:
        raise ValueError("executor='ray' needs a store: the workers write each run into it and the grid reads "
                         "the records back from it")
    return run_on_ray(configs, runtime)


def run_grid(runs: Sequence[Run | RunConfig], runtime: Runtime | None = None) -> pd.DataFrame:
    """Run every run on ``runtime`` (re-using the runs its store holds) and concatenate their records, in the
    runs' order.

    A :class:`~gflkit.experiment.Run`'s labels are added to its records as columns (e.g. ``q``), so that the
    records of a grid can be grouped by what varied. The runtime's executor computes the runs: ``"serial"``
    one after another here, ``"ray"`` one Ray task per run on the cluster at its ``ray_address`` (None: a local
    instance on this machine's cores), which needs a store on a path every worker sees.
    Raises ``ValueError`` for ``"ray"`` without a store.
    """
    runs = [as_run(r) for r in runs]
    frames = execute_grid([r.config for r in runs], runtime)
    return pd.concat([frame.assign(**r.labels) for r, frame in zip(runs, frames)], ignore_index=True)


def stored_runs(runs: Sequence[Run | RunConfig], runtime: Runtime) -> list[Run]:
    """The runs of ``runs`` whose records ``runtime``'s store already holds (for its device type), in order: what
    a later reader gets of a grid that is still being computed, without computing the rest.

    Raises ``ValueError`` for a runtime without a store."""
    if runtime.store is None:
        raise ValueError("stored_runs needs a runtime with a result store (Runtime(store=ResultStore(folder)))")
    device = runtime.torch_device()
    return [run for run in map(as_run, runs) if runtime.store.load(stored_key(run.config, device)) is not None]


def stored_grid_records(runs: Sequence[Run | RunConfig], runtime: Runtime, what: str) -> pd.DataFrame:
    """:func:`run_grid` of the runs of ``runs`` that ``runtime``'s store holds (:func:`stored_runs`): nothing is
    computed, so a grid still running is read as far as it got — what a later run appends to a results
    folder. Raises ``ValueError`` naming ``what`` (e.g. ``"Table 1 run of seeds [1, 2]"``) when none is stored."""
    held = stored_runs(runs, runtime)
    if not held:
        raise ValueError(f"no {what} is stored under {runtime.store.root}")
    return run_grid(held, runtime)


def run_serial(configs: Sequence[RunConfig], runtime: Runtime | None = None) -> list[pd.DataFrame]:
    """Every config's records, computed one after another in this process (stored runs are re-used)."""
    return [run(config, runtime)
            for config in outer_progress(configs, desc="runs", unit="run", enabled=len(configs) > 1, label=_label)]


def run_on_ray(configs: Sequence[RunConfig], runtime: Runtime) -> list[pd.DataFrame]:
    """Every config's records, each run not yet in the runtime's store computed by a Ray task (see the module
    docstring).

    The device is resolved here, on the driver, and every task computes on that device type (a GPU
    per task when it is CUDA): ``"cuda"`` uses the workers' GPUs even when this machine has none.
    """
    ray = import_ray()
    connect(ray, runtime.ray_address)
    device_type = runtime.torch_device().type
    store = runtime.store
    runs = {config_key(stored_key(c, device_type)): c for c in configs}  # a run twice in the grid is one task
    threads = runtime.threads or WORKER_THREADS
    task = ray.remote(_run_in_worker).options(num_cpus=threads, num_gpus=int(device_type == "cuda"),
                                              max_retries=MAX_RETRIES)
    shared = (str(resolve_data_root(runtime.data_root)), str(store.root.absolute()), device_type,
              resolve_local_training(runtime.local_training), threads, registered_methods())
    pending = {task.remote(config, *shared): config for config in runs.values()
               if store.load(stored_key(config, device_type)) is None}
    with progress_bar(None, desc="runs", total=len(runs), initial=len(runs) - len(pending), unit="run", leave=True,
                      enabled=len(configs) > 1) as bar:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ray.get(done)  # raises the task's error, after its retries
            bar.set_postfix_str(_label(pending.pop(done[0])))
            bar.update(1)
    driver = runtime.replace(device=device_type)
    return [_stored_records(config, driver) for config in configs]


def import_ray() -> Any:
    """The ``ray`` module, or an ``ImportError`` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise ImportError("executor='ray' needs Ray, which is not installed: pip install -e .[ray] "
                          "(make setup installs it)") from None
    return ray


#: Seconds to wait for a Ray cluster's address to accept a connection before giving up.
RAY_CONNECT_TIMEOUT_S = 5.0


def check_ray_address(address: str, timeout: float = RAY_CONNECT_TIMEOUT_S) -> None:
    """Raise ``ConnectionError`` in one line unless a Ray cluster answers at ``address`` (``host:port`` or
    ``ray://host:port``) within about ``timeout`` seconds — Ray itself would retry for minutes: something must
    accept a TCP connection there and answer as a gRPC server (Ray's GCS and its client server both are).
    Other forms (``auto``, ``local``) are left to Ray, which answers them at once."""
    target = address.removeprefix("ray://")
    host, separator, port = target.rpartition(":")
    if not separator or not port.isdigit():
        return
    host = host.strip("[]") or "127.0.0.1"
    advice = "start one there (ray start --head) or name another with --ray-address"
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ConnectionError(f"no Ray cluster answers at {address} ({reason}, waited up to {timeout:g} s): "
                              f"{advice}") from None
    if not _answers_grpc(f"{host}:{port}", timeout):
        raise ConnectionError(f"something listens at {address} but it is not a Ray cluster (no gRPC answer within "
                              f"{timeout:g} s): {advice}")


def _answers_grpc(target: str, timeout: float) -> bool:
    """Whether a gRPC server completes the HTTP/2 handshake at ``target`` within ``timeout`` seconds."""
    import grpc  # installed with Ray

    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout)
    except grpc.FutureTimeoutError:
        return False
    finally:
        channel.close()
    return True


def cluster_address(address: str | None = None) -> str | None:
    """The Ray cluster a grid runs on: ``address``, else ``$RAY_ADDRESS`` (Ray's own variable), else None (a
    local Ray on this machine's cores)."""
    return address or os.environ.get("RAY_ADDRESS", "").strip() or None


def connect(ray: Any, address: str | None = None) -> None:
    """Connect to the Ray cluster at ``address``, else at ``$RAY_ADDRESS`` (checked first:
    :func:`check_ray_address`), or start a local instance on every core of this machine (no dashboard) when
    neither names one; a Ray already initialised in this process is used as it is."""
    if ray.is_initialized():
        return
    address = cluster_address(address)
    if address is None:
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False)
    else:
        check_ray_address(address)
        ray.init(address=address)


def _run_in_worker(config: RunConfig, data_root: str, store_root: str, device: str, local_training: str,
                   threads: int, methods: dict[str, type[Algorithm]]) -> None:
    """One Ray task: compute (or resume, or re-use) ``config`` into the store at ``store_root``, with the
    driver's data root, device type and local training (resolved there: a worker's environment may differ),
    ``threads`` torch threads (the CPUs the task holds) and the methods registered on the driver
    (:func:`~gflkit.algorithms.register_method`; Ray ships a class defined in a notebook by value)."""
    for method in methods.values():
        register_method(method)
    runtime = Runtime(data_root, device, ResultStore(store_root), local_training, threads=threads)
    run(config, runtime, progress=False)


def _stored_records(config: RunConfig, runtime: Runtime) -> pd.DataFrame:
    """The records a worker stored for ``config``, read back through :func:`~gflkit.experiment.run`."""
    store = runtime.store
    if store.load(stored_key(config, runtime.torch_device())) is None:
        raise FileNotFoundError(f"a Ray worker finished {_label(config)} but its records are not under "
                                f"{store.root.absolute()}: put the results folder on a filesystem every worker sees")
    return run(config, runtime, progress=False)


def _label(config: RunConfig) -> str:
    """A run's label on the progress bar."""
    return f"{config.method} seed={config.seed}"
