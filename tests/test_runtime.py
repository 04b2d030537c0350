"""The Runtime: where and how runs compute, validated once and passed as one object."""
import pytest
import torch

from gflkit.experiment import RunConfig, build_federation, run
from gflkit.results import ResultStore
from gflkit.runtime import Runtime, resolve_local_training

TINY = RunConfig(dataset="digits", num_clients=4, rounds=2, partition="iid", max_samples=200)


@pytest.mark.parametrize("fields, message", [
    ({"executor": "dask"}, "unknown executor 'dask'; choose one of ['serial', 'ray']"),
    ({"ray_address": "ray://head:10001"}, "ray_address='ray://head:10001' is only used by executor='ray'"),
    ({"local_training": "vectorised"}, "unknown local training 'vectorised'"),
    ({"threads": 0}, "threads must be a positive integer or None, got 0"),
    ({"threads": True}, "threads must be a positive integer or None, got True"),
])
def test_a_bad_runtime_fails_in_one_line_when_built(fields, message):
    with pytest.raises(ValueError) as failure:
        Runtime(**fields)
    assert message in str(failure.value) and "\n" not in str(failure.value)


def test_replace_validates_again_and_keeps_the_rest(tmp_path):
    runtime = Runtime(tmp_path, "cpu", ResultStore(tmp_path / "runs"), executor="ray")
    cpu = runtime.replace(device="cpu", executor="serial")
    assert (cpu.data_root, cpu.store, cpu.executor) == (tmp_path, runtime.store, "serial")
    with pytest.raises(ValueError, match="unknown executor"):
        runtime.replace(executor="threads")
    assert Runtime(device="cpu").torch_device() == torch.device("cpu")


def test_local_training_comes_from_the_runtime_else_the_environment(monkeypatch):
    monkeypatch.setenv("GFLKIT_LOCAL_TRAINING", "sequential")
    assert Runtime().training_mode() == "sequential" and Runtime(local_training="batched").training_mode() == "batched"
    assert build_federation(TINY, Runtime(device="cpu")).trainer.mode == "sequential"
    monkeypatch.setenv("GFLKIT_LOCAL_TRAINING", "bogus")
    with pytest.raises(ValueError, match=r"unknown local training 'bogus' \(argument or \$GFLKIT_LOCAL_TRAINING\)"):
        resolve_local_training()


def test_a_run_reads_and_writes_the_runtimes_store_and_uses_its_training_mode(tmp_path):
    runtime = Runtime(device="cpu", store=ResultStore(tmp_path), local_training="sequential")
    records = run(TINY, runtime, progress=False)
    assert set(records["local_training"]) == {"sequential"}
    assert len(list(tmp_path.iterdir())) == 1, "the run is stored in the runtime's store"
    again = run(TINY, runtime.replace(local_training="batched"), progress=False)
    assert again.equals(records), "a stored run is read back, whatever the training mode"
