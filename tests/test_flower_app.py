"""The Flower app as a Flower user runs it: ``flwr run`` on the local simulation and on a SuperLink with
SuperNodes as real processes (loopback only; every process started is stopped), its run config, what
each side holds, and a SuperNode lost mid-round."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

pytest.importorskip("flwr")

from gflkit.algorithms import build_algorithm  # noqa: E402
from gflkit.engine import run_rounds  # noqa: E402
from gflkit.experiment import RunConfig, build_federation  # noqa: E402
from gflkit.federation import ServerFederation  # noqa: E402
from gflkit.flower.client import check_partitions  # noqa: E402
from gflkit.flower.local import LocalDeployment, app_run_config, failure_cause, run_config_argument  # noqa: E402
from gflkit.flower.methods import UnsupportedMethod  # noqa: E402
from gflkit.flower.replica import node_replica, server_replica  # noqa: E402
from gflkit.flower.run_config import RESULTS_ENV, output_path, results_folder, settings_from_run_config  # noqa: E402
from gflkit.runtime import Runtime

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "flower_app"
FLOWER = ROOT / "gflkit" / "flower"
#: Flower's documented API, the only Flower modules the public path may import
PUBLIC_FLOWER = {"flwr", "flwr.app", "flwr.clientapp", "flwr.serverapp", "flwr.serverapp.strategy"}


def template_config(**changes) -> RunConfig:
    """The run the template app project's [tool.flwr.app.config] describes, with ``changes`` (run-config keys)."""
    return settings_from_run_config(app_run_config(APP, changes)).config


def engine_records(config: RunConfig) -> pd.DataFrame:
    fed = build_federation(config, Runtime(device="cpu", local_training="sequential"))
    return run_rounds(fed, build_algorithm(config.method, **config.method_options), config.schedule(), progress=False)


def assert_engine_numbers(config: RunConfig, records_csv: Path) -> None:
    """The records a ServerApp wrote equal the engine's per client and round (both protocols)."""
    flower, engine = pd.read_csv(records_csv), engine_records(config)
    assert list(flower[["round", "client"]].itertuples(index=False)) == \
        list(engine[["round", "client"]].itertuples(index=False))
    columns = [c for c in engine.columns if c in flower.columns and c not in ("round", "client")]
    assert {"accuracy", "accuracy_local", "loss", "train_loss"} <= set(columns)
    np.testing.assert_allclose(flower[columns].to_numpy(float), engine[columns].to_numpy(float), rtol=0, atol=1e-6)


# --- the run config ---------------------------------------------------------------------------------------
def test_run_config_reads_fields_dotted_and_json_options():
    settings = settings_from_run_config({"dataset": "digits", "num-clients": 4, "method": "fedprox",
                                         "method-options.mu": 0.5, "partition-options": '{"shards_per_client": 2}',
                                         "clients-per-round": "none", "lr": 1, "records": "r.csv"})
    config = settings.config
    assert (config.num_clients, config.method_options["mu"], config.partition_options) == (4, 0.5, {"shards_per_client": 2})
    assert config.clients_per_round is None and config.lr == 1.0 and settings.records == "r.csv"


@pytest.mark.parametrize("run_config, says", [
    ({"dataset": "digits", "rounds": 2.5}, "'rounds' takes int, got 2.5"),
    ({"dataset": "digits", "rounds": True}, "'rounds' takes int, got True"),
    ({"dataset": "digits", "num-clinets": 3}, "unknown run config key 'num-clinets'"),
    ({"dataset": "digits", "method-options": "{mu: 1}"}, "'method-options' is not valid JSON"),
    ({"dataset": "digits", "lr.x": 1}, "'lr' is not a dict field"),
    ({"dataset": "digits", "round-timeout": -1}, "'round-timeout' takes a positive number"),
    ({"rounds": 3}, "needs a 'dataset'"),
    ({"dataset": "digits", "records": "/etc/cron.d/job.csv"}, "'records' takes a CSV file name inside the app's"),
    ({"dataset": "digits", "timing": "../../outside.csv"}, "'timing' takes a CSV file name inside the app's"),
    ({"dataset": "digits", "records": "records.txt"}, "got 'records.txt'"),
    ({"dataset": "digits", "method": "nope"}, "unknown method 'nope'"),
])
def test_run_config_mistakes_fail_in_one_line(run_config, says):
    with pytest.raises(ValueError) as error:
        settings_from_run_config(run_config)
    assert says in str(error.value) and "\n" not in str(error.value)


