import json

import pandas as pd

from gflkit.results import ResultStore, atomic_write_text, config_key


def test_config_key_is_order_independent_and_sensitive_to_values():
    assert config_key({"a": 1, "b": [1, 2]}) == config_key({"b": [1, 2], "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})
    assert len(config_key({"a": 1})) == 16


def test_store_round_trip_and_missing_runs(tmp_path):
    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    assert store.load(config) is None
    records = pd.DataFrame({"round": [1, 1], "client": [0, 1], "accuracy": [50.0, 75.5]})
    store.checkpoint(config).path.parent.mkdir(parents=True)
    store.checkpoint(config).path.write_bytes(b"partial")
    store.save(config, records)
    pd.testing.assert_frame_equal(store.load(config), records)
    assert json.loads((store.folder(config) / "config.json").read_text()) == config
    assert not store.checkpoint(config).exists(), "a finished run drops its checkpoint"


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "sub" / "file.txt"
    atomic_write_text(target, "hello")
    atomic_write_text(target, "world")
    assert target.read_text() == "world"
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]


def test_artifacts_are_stored_beside_the_records(tmp_path):
    import pytest
    import torch

    store = ResultStore(tmp_path)
    config = {"method": "fedska", "seed": 1}
    with pytest.raises(FileNotFoundError, match="no finished run"):
        store.load_artifacts(config)
    store.save(config, pd.DataFrame({"round": [1]}), {"adjacency": torch.eye(3)})
    assert torch.equal(store.load_artifacts(config)["adjacency"], torch.eye(3))
    store.save({"method": "fedavg"}, pd.DataFrame({"round": [1]}))
    assert store.load_artifacts({"method": "fedavg"}) == {}


TWO_WRITERS = """
import sys
from gflkit.experiment import RunConfig, run_grid
from gflkit.results import ResultStore

configs = [RunConfig(dataset="digits", num_clients=4, method=m, rounds=6, seed=s, partition="iid") for m in ("fedavg", "local") for s in (0, 1)]
records = run_grid(configs, store=ResultStore(sys.argv[1]), device="cpu")
records.to_csv(sys.argv[2], index=False)
"""


def test_two_processes_on_one_results_folder_both_finish_with_identical_complete_results(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    writers = [subprocess.Popen([sys.executable, "-c", TWO_WRITERS, str(tmp_path / "runs"), str(tmp_path / f"out{i}.csv")],
                                env=env, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for writer in writers:
        _, stderr = writer.communicate(timeout=300)
        assert writer.returncode == 0, stderr[-2000:]
    first, second = (pd.read_csv(tmp_path / f"out{i}.csv") for i in range(2))
    pd.testing.assert_frame_equal(first, second)
    assert first.groupby(["method", "seed"])["round"].max().eq(6).all() and len(first.groupby(["method", "seed"])) == 4
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 4 and all(sorted(p.name for p in run.iterdir()) == ["config.json", "records.csv"] for run in runs)


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path):
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    store.folder(config).mkdir(parents=True)
    (store.folder(config) / "lock").write_text(f"{socket.gethostname()} {int(dead.stdout)}")
    with store.lock(config, poll=0.01):
        assert (store.folder(config) / "lock").read_text().endswith(f" {__import__('os').getpid()}")
    assert not (store.folder(config) / "lock").exists()
