"""``gflkit notebook`` / ``gflkit precompute`` refuse a mistake before any work: exit status 2, one line on
stderr naming what was wrong and how to fix it, nothing written in the results folder; the mistakes that
need no torch to see are refused without importing it."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gflkit.cli import main
from gflkit.notebooks import (NOTEBOOK_DIR, NotebookError, check_device, notebook_parameters, notebook_path,
                              profile_names, publishes_grids)

NOTEBOOKS = sorted(path.stem for path in NOTEBOOK_DIR.glob("*.ipynb"))
HINT = "choose a writable folder with --results (or GFLKIT_RESULTS)"

# Refused before torch is imported: (argv, the start of the one line on stderr).
WITHOUT_TORCH = [
    (["notebook", "nosuch"], "gflkit notebook: unknown notebook 'nosuch'; choose one of ['benchmark', 'fedcg', "),
    (["precompute", "nosuch"], "gflkit precompute: unknown notebook 'nosuch'; choose one of ['benchmark', 'fedcg', "),
    (["notebook", "../docs/results/quickstart_ci/quickstart"],
     "gflkit notebook: unknown notebook '../docs/results/quickstart_ci/quickstart'; choose one of ['benchmark', "),
    (["notebook", "quickstart", "--profile", "turbo"],
     "gflkit notebook: unknown profile 'turbo'; choose one of ['ci', 'paper', 'smoke']"),
    (["precompute", "fedska", "--profile", "turbo"],
     "gflkit precompute: unknown profile 'turbo'; choose one of ['ci', 'paper', 'paper1', 'smoke']"),
    (["notebook", "quickstart", "-p", "profile=turbo"],
     "gflkit notebook: unknown profile 'turbo'; choose one of ['ci', 'paper', 'smoke']"),
    (["notebook", "quickstart", "-p", "rounds=1"],
     "gflkit notebook: unknown parameter(s) ['rounds'] for notebook 'quickstart'; it accepts ['profile', "),
    (["notebook", "quickstart", "-p", "seeds=[0.5]"],
     "gflkit notebook: seeds must be one non-negative integer or a list of them, e.g. -p seeds=0"),
    (["notebook", "quickstart", "-p", "device=gpu"],
     "gflkit notebook: unknown device 'gpu'; choose auto (a CUDA GPU when present, else the CPU), cpu, cuda"),
    (["precompute", "fedska", "--device", "gpu"],
     "gflkit precompute: unknown device 'gpu'; choose auto (a CUDA GPU when present, else the CPU), cpu, cuda"),
    (["notebook", "quickstart", "-p", 'overrides={"rounds": 0}'],
     "gflkit notebook: override rounds must be a positive number of communication rounds, got 0"),
    (["notebook", "quickstart", "-p", 'overrides={"lr": "fast"}'],
     "gflkit notebook: override lr must be a finite number, got 'fast'"),
    (["notebook", "quickstart", "-p", 'overrides={"num_clients": 20, "max_samples": 10}'],
     "gflkit notebook: override max_samples (10) must be at least num_clients (20)"),
    (["notebook", "quickstart", "-p", 'overrides={"methods": []}'],
     "gflkit notebook: override sweep entry 'methods' is empty: every table of the notebook is built from it"),
    (["notebook", "fedska", "-p", 'overrides={"shards": []}'],
     "gflkit notebook: override sweep entry 'shards' is empty"),
    (["precompute", "flower"],
     "gflkit precompute: notebook 'flower' does not publish its experiment grids (gflkit/papers/flower.py "
     "needs a grids(profile) function); run it with `gflkit notebook`"),
]
COMMANDS = [["notebook", "quickstart"], ["precompute", "fedska"]]


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its content (None for a folder): what "nothing written" compares."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in folder.rglob("*")}


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line ``gflkit argv`` prints on stderr, after checking it exits 2 and prints nothing else."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and captured.err.endswith("\n")
    return captured.err.rstrip("\n")


@pytest.mark.parametrize("argv, message", [
    *WITHOUT_TORCH,
    (["precompute", "fedska", "--section", "table9"], "gflkit precompute: unknown section(s) ['table9']"),
    (["precompute", "fedska", "--seeds", "-1"], "gflkit precompute: seeds must be a non-empty list of non-negative"),
])
def test_a_mistake_is_one_line_exit_2_and_nothing_written(argv, message, tmp_path, capsys):
    results = tmp_path / "results"
    assert refusal([*argv, "--results", str(results)], capsys).startswith(message)
    assert not results.exists()


@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: argv[0])
def test_a_results_path_that_is_a_file_is_refused(command, tmp_path, capsys):
    results = tmp_path / "results"
    results.write_text("not a folder")
    before = snapshot(tmp_path)
    line = refusal([*command, "--results", str(results)], capsys)
    assert line == f"gflkit {command[0]}: results folder {results} is a file; {HINT}"
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: argv[0])
def test_a_results_path_inside_a_file_is_refused(command, tmp_path, capsys):
    (tmp_path / "file").write_text("not a folder")
    results = tmp_path / "file" / "deeper" / "results"
    before = snapshot(tmp_path)
    line = refusal([*command, "--results", str(results)], capsys)
    assert line == (f"gflkit {command[0]}: results folder {results} cannot be created: {tmp_path / 'file'} is a "
                    f"file; {HINT}")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: argv[0])
@pytest.mark.parametrize("results", ["/sys", "/sys/gflkit-results"], ids=["existing", "to-create"])
def test_a_read_only_results_folder_is_refused(command, results, capsys):
    """sysfs takes no new file even from root, so the probe really fails (a chmod-ed folder would not)."""
    line = refusal([*command, "--results", results], capsys)
    assert line == (f"gflkit {command[0]}: results folder {results} is not writable: no file can be created in "
                    f"/sys (Permission denied); {HINT}")
    assert not Path("/sys/gflkit-results").exists()


@pytest.mark.parametrize("command, device", [(["notebook", "quickstart", "-p"], "device=cuda"),
                                             (["precompute", "fedska", "--device"], "cuda")],
                         ids=["notebook", "precompute"])
def test_cuda_without_a_gpu_is_refused_before_any_data_are_read(command, device, monkeypatch, tmp_path, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    line = refusal([*command, device, "--results", str(tmp_path / "results")], capsys)
    assert line == (f"gflkit {command[0]}: device 'cuda' is not available: torch {torch.__version__} sees no CUDA GPU; "
                    f"choose device auto or cpu")
    assert snapshot(tmp_path) == {}


def test_a_cuda_index_beyond_the_gpus_present_names_those_present(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    check_device("cuda:0")
    with pytest.raises(NotebookError, match=r"^device 'cuda:1' is not available: torch sees 1 CUDA GPU\(s\), "
                                            r"cuda:0 to cuda:0; choose device auto or cpu$"):
        check_device("cuda:1")


def run_cli(argv: list[str], **env: str) -> tuple[int, list[str], set[str]]:
    """``python -X importtime -m gflkit.cli argv``: its exit status, its stderr lines other than the import
    timings, and the top-level packages it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gflkit.cli", *argv], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})
    timings = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[1].strip() for line in timings[1:]}  # timings[0] is the header
    assert done.stdout == "" and "gflkit.notebooks" in imported, "the refusal came from gflkit's checks"
    return done.returncode, [line for line in done.stderr.splitlines() if line not in timings], imported


