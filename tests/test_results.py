import dataclasses
import hashlib
import json
import os
import re
import signal
import socket
import time
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np
import pandas as pd
import pytest
import torch

from gflkit.experiment import RunConfig, run, stored_artifacts, stored_key
from gflkit.results import ResultStore, atomic_write_text, config_key
from gflkit.runtime import Runtime


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


def test_atomic_write_leaves_the_permissions_a_plain_write_would(tmp_path):
    import os
    import stat

    previous = os.umask(0o022)
    try:
        created = tmp_path / "shared.csv"
        atomic_write_text(created, "a")
        assert stat.S_IMODE(created.stat().st_mode) == 0o644, "readable by the other readers of a shared folder"
        os.chmod(created, 0o600)
        atomic_write_text(created, "b")
        assert stat.S_IMODE(created.stat().st_mode) == 0o600, "an existing file keeps its own permissions"
    finally:
        os.umask(previous)


def test_artifacts_are_stored_beside_the_records(tmp_path):
    store = ResultStore(tmp_path)
    config = {"method": "fedska", "seed": 1}
    with pytest.raises(FileNotFoundError, match="no finished run"):
        store.load_artifacts(config)
    store.save(config, pd.DataFrame({"round": [1]}), {"adjacency": torch.eye(3)})
    assert torch.equal(store.load_artifacts(config)["adjacency"], torch.eye(3))
    store.save({"method": "fedavg"}, pd.DataFrame({"round": [1]}))
    assert store.load_artifacts({"method": "fedavg"}) == {}


def test_artifacts_saved_on_a_gpu_load_on_a_machine_without_one(tmp_path, monkeypatch):
    """A run computed on CUDA stores CUDA tensors; tag the CPU tensor as one (the saving side of a GPU
    machine) and check that the store reads it back onto the CPU here."""
    as_if_cuda = (0, lambda storage: "cuda:0" if storage.device.type == "cpu" else None, lambda obj, location: None)
    store = ResultStore(tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "_package_registry", [as_if_cuda, *torch.serialization._package_registry])
        store.save({"method": "fedu"}, pd.DataFrame({"round": [1]}), {"adjacency": torch.eye(2)})
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):  # what a plain torch.load does with such a file here
            torch.load(store.folder({"method": "fedu"}) / "artifacts.pt", weights_only=True)
    loaded = store.load_artifacts({"method": "fedu"})["adjacency"]
    assert loaded.device.type == "cpu" and torch.equal(loaded, torch.eye(2))
    (store.folder({"method": "fedu"}) / "manifest.json").unlink()  # stored before manifests: checked, then adopted
    assert torch.equal(store.load_artifacts({"method": "fedu"})["adjacency"], torch.eye(2))
    assert (store.folder({"method": "fedu"}) / "manifest.json").exists(), "adopted, not set aside as damaged"


