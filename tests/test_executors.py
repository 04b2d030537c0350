"""Grid executors: the ``ray`` executor on a local Ray (loopback only) stores exactly what ``serial`` stores,
survives a killed worker and re-uses stored runs; bad executors and a missing Ray fail in one line."""
import ast
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from gflkit.cli import main
from gflkit.executors import WORKER_THREADS, run_grid, stored_grid_records, stored_runs
from gflkit.experiment import Run, RunConfig
from gflkit.notebooks import NOTEBOOK_DIR
from gflkit.results import ResultStore
from gflkit.runtime import Runtime

SMALL = dict(dataset="digits", num_clients=10, partition="shards", partition_options={"shards_per_client": 2},
             rounds=3, batch_size=16, lr=0.05)
TIME_LIMIT_S = 240  # per test: a hung Ray task must fail the test, not hang the suite
PAPER_NOTEBOOKS = ("quickstart", "fedska", "jgesr", "fedvgae", "sfl", "fedcg", "benchmark")


@pytest.fixture(autouse=True)
def time_limit():
    """Fail a test that runs longer than ``TIME_LIMIT_S``."""
    def expire(signum, frame):
        raise TimeoutError(f"test ran longer than {TIME_LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TIME_LIMIT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs, no dashboard) for the tests of this module."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def worker_threads(monkeypatch):
    """Serial runs with the threads of a Ray worker: torch's thread count changes a float sum's last bits."""
    for variable in ("GFLKIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):  # what run() -> limit_threads() sets
        monkeypatch.setenv(variable, str(WORKER_THREADS))
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def small_grid(**changes) -> list[RunConfig]:
    """Four small runs: two methods × two seeds on the embedded digits."""
    return [RunConfig(**{**SMALL, **changes}, method=method, seed=seed) for method in ("fedavg", "local") for seed in (0, 1)]


def stored_records(root: Path) -> dict[str, bytes]:
    """Every stored ``records.csv`` under ``root``, by run key."""
    return {path.parent.name: path.read_bytes() for path in sorted(root.glob("*/records.csv"))}


GRID = small_grid() + small_grid()[:1]  # a run twice in a grid is computed once and returned twice


RUNS = [Run(config, {"position": GRID.index(config)}) for config in GRID]  # labels travel with each run


@pytest.fixture(scope="module")
def ray_grid(local_ray, tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """:data:`GRID` computed once on Ray (Ray workers start slowly): its store and records."""
    root = tmp_path_factory.mktemp("ray")
    return root, run_grid(RUNS, Runtime(device="cpu", store=ResultStore(root), executor="ray"))


def test_ray_stores_byte_identical_records_and_returns_them_in_the_grids_order(ray_grid, worker_threads, tmp_path):
    root, on_ray = ray_grid
    serial = run_grid(RUNS, Runtime(device="cpu", store=ResultStore(tmp_path)))
    assert len(stored_records(root)) == 4
    assert stored_records(root) == stored_records(tmp_path)
    pd.testing.assert_frame_equal(on_ray, serial)


def test_ray_workers_train_as_the_runtime_says(ray_grid, tmp_path):
    """The runtime's local training reaches the workers (each record names the path that trained it)."""
    assert (ray_grid[1]["local_training"] == "batched").all(), "the default, auto, batches these runs"
    runtime = Runtime(device="cpu", store=ResultStore(tmp_path), executor="ray", local_training="sequential")
    assert (run_grid(RUNS[:1], runtime)["local_training"] == "sequential").all()


def kill_first_checkpointed_worker(root: Path, killed: list[int], timeout: float = 120) -> None:
    """Wait for a run under ``root`` to write its first checkpoint, then SIGKILL the worker holding the run's lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for checkpoint in root.glob("*/checkpoint.pt"):
            pid = int((checkpoint.parent / "lock").read_text().rpartition(" ")[2])
            assert pid != os.getpid(), "the run must be computed by a Ray worker"
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.01)


def test_a_killed_worker_is_retried_and_resumes_to_the_serial_numbers(local_ray, worker_threads, tmp_path):
    config = RunConfig(**{**SMALL, "rounds": 40})  # checkpoints every 5 rounds, a few seconds in all
    run_grid([config], Runtime(device="cpu", store=ResultStore(tmp_path / "serial")))
    killed = []
    killer = threading.Thread(target=kill_first_checkpointed_worker, args=(tmp_path / "ray", killed))
    killer.start()
    run_grid([config], Runtime(device="cpu", store=ResultStore(tmp_path / "ray"), executor="ray"))
    killer.join()
    assert len(killed) == 1, "the worker was killed mid-run"
    assert stored_records(tmp_path / "ray") == stored_records(tmp_path / "serial")
    assert not list((tmp_path / "ray").glob("*/checkpoint*.pt")) and not list((tmp_path / "ray").glob("*/lock"))


def test_a_second_invocation_reuses_every_stored_run_without_a_task(local_ray, ray_grid, monkeypatch):
    root, first = ray_grid
    written = {path: path.stat().st_mtime_ns for path in root.rglob("*") if path.is_file()}

    def no_task(*args, **kwargs):
        raise AssertionError("a stored run must not be submitted to Ray")

    monkeypatch.setattr(local_ray, "wait", no_task)
    again = run_grid(RUNS, Runtime(device="cpu", store=ResultStore(root), executor="ray"))
    pd.testing.assert_frame_equal(again, first)
    assert {path: path.stat().st_mtime_ns for path in root.rglob("*") if path.is_file()} == written


def test_stored_runs_are_the_grids_runs_the_store_holds_and_nothing_is_computed(tmp_path):
    grid = [Run(RunConfig(method=method, **SMALL), {"label": method}) for method in ("fedavg", "local", "fedprox")]
    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    assert stored_runs(grid, runtime) == []
    run_grid([grid[1]], runtime)
    assert stored_runs(grid, runtime) == [grid[1]]
    assert len(list((tmp_path / "runs").iterdir())) == 1, "reading which runs are stored computes none"
    assert stored_runs(grid, Runtime(device="cpu", store=ResultStore(tmp_path / "elsewhere"))) == []
    with pytest.raises(ValueError, match="needs a runtime with a result store"):
        stored_runs(grid, Runtime(device="cpu"))


def test_stored_grid_records_read_the_stored_runs_and_name_what_is_missing(tmp_path):
    grid = [Run(RunConfig(method=method, **SMALL), {"label": method}) for method in ("fedavg", "local")]
    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    with pytest.raises(ValueError, match="no small grid is stored under"):
        stored_grid_records(grid, runtime, "small grid")
    first = run_grid([grid[1]], runtime)
    pd.testing.assert_frame_equal(stored_grid_records(grid, runtime, "small grid"), first)
    assert len(list((tmp_path / "runs").iterdir())) == 1, "the fedavg run is not computed"


@pytest.mark.parametrize("options, message", [
    ({"executor": "bogus"}, "unknown executor 'bogus'; choose one of ['serial', 'ray']"),
    ({"executor": "ray"}, "executor='ray' needs a store"),
    ({"ray_address": "ray://head:10001"}, "ray_address='ray://head:10001' is only used by executor='ray'"),
])
def test_bad_executor_options_fail_in_one_line(options, message):
    with pytest.raises(ValueError) as failure:
        run_grid(small_grid(), Runtime(device="cpu", **options))
    assert message in str(failure.value) and "\n" not in str(failure.value)


def test_a_missing_ray_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(ImportError, match=r"pip install -e \.\[ray\]"):
        run_grid(small_grid(), Runtime(device="cpu", store=ResultStore(tmp_path), executor="ray"))


def test_the_runtime_checks_the_executor():
    assert Runtime(executor="ray").executor == "ray"
    with pytest.raises(ValueError, match=r"unknown executor 'dask'; choose one of \['serial', 'ray'\]"):
        Runtime(executor="dask")


@pytest.mark.parametrize("name", PAPER_NOTEBOOKS)
def test_every_paper_notebook_builds_one_runtime_from_its_parameters_and_passes_it_to_every_grid(name):
    import nbformat

    notebook = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    parameters = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    assert {'executor = "serial"', "ray_address = None"} <= {line.split("#")[0].strip() for line in parameters.source.splitlines()}
    code = "\n".join(line for cell in notebook.cells if cell.cell_type == "code"
                     for line in cell.source.splitlines() if not line.startswith("%"))
    calls = [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Call)]
    (runtime,) = [call for call in calls if getattr(call.func, "id", None) == "Runtime"]
    assert [ast.unparse(a) for a in runtime.args] == ["data_root", "device"]
    assert {k.arg: ast.unparse(k.value) for k in runtime.keywords} == {"executor": "executor", "ray_address": "ray_address"}
    grids = [call for call in calls if getattr(call.func, "id", None) == "run_grid"]
    assert grids and all(ast.unparse(call.args[1]) == "runtime" and len(call.args) == 2 and not call.keywords
                         for call in grids), [ast.unparse(call) for call in grids]


def trimmed_mean():
    """A FedAvg subclass of a notebook's (defined in a function, so Ray ships it by value)."""
    from gflkit.algorithms import FedAvg

    class TrimmedMean(FedAvg):
        name = "trimmed_mean"

        def aggregate(self, fed, clients, updates, round):
            ordered = updates.sort(dim=0).values
            fed.global_model = ordered[1:-1].mean(dim=0)

    return TrimmedMean


def knn_average():
    """A personalised method on the public surface, as notebooks/your_method.ipynb writes one."""
    from gflkit.algorithms import Method
    from gflkit.graphs.adjacency import cosine_similarity_matrix

    class KNNAverage(Method):
        name = "knn_average_test"
        personalised = True

        def local_penalty(self, w, start, round):
            return 0.005 * sum(((w[name] - start[name]) ** 2).sum() for name in w)

        def aggregate_models(self, uploads):
            similarity = cosine_similarity_matrix(uploads.models - uploads.current).fill_diagonal_(-float("inf"))
            neighbours = similarity.topk(2, dim=1).indices
            return 0.5 * uploads.models + 0.5 * uploads.models[neighbours].mean(dim=1)

    return KNNAverage


@pytest.mark.parametrize("make", [trimmed_mean, knn_average], ids=["algorithm", "public_surface"])
def test_a_method_registered_in_the_driver_runs_on_ray_workers(make, local_ray, tmp_path):
    """A method defined in a notebook (here: inside a function) reaches the workers with each task."""
    from gflkit.algorithms import ALGORITHMS, register_method

    method = register_method(make())
    try:
        grid = [RunConfig(**SMALL, method=method.name, seed=seed) for seed in (0, 1)]
        on_ray = run_grid(grid, Runtime(device="cpu", store=ResultStore(tmp_path / "ray"), executor="ray"))
        serial = run_grid(grid, Runtime(device="cpu", store=ResultStore(tmp_path / "serial")))
        pd.testing.assert_frame_equal(on_ray, serial)
        assert stored_records(tmp_path / "ray") == stored_records(tmp_path / "serial")
    finally:
        ALGORITHMS.pop(method.name, None)


def runtime_probe():
    """A method that keeps, as its run's artifacts, what the process that trains it sees: torch's threads, the
    federation's device and its local-training mode (defined in a function, so Ray ships it by value)."""
    from gflkit.algorithms import FedAvg
    from gflkit.local_training import LOCAL_TRAINING

    class RuntimeProbe(FedAvg):
        name = "runtime_probe"

        def setup(self, fed):
            super().setup(fed)
            self.seen = {"threads": torch.tensor(torch.get_num_threads()),
                         "cpu": torch.tensor(fed.device.type == "cpu"),
                         "mode": torch.tensor(list(LOCAL_TRAINING).index(fed.trainer.mode))}

        def artifacts(self):
            return self.seen

    return RuntimeProbe


@pytest.fixture
def probe():
    from gflkit.algorithms import ALGORITHMS, register_method

    method = register_method(runtime_probe())
    threads = torch.get_num_threads()
    variables = {name: os.environ.get(name) for name in ("GFLKIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    yield method
    torch.set_num_threads(threads)
    for name, value in variables.items():  # Runtime(threads=…) sets them for the whole process
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    ALGORITHMS.pop(method.name, None)


@pytest.mark.parametrize("executor", ["serial", "ray"])
@pytest.mark.parametrize("field", ["data_root", "device", "store", "local_training", "threads"])
def test_every_runtime_field_reaches_the_process_that_trains(field, executor, probe, request, tmp_path):
    """One Runtime, each of its fields changed alone, seen where the run trains, on either executor."""
    from gflkit.experiment import stored_artifacts
    from gflkit.local_training import LOCAL_TRAINING

    if executor == "ray":
        request.getfixturevalue("local_ray")
    store = ResultStore(tmp_path / "store")
    config = RunConfig(**{**SMALL, "rounds": 1}, method="runtime_probe")
    if field == "data_root":  # a root without MNIST: the worker's loader names that root, not another
        empty = tmp_path / "empty-root"
        empty.mkdir()
        runtime = Runtime(data_root=empty, device="cpu", store=store, executor=executor)
        with pytest.raises(Exception, match="empty-root"):
            run_grid([config.replace(dataset="mnist", max_samples=100)], runtime)
        return
    changes = {"device": {"device": "cpu"}, "store": {}, "local_training": {"local_training": "sequential"},
               "threads": {"threads": 2}}[field]
    runtime = Runtime(**{"device": "cpu", **changes}, store=store, executor=executor)
    records = run_grid([config], runtime)
    seen = stored_artifacts(config, runtime)
    assert len(list((tmp_path / "store").glob("*/records.csv"))) == 1, "the run is stored where the runtime says"
    assert bool(seen["cpu"])
    expected_mode = "sequential" if field == "local_training" else "auto"
    assert list(LOCAL_TRAINING)[int(seen["mode"])] == expected_mode
    assert (records["local_training"] == ("sequential" if field == "local_training" else "batched")).all()
    if field == "threads":
        assert int(seen["threads"]) == 2
    elif executor == "ray":
        assert int(seen["threads"]) == WORKER_THREADS


def test_precompute_on_ray_stores_the_runs_serial_precompute_stores(local_ray, tmp_path):
    assert main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local",
                 "--results", str(tmp_path / "ray"), "--device", "cpu", "--executor", "ray"]) == 0
    assert main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local",
                 "--results", str(tmp_path / "serial"), "--device", "cpu"]) == 0
    ray_runs, serial_runs = (sorted(p.name for p in (tmp_path / kind / "runs").iterdir()) for kind in ("ray", "serial"))
    assert ray_runs == serial_runs and ray_runs
    for key in ray_runs:
        assert (tmp_path / "ray" / "runs" / key / "records.csv").read_bytes() == \
            (tmp_path / "serial" / "runs" / key / "records.csv").read_bytes()


def test_gflkit_notebook_passes_executor_and_address_as_parameters(monkeypatch, tmp_path):
    papermill = pytest.importorskip("papermill")
    seen = {}
    monkeypatch.setattr(papermill, "execute_notebook",
                        lambda source, output, parameters, **kw: seen.update(parameters) or Path(output).write_text("{}"))
    monkeypatch.setattr("gflkit.executors.check_ray_address", lambda address: None)  # no cluster at "head" here
    assert main(["notebook", "quickstart", "--results", str(tmp_path), "--executor", "ray",
                 "--ray-address", "ray://head:10001", "--device", "cpu"]) == 0
    assert seen["executor"] == "ray" and seen["ray_address"] == "ray://head:10001" and seen["device"] == "cpu"


def test_gflkit_notebook_rejects_an_unknown_executor_before_a_kernel_starts(tmp_path, capsys):
    pytest.importorskip("papermill")
    assert main(["notebook", "quickstart", "--results", str(tmp_path), "--executor", "bogus"]) == 2
    assert "unknown executor 'bogus'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_a_closed_ray_address_fails_at_once_and_other_forms_are_left_to_ray():
    from gflkit.executors import check_ray_address

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
        with pytest.raises(ConnectionError, match=f"no Ray cluster answers at {address} .*waited up to 5 s"):
            check_ray_address(address)
    assert time.monotonic() - started < 10
    check_ray_address("auto")  # Ray's own lookup of a running local cluster, answered by Ray at once


@pytest.mark.parametrize("reply", [b"", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"])
def test_a_listener_that_is_not_ray_fails_in_one_line_within_the_timeout(reply):
    """A port that accepts connections, silent or speaking another protocol, is not taken for Ray."""
    pytest.importorskip("grpc")
    from gflkit.executors import check_ray_address

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = server.accept()
                connection.sendall(reply)

    threading.Thread(target=answer, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(ConnectionError) as failure:
            check_ray_address(f"127.0.0.1:{port}", timeout=2)
    finally:
        server.close()
    assert f"something listens at 127.0.0.1:{port} but it is not a Ray cluster" in str(failure.value)
    assert "\n" not in str(failure.value) and time.monotonic() - started < 6


def test_a_running_ray_passes_the_address_check(local_ray):
    from gflkit.executors import check_ray_address

    check_ray_address(local_ray.get_runtime_context().gcs_address)


class FakeRay:
    """What ``connect`` calls of Ray, recorded."""

    def __init__(self):
        self.calls = []

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        self.calls.append(kwargs)


def test_a_cluster_named_in_ray_address_is_connected_to_without_local_resources(monkeypatch):
    """Ray refuses num_cpus when it connects to a cluster, as it does when $RAY_ADDRESS names one."""
    from gflkit.executors import connect

    monkeypatch.setenv("RAY_ADDRESS", "auto")
    ray = FakeRay()
    connect(ray)
    assert ray.calls == [{"address": "auto"}]
    monkeypatch.delenv("RAY_ADDRESS")
    ray = FakeRay()
    connect(ray)
    assert ray.calls == [{"num_cpus": os.cpu_count(), "include_dashboard": False}], "no address: a local Ray"


def test_an_unreachable_ray_address_from_the_environment_fails_in_one_line(monkeypatch):
    from gflkit.executors import connect

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    ray = FakeRay()
    with pytest.raises(ConnectionError, match=f"no Ray cluster answers at 127.0.0.1:{port}"):
        connect(ray)
    assert ray.calls == []
