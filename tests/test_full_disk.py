"""A full disk, for real: a size-limited tmpfs where this machine lets the test mount one.

The other full-disk tests simulate ``ENOSPC``; these fill an actual file system, so what the kernel, torch's zip
writer and papermill do when space runs out is what is checked. Mounting needs the right to mount (root with
``CAP_SYS_ADMIN``, as on the development machine); elsewhere the tests say so and skip.
"""
import contextlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pandas as pd
import pytest
import torch

from gflkit.atomic import DiskFullError
from gflkit.results import ResultStore


@contextlib.contextmanager
def small_filesystem(parent: Path, size: str):
    """A tmpfs of ``size`` mounted on a fresh folder under ``parent``, unmounted afterwards."""
    folder = parent / f"small-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    mounted = shutil.which("mount") and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True).returncode == 0
    if not mounted:
        pytest.skip("this machine does not let the test mount a size-limited file system (needs CAP_SYS_ADMIN)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_storing_a_run_on_a_full_disk_says_so_and_leaves_nothing_half_written(tmp_path):
    with small_filesystem(tmp_path, "96k") as disk:
        store = ResultStore(disk / "runs")
        config = {"method": "fedavg", "seed": 0}
        records = pd.DataFrame({"round": range(20_000), "accuracy": 0.5})  # several hundred KiB of CSV
        with pytest.raises(DiskFullError) as failure:
            store.save(config, records, {"adjacency": torch.zeros(200, 200)})
        said = str(failure.value)
        assert "no space left to write" in said and "MiB free there" in said and "\n" not in said
        leftovers = [p for p in (disk / "runs").rglob("*") if p.is_file() and p.name != "lock"]
        assert not [p for p in leftovers if p.name.endswith(".tmp")], "no temporary file left behind"
        assert store.load(config) is None, "a run whose files could not all be written is not finished"


def test_a_notebook_whose_results_folder_fills_up_exits_2_in_one_line(tmp_path):
    with small_filesystem(tmp_path, "160k") as disk:
        env = {**os.environ, "GFLKIT_PROGRESS": "off"}
        done = subprocess.run([sys.executable, "-m", "gflkit.cli", "notebook", "quickstart", "--profile", "smoke",
                               "--results", str(disk / "quickstart")], env=env, capture_output=True, text=True,
                              timeout=600)
        said = done.stderr.strip().splitlines()
        assert done.returncode == 2 and said, done.stderr[-2000:]
        assert said[-1].startswith("gflkit notebook: quickstart") and "no space left to write" in said[-1], said[-1]
        assert ".running" not in said[-1], "the file is named where it lives, not through the staging folder"
        assert "no earlier success in that folder" in said[-1]
        assert not list((disk / "quickstart").glob(".*.running")), "the failed execution's staging is discarded"
        assert not (disk / "quickstart" / "table.csv").exists(), "no table of the failed execution is published"