TWO_WRITERS = """
import sys
from gflkit.executors import run_grid
from gflkit.experiment import RunConfig
from gflkit.results import ResultStore
from gflkit.runtime import Runtime

configs = [RunConfig(dataset="digits", num_clients=4, method=m, rounds=6, seed=s, partition="iid") for m in ("fedavg", "local") for s in (0, 1)]
records = run_grid(configs, Runtime(device="cpu", store=ResultStore(sys.argv[1])))
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
    assert len(runs) == 4 and all(sorted(p.name for p in run.iterdir()) == ["config.json", "manifest.json", "records.csv"]
                              for run in runs)


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


@pytest.mark.parametrize("content", [b"", b"\xff\xfe not text"])
def test_a_lock_that_names_no_owner_is_stale_after_a_bounded_wait(tmp_path, content):
    """What a full disk leaves: the lock file created, its owner never written. Fresh, it is being written and
    waited for; once older than LOCK_WRITE_GRACE_S it is taken over, so no later run hangs on it."""
    from gflkit import results

    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    store.folder(config).mkdir(parents=True)
    lock = store.folder(config) / "lock"
    lock.write_bytes(content)
    with store._lock_if_free(config) as held:
        assert not held, "a lock being written is not taken over at once"
    old = time.time() - results.LOCK_WRITE_GRACE_S - 1
    os.utime(lock, (old, old))
    with store.lock(config, poll=0.01):
        assert lock.read_text().endswith(f" {os.getpid()}")
    assert not lock.exists()


def test_a_lock_whose_owner_cannot_be_written_is_removed_and_the_error_raised(tmp_path, monkeypatch):
    import errno

    def full_disk(fd, mode):
        os.close(fd)
        raise OSError(errno.ENOSPC, "No space left on device")

    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    monkeypatch.setattr(os, "fdopen", full_disk)
    with pytest.raises(OSError, match="No space left"):
        with store.lock(config, poll=0.01):
            pass
    assert not (store.folder(config) / "lock").exists(), "no empty lock is left to wedge the next run"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"),
                                   RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 13120 vs 13014")])
def test_a_full_disk_is_one_line_naming_the_file_and_the_free_space(tmp_path, error):
    from gflkit.atomic import DiskFullError, atomic_write

    target = tmp_path / "runs" / "records.csv"
    with pytest.raises(DiskFullError) as failure:
        with atomic_write(target) as handle:
            handle.write(b"half")
            raise error
    said = failure.value.strerror
    assert said.startswith(f"no space left to write {target} (") and "MiB free there" in said and "\n" not in said
    assert not target.exists() and not list(target.parent.iterdir()), "no temporary file left behind"
    with pytest.raises(ValueError, match="other"):  # anything else propagates as it is
        with atomic_write(target) as handle:
            raise ValueError("other")


def test_precompute_on_a_full_disk_exits_2_with_one_line(tmp_path, monkeypatch, capsys):
    import errno

    from gflkit import atomic
    from gflkit.cli import main

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", no_space)
    monkeypatch.setenv("GFLKIT_PROGRESS", "off")
    code = main(["precompute", "quickstart", "--profile", "smoke", "--method", "local", "--results", str(tmp_path),
                 "--device", "cpu"])
    said = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(said) == 1 and said[0].startswith("gflkit precompute: no space left to write ")


def test_a_waiting_run_says_once_which_folder_and_whose_lock_it_waits_for(tmp_path, capfd):
    import threading

    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    store.folder(config).mkdir(parents=True)
    lock = store.folder(config) / "lock"
    lock.write_text(f"{socket.gethostname()} {os.getppid()}")  # a live process holds it
    threading.Timer(0.3, lock.unlink).start()
    with store.lock(config, poll=0.05):
        pass
    said = capfd.readouterr().err
    assert said.count("gflkit: waiting for the run in") == 1
    assert str(store.folder(config)) in said and f"{socket.gethostname()} {os.getppid()}" in said


def test_runs_stored_by_a_gpu_machine_are_read_without_one_and_others_refused_clearly(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    store = ResultStore(tmp_path)
    computed = run(TINY, Runtime(device="cpu"), progress=False)
    store.save(stored_key(TINY, "cuda"), computed.drop(columns=["method", "seed", "evaluate"]))  # as a GPU left it
    read = run(TINY, Runtime(device="cuda", store=store), progress=False)
    pd.testing.assert_frame_equal(read, computed)
    with pytest.raises(RuntimeError, match="run fedu seed=1 is not stored under device 'cuda' and torch sees no CUDA"):
        run(dataclasses.replace(TINY, seed=1), Runtime(device="cuda", store=store), progress=False)
    assert [p.name for p in tmp_path.iterdir()] == [store.folder(stored_key(TINY, "cuda")).name], \
        "the refused run leaves nothing behind"


# --- damaged runs are set aside and recomputed, never used (issue #25 §2) -------------------------------

#: A run of a method that leaves artifacts (FedU's client graph), computed in well under a second.
TINY = RunConfig(dataset="digits", num_clients=4, partition="iid", max_samples=300, rounds=2, batch_size=16, lr=0.05,
                 method="fedu")


class StoredRun(NamedTuple):
    """A finished run in a store: the store, its stored key, its folder, the records :func:`run` returned,
    those stored (without the columns :func:`run` adds) and its artifacts."""

    store: ResultStore
    key: dict
    folder: Path
    records: pd.DataFrame
    stored: pd.DataFrame
    artifacts: dict


@pytest.fixture
def stored_run(tmp_path) -> StoredRun:
    store = ResultStore(tmp_path / "runs")
    records = run(TINY, Runtime(device="cpu", store=store), progress=False)
    key = stored_key(TINY, "cpu")
    return StoredRun(store, key, store.folder(key), records, records.drop(columns=["method", "seed", "evaluate"]),
                     stored_artifacts(TINY, Runtime(device="cpu", store=store)))


def count_computations(monkeypatch) -> list[int]:
    """Count the runs that :func:`gflkit.experiment.run` computes from here on (one item each)."""
    import gflkit.experiment as experiment

    computed, original = [], experiment._compute
    monkeypatch.setattr(experiment, "_compute", lambda *args: computed.append(1) or original(*args))
    return computed


def set_aside_folders(folder: Path) -> list[Path]:
    """The folders a damaged run of ``folder`` was moved to."""
    return sorted(folder.parent.glob(f"{folder.name}.damaged-*"))


def cut_at_a_line_boundary(path: Path) -> None:
    """Keep the first half of the lines: a shorter file that pandas parses without complaint."""
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[: len(lines) // 2]))
    assert 0 < len(pd.read_csv(path)) < len(lines) - 1, "the cut file still parses as a (shorter) run"


def garble(path: Path) -> None:
    """Random bytes ending with a line break, as long as the file."""
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size - 1) + b"\n")


def empty(path: Path) -> None:
    path.write_bytes(b"")


def cut_in_half(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edit_manifest(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """A damage that rewrites the manifest at ``path`` with ``change`` applied to its fields."""
    def spoil(path: Path) -> None:
        manifest = json.loads(path.read_text())
        change(manifest)
        path.write_text(json.dumps(manifest))
    return spoil


DAMAGES: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "truncated records": ("records.csv", cut_at_a_line_boundary, "records.csv does not match manifest.json"),
    "garbled records": ("records.csv", garble, "records.csv does not match manifest.json"),
    "empty records": ("records.csv", empty, "records.csv does not match manifest.json"),
    "manifest without records": ("records.csv", Path.unlink, "records.csv is missing"),
    "damaged artifacts": ("artifacts.pt", cut_in_half, "artifacts.pt does not match manifest.json"),
    "garbled manifest": ("manifest.json", garble, "manifest.json is unreadable"),
    "manifest without its records' hash": ("manifest.json", edit_manifest(lambda m: m["sha256"].pop("records.csv")),
                                           "manifest.json does not list records.csv"),
    "manifest with another row count": ("manifest.json", edit_manifest(lambda m: m.update(rows=m["rows"] + 1)),
                                        "records.csv holds 8 rows, manifest.json says 9"),
    "manifest naming a device": ("manifest.json", edit_manifest(lambda m: m["sha256"].update({"/dev/zero": "0"})),
                                 "manifest.json lists '/dev/zero', which is not a file of the run's folder"),
}


def make_fifo(path: Path) -> None:
    """Replace ``path`` with a FIFO nothing writes to: reading it with a plain ``open`` would block forever."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)