def test_the_server_writes_only_inside_its_results_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path / "flower"))
    folder = results_folder()
    assert output_path("records", "runs/a.csv", folder) == tmp_path / "flower" / "runs" / "a.csv"
    folder.mkdir()
    (folder / "escape").symlink_to(tmp_path)
    with pytest.raises(ValueError, match=r"'records': 'escape/a.csv' leads out of the results folder"):
        output_path("records", "escape/a.csv", folder)
    monkeypatch.delenv(RESULTS_ENV)
    monkeypatch.chdir(tmp_path)
    assert results_folder() == tmp_path.resolve() / "results" / "flower"


def test_run_config_argument_is_read_back_by_flower():
    from flwr.common.config import parse_config_args  # Flower's own reader of --run-config

    values = {"method": "sfl", "rounds": 5, "lr": 0.5, "x": True, "options": '{"shards_per_client": 2}', "q": "it's"}
    assert parse_config_args([run_config_argument(values)]) == values
    with pytest.raises(ValueError, match="both quote kinds"):
        run_config_argument({"s": "'\""})


# --- what each side holds --------------------------------------------------------------------------------
def test_a_node_holds_only_its_partition_and_the_server_none():
    config = template_config(method="sfl")
    full = build_federation(config, Runtime(device="cpu"))
    replicas = {k: node_replica(config, k, Runtime(device="cpu")) for k in range(full.num_clients)}
    for k, (replica, profile) in replicas.items():
        fed = replica.fed
        own = torch.cat([full.data.train_indices[k], full.data.test_indices[k]])
        torch.testing.assert_close(fed.data.x, full.data.x[own])  # exactly the client's samples, nothing else
        assert [len(i) for i in fed.data.train_indices] == [profile.num_train if j == k else 0 for j in range(6)]
        assert (profile.num_train, profile.num_test) == (int(full.num_train[k]), int(full.num_test[k]))
        torch.testing.assert_close(profile.label_counts, full.train_label_counts()[k])
    server = server_replica(config, {k: profile for k, (_, profile) in replicas.items()}, device="cpu")
    assert isinstance(server.fed, ServerFederation) and not hasattr(server.fed, "x")
    torch.testing.assert_close(server.fed.initial, full.initial)  # the same seeded initial model
    engine = build_algorithm(config.method, **config.method_options)
    engine.setup(full)
    torch.testing.assert_close(server.algorithm.adjacency, engine.adjacency)  # SFL's label graph from the reports
    with pytest.raises(RuntimeError, match="the server holds no client data"):
        server.fed.client_data(0)


def test_ifca_server_learns_first_cluster_choices_from_the_nodes():
    config = template_config(method="ifca", **{"method-options": '{"num_clusters": 3}'})
    full = build_federation(config, Runtime(device="cpu"))
    engine = build_algorithm(config.method, **config.method_options)
    engine.setup(full)
    profiles = {k: node_replica(config, k, Runtime(device="cpu"))[1] for k in range(full.num_clients)}
    server = server_replica(config, profiles, device="cpu")
    assert server.algorithm.assignments.tolist() == engine.assignments.tolist()


def test_num_partitions_must_match_the_run():
    profile = node_replica(template_config(), 0, Runtime(device="cpu"))[1]
    check_partitions(SimpleNamespace(node_config={"partition-id": 0, "num-partitions": 6}), profile)
    with pytest.raises(ValueError, match="num-partitions=4 but the run has 6 clients"):
        check_partitions(SimpleNamespace(node_config={"partition-id": 0, "num-partitions": 4}), profile)
    with pytest.raises(ValueError, match="partition-id 6 is not a client"):
        node_replica(template_config(), 6, Runtime(device="cpu"))


def test_graph_datasets_are_refused_in_one_line():
    from gflkit.flower.replica import check_config

    with pytest.raises(UnsupportedMethod, match="graph dataset 'cora' is not supported"):
        check_config(RunConfig(dataset="cora", num_clients=3, partition="louvain", model="vgae",
                               task="link_prediction"))


