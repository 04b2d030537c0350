"""benchmarks/whole_runs.py: what its floor counts, which runs it times, and the table it writes."""
import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from gflkit.experiment import RunConfig, build_federation
from gflkit.runtime import Runtime

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "whole_runs.py"


@pytest.fixture(scope="module")
def whole_runs():
    spec = importlib.util.spec_from_file_location("whole_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["whole_runs"] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules["whole_runs"]


def test_the_floor_counts_three_forward_passes_of_every_trained_sample(whole_runs):
    config = RunConfig(dataset="digits", num_clients=4, model="mclr", local_epochs=2, clients_per_round=2,
                       partition_options={"shards_per_client": 2})
    fed = build_federation(config, Runtime(data_root=None, device="cpu"))
    samples = sum(len(i) for i in fed.data.train_indices)
    forward = 2 * (64 * 64 + 64 * 10)  # MCLR on 8×8 digits: 64 inputs, 64 hidden units, 10 classes
    assert whole_runs.training_flops(fed, config) == pytest.approx(3 * forward * samples * 2 / 4 * 2)


def test_each_case_is_its_papers_run(whole_runs):
    fedavg, fedska, pdca = (whole_runs.case_config(case) for case in ("fedavg_a05", "fedska_a05", "jgesr_pdca"))
    assert (fedavg.method, fedavg.partition, fedavg.partition_options) == ("fedavg", "dirichlet", {"alpha": 0.5})
    assert (fedska.method, fedska.num_clients, fedska.rounds) == ("fedska", 100, 200)
    assert (pdca.method, pdca.channel["noise_scale"], pdca.model) == ("pdca", 0.1, "simple_cnn")
    assert whole_runs.case_config("fedavg_q2").partition_options == {"shards_per_client": 2}


def test_the_table_is_written_whole_and_rounded(whole_runs, tmp_path):
    rows = [{"case": "fedavg_q2", "run": "FedAvg", "cpu_s_per_round": 0.123456, "times_floor": 2.3456,
             "whole_run_cpu_min": 2.34567, "rounds": 200, "baseline": "HEAD~1", "baseline_cpu_s_per_round": 0.2,
             "baseline_times_floor": 3.0, "cost_ratio": 0.6172}]
    whole_runs.write_table(rows, 61.7, tmp_path / "whole_runs.csv")
    table = pd.read_csv(tmp_path / "whole_runs.csv")
    assert table.loc[0, ["cpu_s_per_round", "times_floor", "cost_ratio", "matmul_gflops"]].tolist() == [
        0.123, 2.35, 0.62, 62.0]