@pytest.mark.parametrize("name", ["records.csv", "manifest.json", "lock"])
def test_a_fifo_in_a_stored_run_never_hangs_a_load(stored_run, monkeypatch, name):
    """A FIFO planted as a run's records, its manifest or its lock: the load goes on within seconds (the run
    set aside and recomputed, or the lock judged stale), never blocked on the FIFO."""
    monkeypatch.setattr("gflkit.results.LOCK_WRITE_GRACE_S", 0.0)
    make_fifo(stored_run.folder / name)
    if name == "lock":
        (stored_run.folder / "records.csv").unlink()  # a damaged run: set aside under its lock
    signal.signal(signal.SIGALRM, lambda *args: pytest.fail(f"a load blocked on the FIFO {name}"))
    signal.alarm(60)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the set-aside warning, tested above
            records = run(TINY, Runtime(device="cpu", store=stored_run.store), progress=False)
    finally:
        signal.alarm(0)
    pd.testing.assert_frame_equal(records, stored_run.records)


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_run_is_set_aside_with_a_warning_and_recomputed(stored_run, monkeypatch, damage):
    name, spoil, fault = DAMAGES[damage]
    spoil(stored_run.folder / name)
    damaged = {p.name: p.read_bytes() for p in stored_run.folder.iterdir()}
    computed = count_computations(monkeypatch)
    with pytest.warns(RuntimeWarning, match=re.escape(f"stored run {stored_run.folder} is damaged: {fault}")):
        records = run(TINY, Runtime(device="cpu", store=stored_run.store), progress=False)
    pd.testing.assert_frame_equal(records, stored_run.records)
    assert computed == [1], "the damaged run is recomputed by the normal path"
    [aside] = set_aside_folders(stored_run.folder)
    assert {p.name: p.read_bytes() for p in aside.iterdir()} == damaged, "the damaged files are kept, unchanged"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the recomputed run verifies
        pd.testing.assert_frame_equal(stored_run.store.load(stored_run.key), stored_run.stored)
        assert torch.equal(stored_artifacts(TINY, Runtime(device="cpu", store=stored_run.store))["adjacency"],
                           stored_run.artifacts["adjacency"])