@pytest.mark.parametrize("argv, message", [
    *WITHOUT_TORCH,
    (["notebook", "quickstart", "--results", "/sys"], "gflkit notebook: results folder /sys is not writable"),
    (["precompute", "fedska", "--results", "/sys"], "gflkit precompute: results folder /sys is not writable"),
])
def test_the_command_refuses_without_importing_torch(argv, message, tmp_path):
    results = ["--results", str(tmp_path / "results")] if "--results" not in argv else []
    returncode, said, imported = run_cli([*argv, *results])
    assert returncode == 2 and len(said) == 1 and said[0].startswith(message)
    assert not {"torch", "papermill", "pandas"} & {module.split(".")[0] for module in imported}
    assert not (tmp_path / "results").exists()


def test_the_command_refuses_cuda_where_torch_sees_no_gpu(tmp_path):
    returncode, said, _ = run_cli(["precompute", "fedska", "--device", "cuda", "--results", str(tmp_path)],
                                  CUDA_VISIBLE_DEVICES="")
    assert returncode == 2 and len(said) == 1
    assert said[0].startswith("gflkit precompute: device 'cuda' is not available: torch ")
    assert snapshot(tmp_path) == {}


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_what_the_checks_read_without_importing_is_what_the_code_declares(name):
    """Profiles and ``grids`` are read from gflkit.catalog and parameters from the notebook's JSON, without
    importing torch: they must agree with the imported paper module and with papermill."""
    papermill = pytest.importorskip("papermill")
    paper = importlib.import_module(f"gflkit.papers.{name}")
    assert profile_names(name) == list(paper.PROFILES) != []
    assert publishes_grids(name) == hasattr(paper, "grids")
    assert notebook_parameters(name) == list(papermill.inspect_notebook(str(notebook_path(name))))