def test_public_path_imports_only_flowers_documented_api():
    for path in sorted(FLOWER.glob("*.py")):
        if path.name == "simulation.py":  # the in-process test helper, imported lazily
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            for name in names:
                if name.split(".")[0] == "flwr":
                    assert name in PUBLIC_FLOWER, f"{path.name} imports {name}"


def test_gflkit_flower_does_not_import_the_in_process_runtime():
    code = "import sys, gflkit.flower, gflkit.flower.app; print('gflkit.flower.simulation' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_in_process_helper_without_flower_internals_fails_in_one_line():
    code = ("import sys; sys.modules['flwr.server.superlink.fleet.vce.vce_api'] = None\n"
            "from gflkit.flower import run_flower")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode != 0
    assert "needs Flower internals" in done.stderr and "flwr run" in done.stderr.splitlines()[-1]


# --- flwr run: the local simulation and a deployment ----------------------------------------------------------
@pytest.fixture
def flower_home(tmp_path):
    """A private FLWR_HOME; the managed local SuperLink `flwr run` starts there is stopped afterwards."""
    home = tmp_path / "flwr_home"
    env = {**os.environ, "FLWR_HOME": str(home), "GFLKIT_THREADS": "1",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    yield env
    subprocess.run(["pkill", "-f", str(home / "local-superlink")], check=False)  # the managed SuperLink
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", str(home)], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the managed local SuperLink did not stop"
        time.sleep(0.2)


def test_gflkit_flower_runs_an_isolated_simulation_that_gives_the_engines_numbers(tmp_path, monkeypatch, capsys):
    """Its own SuperLink on free ports (none shared with another checkout), stopped when the run ends."""
    from gflkit.cli import main

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv("GFLKIT_THREADS", "1")
    assert main(["flower", str(APP), "--run-config", "method='fedavg' records='records.csv'"]) == 0, \
        capsys.readouterr().err[-3000:]
    assert_engine_numbers(template_config(method="fedavg"), tmp_path / "records.csv")
    assert subprocess.run(["pgrep", "-f", "gflkit-flower-"], capture_output=True).returncode == 1, "a process left"


RING_MEAN = '''"""A method of a package of its own, declared as a gflkit.methods entry point."""
from gflkit.algorithms import Method


class RingMean(Method):
    name = "ring_mean"
    personalised = True

    def aggregate_models(self, uploads):
        return 0.5 * (uploads.models + uploads.models.roll(1, dims=0))
'''


@pytest.fixture
def installed_method(tmp_path, monkeypatch):
    """A package ``ring_mean_method`` installed under ``tmp_path / "site"`` (on ``PYTHONPATH`` for every process
    the test starts) that declares the method ``ring_mean`` as an entry point; registered here too."""
    from gflkit.algorithms import ALGORITHMS, register_entry_points

    site = tmp_path / "site"
    (site / "ring_mean_method-1.0.dist-info").mkdir(parents=True)
    (site / "ring_mean_method.py").write_text(RING_MEAN)
    (site / "ring_mean_method-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ring-mean-method\nVersion: 1.0\n")
    (site / "ring_mean_method-1.0.dist-info" / "entry_points.txt").write_text(
        "[gflkit.methods]\nring_mean = ring_mean_method:RingMean\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    register_entry_points()
    yield
    ALGORITHMS.pop("ring_mean", None)


def test_a_method_installed_as_an_entry_point_runs_through_gflkit_flower(installed_method, tmp_path, monkeypatch,
                                                                           capsys):
    """The ServerApp's and the ClientApps' processes find the method by its entry point alone."""
    from gflkit.cli import main

    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    monkeypatch.setenv("GFLKIT_THREADS", "1")
    assert main(["flower", str(APP), "--run-config", "method='ring_mean' records='records.csv'"]) == 0, \
        capsys.readouterr().err[-3000:]
    assert_engine_numbers(template_config(method="ring_mean"), tmp_path / "records.csv")


@pytest.mark.parametrize("variable, below", [
    ("RAY_TMPDIR", "ray"),  # Ray's start-up cannot make its session folder: the simulation never starts
    (RESULTS_ENV, ""),  # the ServerApp cannot make its results folder after the rounds
])
def test_a_failed_flower_run_exits_non_zero_naming_the_cause(variable, below, tmp_path, monkeypatch, capsys):
    from gflkit.cli import main

    taken = tmp_path / "a-file"
    taken.write_text("")
    monkeypatch.setenv(variable, str(taken / below))
    monkeypatch.setenv("GFLKIT_THREADS", "1")
    assert main(["flower", str(APP), "--run-config", "rounds=1 records='records.csv'"]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("gflkit flower: flwr run failed: ") and "Error: " in last and "a-file" in last, last
    assert subprocess.run(["pgrep", "-f", "gflkit-flower-"], capture_output=True).returncode == 1, "a process left"


@pytest.mark.parametrize("run_config, says", [
    ("num-clinets=3", "unknown run config key 'num-clinets'"),
    ("method='fedska'", "method 'fedska' is not supported in Flower"),
    ("method='fedavgg'", "unknown method 'fedavgg'"),
    ("rounds=0", "rounds must be a positive"),
    ("records='/etc/x.csv'", "'records' takes a CSV file name inside"),
])
def test_gflkit_flower_refuses_a_mistake_before_anything_starts(run_config, says, monkeypatch, capsys):
    from gflkit.cli import main

    monkeypatch.setattr("gflkit.flower.local.LocalDeployment.__enter__", lambda self: pytest.fail("started"))
    assert main(["flower", str(APP), "--run-config", run_config]) == 2
    said = capsys.readouterr().err
    assert says in said and said.count("\n") == 1, said


def test_the_cause_of_a_failed_run_is_the_root_exception():
    output = ("INFO : Starting\nTraceback (most recent call last):\n  File x\nException: The current node timed out "
              "during startup.\n\nThe above exception was the direct cause of the following exception:\n"
              "RuntimeError: Simulation Runtime crashed.\nExit Code: 700\n")
    assert failure_cause(output) == "Exception: The current node timed out during startup."
    assert failure_cause("ERROR : boom\nExit Code: 700\nsee the docs\n") == "Exit Code: 700"


def test_flwr_run_local_simulation_gives_the_engines_numbers(flower_home, tmp_path):
    """Flower's own managed local SuperLink (fixed ports, shared by every checkout on the machine)."""
    method = "sfl"
    records = tmp_path / "records.csv"
    overrides = {"method": method, "records": records.name}
    done = subprocess.run([str(Path(sys.executable).parent / "flwr"), "run", str(APP), "--stream",
                           "--federation-config", "num-supernodes=6", "--run-config", run_config_argument(overrides)],
                          env={**flower_home, RESULTS_ENV: str(tmp_path)}, capture_output=True, text=True, timeout=600)
    assert records.exists(), (done.stdout + done.stderr)[-3000:]
    assert_engine_numbers(template_config(**overrides), records)


def test_deployment_superlink_and_supernodes_give_the_engines_numbers(tmp_path):
    records = tmp_path / "records.csv"
    overrides = {"method": "sfl", "num-clients": 3, "rounds": 2, "records": records.name}
    with LocalDeployment(3, env={"GFLKIT_THREADS": "1", RESULTS_ENV: str(tmp_path)}) as deployment:
        deployment.run(APP, overrides)
        processes = list(deployment.processes)
    assert all(process.poll() is not None for process in processes)  # every process started is stopped
    assert_engine_numbers(template_config(**overrides), records)


def test_a_supernode_lost_mid_round_stops_the_run_naming_its_partition():
    with LocalDeployment(3, env={"GFLKIT_THREADS": "1"}) as deployment:
        outcome: dict[str, str] = {}

        def run() -> None:
            try:
                deployment.run(APP, {"num-clients": 3, "rounds": 3, "round-timeout": 20.0})
            except RuntimeError as error:
                outcome["error"] = str(error)

        runner = threading.Thread(target=run)
        runner.start()
        log = deployment.home / "supernode-2.log"
        deadline = time.monotonic() + 300
        while "train message" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline and runner.is_alive(), "node 2 never received a train message"
            time.sleep(0.2)
        deployment.stop_node(2)
        runner.join(timeout=400)
    assert "no train reply from partition-id 2 in round 1 within 20 s" in outcome.get("error", "")