def test_load_artifacts_sets_a_damaged_run_aside_and_reports_it_unfinished(stored_run):
    cut_in_half(stored_run.folder / "artifacts.pt")
    with pytest.warns(RuntimeWarning, match=re.escape(str(stored_run.folder)) + ".*artifacts.pt does not match"):
        with pytest.raises(FileNotFoundError, match="no finished run"):
            stored_artifacts(TINY, Runtime(device="cpu", store=stored_run.store))
    assert len(set_aside_folders(stored_run.folder)) == 1
    assert stored_run.store.load(stored_run.key) is None


def test_save_writes_a_manifest_of_the_exact_bytes_stored_and_a_good_run_round_trips(tmp_path):
    store, config = ResultStore(tmp_path), {"method": "fedu", "seed": 0}
    records = pd.DataFrame({"round": [1, 1, 2], "client": [0, 1, 0], "accuracy": [50.0, 75.5, float("nan")]})
    store.save(config, records, {"adjacency": torch.eye(3)})
    folder = store.folder(config)
    assert json.loads((folder / "manifest.json").read_text()) == {
        "rows": 3,
        "sha256": {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in ("artifacts.pt", "records.csv")},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pd.testing.assert_frame_equal(store.load(config), records)
        assert torch.equal(store.load_artifacts(config)["adjacency"], torch.eye(3))


def test_a_legacy_run_without_manifest_is_accepted_and_adopted(stored_run):
    manifest = (stored_run.folder / "manifest.json").read_text()
    (stored_run.folder / "manifest.json").unlink()  # as stored before manifests existed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = stored_run.store.load(stored_run.key)
    pd.testing.assert_frame_equal(loaded, stored_run.stored)
    assert (stored_run.folder / "manifest.json").read_text() == manifest, "adopted: its manifest is written"
    cut_at_a_line_boundary(stored_run.folder / "records.csv")
    with pytest.warns(RuntimeWarning, match="records.csv does not match"):
        assert stored_run.store.load(stored_run.key) is None, "damage after adoption is detected"


def cut_mid_line(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-7])


