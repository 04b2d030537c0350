"""benchmarks/paper_gpu.py, the driver of a GPU lease: its queue entries and the per-client rows it brings back."""
import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from gflkit.executors import run_grid
from gflkit.experiment import run
from gflkit.papers import benchmark
from gflkit.profiles import resolve_profile
from gflkit.runtime import Runtime

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "paper_gpu.py"


@pytest.fixture(scope="module")
def driver():
    spec = importlib.util.spec_from_file_location("paper_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["paper_gpu"] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["paper_gpu"]


def test_entries_name_an_sfl_variant_or_a_benchmark_cell_and_a_seed(driver):
    assert driver.parse_entry("lg_fedavg@2") == driver.Entry("sfl", "lg_fedavg", None, 2)
    assert driver.parse_entry("sfl:sfl_star") == driver.Entry("sfl", "sfl_star", None, 0)
    assert driver.parse_entry("benchmark:fedamp:a0.1@1") == driver.Entry("benchmark", "fedamp", "dirichlet α=0.1", 1)
    assert driver.parse_entry("benchmark:moon:noisy").setting == "noisy uplink s=0.1, q=5"


@pytest.mark.parametrize("entry, message", [
    ("sfl@x", "must be a non-negative integer"),
    ("benchmark:moon", "benchmark:LABEL:SETTING"),
    ("fedska:fedska", "sfl:LABEL"),
    ("sfl:nope", "unknown sfl label 'nope'"),
    ("benchmark:moon:q3", "unknown setting 'q3'"),
])
def test_a_bad_entry_exits_naming_what_is_wrong(driver, entry, message):
    with pytest.raises(SystemExit, match=message):
        driver.parse_entry(entry)


def test_a_benchmark_runs_rows_are_those_the_stored_grid_gives(driver, tmp_path):
    params = resolve_profile(benchmark.PROFILES, "smoke")
    cell = benchmark.method_run(params, "ditto", "shards q=2", 0)
    records = run(cell.config, Runtime(device="cpu"), progress=False)
    entry = driver.Entry("benchmark", "ditto", "shards q=2", 0)
    rows = driver.benchmark_clients(entry, records).reset_index(drop=True)
    expected = benchmark.client_scores(benchmark.own_protocol_records(run_grid([cell], Runtime(device="cpu"))))
    pd.testing.assert_frame_equal(rows, expected.reset_index(drop=True))
    assert list(rows.columns) == benchmark.CLIENT_COLUMNS and len(rows) == params.base["num_clients"]