@pytest.mark.parametrize("spoil, fault", [
    (cut_mid_line, "records.csv does not end with a line break"),
    (garble, "records.csv cannot be parsed"),
    (empty, "records.csv is empty"),
], ids=["cut mid-line", "garbled", "empty"])
def test_a_legacy_run_that_does_not_parse_is_set_aside(stored_run, spoil, fault):
    (stored_run.folder / "manifest.json").unlink()
    spoil(stored_run.folder / "records.csv")
    with pytest.warns(RuntimeWarning, match=re.escape(f"stored run {stored_run.folder} is damaged: {fault}")):
        assert stored_run.store.load(stored_run.key) is None
    assert len(set_aside_folders(stored_run.folder)) == 1
    assert not (stored_run.folder / "manifest.json").exists()


def test_a_legacy_run_with_unloadable_artifacts_is_set_aside(stored_run):
    (stored_run.folder / "manifest.json").unlink()
    cut_in_half(stored_run.folder / "artifacts.pt")
    with pytest.warns(RuntimeWarning, match="artifacts.pt cannot be loaded"):
        assert stored_run.store.load(stored_run.key) is None


def test_a_save_killed_before_its_manifest_leaves_complete_records_that_are_adopted(tmp_path, monkeypatch):
    import gflkit.results as results

    store, config = ResultStore(tmp_path), {"method": "fedavg", "seed": 0}
    records = pd.DataFrame({"round": [1, 1], "client": [0, 1], "accuracy": [50.0, 75.5]})

    def killed(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(results, "_write_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        store.save(config, records)
    monkeypatch.undo()
    assert not (store.folder(config) / "manifest.json").exists()
    pd.testing.assert_frame_equal(store.load(config), records)
    assert (store.folder(config) / "manifest.json").exists()


def hold_lock_in_another_process(store: ResultStore, config: dict) -> None:
    """Write the run's lock as a live process (this test's parent) would hold it."""
    (store.folder(config) / "lock").write_text(f"{socket.gethostname()} {os.getppid()}")


def test_records_without_manifest_are_not_touched_while_another_process_holds_the_lock(stored_run):
    (stored_run.folder / "manifest.json").unlink()  # e.g. a save between its records and its manifest
    hold_lock_in_another_process(stored_run.store, stored_run.key)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stored_run.store.load(stored_run.key) is None, "unfinished until the writer releases its lock"
    assert not (stored_run.folder / "manifest.json").exists() and not set_aside_folders(stored_run.folder)


def test_a_damaged_run_is_set_aside_only_by_the_holder_of_its_lock(stored_run):
    cut_at_a_line_boundary(stored_run.folder / "records.csv")
    hold_lock_in_another_process(stored_run.store, stored_run.key)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert stored_run.store.load(stored_run.key) is None
    assert (stored_run.folder / "records.csv").exists() and not set_aside_folders(stored_run.folder)
    (stored_run.folder / "lock").unlink()
    with stored_run.store.lock(stored_run.key, poll=0.01):
        with pytest.warns(RuntimeWarning, match="records.csv does not match"):
            assert stored_run.store.load(stored_run.key) is None, "inside the lock: judged without waiting for it"
        assert sorted(p.name for p in stored_run.folder.iterdir()) == ["lock"], "the lock stays with the run"
    assert "lock" not in {p.name for p in set_aside_folders(stored_run.folder)[0].iterdir()}
    assert not (stored_run.folder / "lock").exists()


def test_a_set_aside_killed_midway_leaves_a_run_that_is_still_damaged(stored_run, monkeypatch):
    cut_at_a_line_boundary(stored_run.folder / "records.csv")
    moves, replace = [], os.replace

    def killed_after_the_first_move(source, target):
        if moves:
            raise KeyboardInterrupt
        moves.append(source)
        replace(source, target)

    monkeypatch.setattr(os, "replace", killed_after_the_first_move)
    with pytest.raises(KeyboardInterrupt):
        stored_run.store.load(stored_run.key)
    monkeypatch.undo()
    assert (stored_run.folder / "manifest.json").exists(), "the manifest is moved last"
    with pytest.warns(RuntimeWarning, match=re.escape(f"stored run {stored_run.folder} is damaged")):
        assert stored_run.store.load(stored_run.key) is None
    assert not (stored_run.folder / "records.csv").exists()
