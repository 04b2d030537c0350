"""Notebook-level checks that nbval cannot express: parameter validation and the ci profile on real MNIST.

(nbval itself executes every notebook on its default smoke parameters: see `make test`.)
"""
import pandas as pd
import pytest

papermill = pytest.importorskip("papermill")

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from gflkit.notebooks import NotebookError, execute
from gflkit.papers import fedska, jgesr
from gflkit.report.pages import VERDICTS  # every verdict a claims table may give, "not run" aside


@pytest.mark.parametrize("profile, parameters, message", [
    ("turbo", {}, "unknown profile 'turbo'; choose one of ['ci', 'paper', 'smoke']"),
    ("smoke", {"overrides": {"dataset": "imagenet"}}, "unknown dataset 'imagenet'"),
    ("smoke", {"overrides": {"methods": ["fedavg", "fedsgd"]}}, "unknown method 'fedsgd'"),
    ("smoke", {"overrides": {"rounds": 0}}, "rounds must be a positive"),
    ("smoke", {"rounds": 1}, "unknown parameter(s) ['rounds'] for notebook 'quickstart'; it accepts"),
    ("smoke", {"seeds": [0.5]}, "seeds must be one non-negative integer or a list of them"),
    ("smoke", {"overrides": "{rounds: 3}"}, "overrides must be a dict with quoted keys"),
    ("smoke", {"overrides": {"method_options": {"mu": 1.0}}}, "override method_options must map a method"),
    ("smoke", {"overrides": {"rounds": 2.5}}, "rounds must be an integer, got 2.5"),
    ("smoke", {"overrides": {"rounds": True}}, "rounds must be an integer, got True"),
    ("smoke", {"overrides": {"lr": float("nan")}}, "lr must be a finite number, got nan"),
    ("smoke", {"overrides": {"methods": []}}, "sweep entry 'methods' is empty"),
    ("smoke", {"overrides": {"num_clients": 1900}},
     "the 'smoke' profile of quickstart does not fit its data: num_clients must lie in [1, 1797]"),
])
def test_bad_parameters_fail_before_a_kernel_starts(tmp_path, profile, parameters, message):
    with pytest.raises(NotebookError) as failure:
        execute("quickstart", profile, tmp_path, parameters)
    assert message in str(failure.value) and "\n" not in str(failure.value)
    assert not list(tmp_path.iterdir()), "nothing executed, nothing written"


def test_emptying_fedska_table1_shards_fails_before_a_kernel_starts(tmp_path):
    """Table 1 and every figure after it are built from the shard counts: emptied, cell 3 used to fail."""
    with pytest.raises(NotebookError, match="sweep entry 'shards' is empty"):
        execute("fedska", "smoke", tmp_path, {"overrides": {"shards": []}})
    assert not list(tmp_path.iterdir())


def test_one_seed_may_be_given_as_an_integer(monkeypatch, tmp_path):
    seen = {}
    monkeypatch.setattr(papermill, "execute_notebook",
                        lambda source, output, parameters, **kw: seen.update(parameters) or Path(output).write_text("{}"))
    execute("quickstart", "smoke", tmp_path, {"seeds": 1})
    assert seen["seeds"] == [1]


def test_a_failed_execution_keeps_the_good_notebook_and_sets_the_failed_one_aside(monkeypatch, tmp_path):
    (tmp_path / "quickstart.ipynb").write_text("good")

    def fail(source, output, **kwargs):
        Path(output).write_text(json.dumps({"error": "at the top"}))
        raise papermill.PapermillExecutionError(5, 7, "raise ValueError", "ValueError", "boom", [])

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    with pytest.raises(NotebookError, match=r"quickstart failed in cell 7: ValueError: boom — the failed notebook is"):
        execute("quickstart", "smoke", tmp_path)
    assert (tmp_path / "quickstart.ipynb").read_text() == "good"
    assert "at the top" in (tmp_path / "quickstart.failed.ipynb").read_text()
    assert not list(tmp_path.glob(".*running*")), "no staging folder left behind"


@pytest.mark.parametrize("saved, kept", [('{"cells": []}', True), ('{"cells": [{"cell_type": "co', False),
                                         (None, False)])
def test_a_full_disk_while_saving_the_executed_notebook_is_one_line(monkeypatch, tmp_path, saved, kept):
    """Whatever was saved is kept as the failed notebook only when it is whole (it can be opened)."""
    import errno

    (tmp_path / "quickstart.ipynb").write_text("good")

    def full(source, output, **kwargs):
        if saved is not None:
            Path(output).write_text(saved)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(papermill, "execute_notebook", full)
    with pytest.raises(NotebookError) as failure:
        execute("quickstart", "smoke", tmp_path)
    said = str(failure.value)
    assert "\n" not in said and said.startswith("quickstart: no space left to write ") and "MiB free there" in said
    assert ("the failed notebook is" if kept else "no complete failed notebook could be written") in said
    assert (tmp_path / "quickstart.failed.ipynb").exists() == kept
    assert (tmp_path / "quickstart.ipynb").read_text() == "good"
    assert not list(tmp_path.glob(".*running*"))


def test_a_success_clears_what_earlier_failures_and_dead_executions_left(monkeypatch, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".quickstart.{int(dead.stdout)}.running"
    older_layout = tmp_path / f".quickstart.{int(dead.stdout)}.running.ipynb"
    live = tmp_path / f".quickstart.{os.getppid()}.running"  # another execution still running
    for folder in (stale, live):
        folder.mkdir()
        (folder / "table.csv").write_text("partial")
    for path in (older_layout, tmp_path / "quickstart.failed.ipynb"):
        path.write_text("{}")
    seen = {}

    def succeed(source, output, **kwargs):
        seen["parent"] = os.environ.get("GFLKIT_PARENT_PID")
        Path(output).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", succeed)
    execute("quickstart", "smoke", tmp_path)
    assert not stale.exists() and not older_layout.exists(), "a dead execution's staging folder is removed"
    assert (live / "table.csv").exists(), "a live one's is kept"
    assert not (tmp_path / "quickstart.failed.ipynb").exists(), "no older failure beside the new good notebook"
    assert seen["parent"] == str(os.getpid()), "the kernel is told whose lifetime it shares (gflkit.lifeline)"


def test_a_relative_data_root_reaches_the_kernel_as_the_folder_the_user_meant(monkeypatch, tmp_path):
    """The kernel runs in notebooks/: a relative GFLKIT_DATA is made absolute against the caller's directory,
    both as the notebook's ``data_root`` and in the kernel's environment."""
    (tmp_path / "datasets").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GFLKIT_DATA", "datasets")
    seen = {}

    def succeed(source, output, parameters, **kwargs):
        seen["parameter"], seen["environment"] = parameters["data_root"], os.environ["GFLKIT_DATA"]
        Path(output).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", succeed)
    execute("quickstart", "smoke", tmp_path / "out")
    assert seen == {"parameter": str(tmp_path / "datasets"), "environment": str(tmp_path / "datasets")}
    assert os.environ["GFLKIT_DATA"] == "datasets", "this process's environment is left as it was"


def write_outputs(output, table, notebook="{}"):
    """What a notebook execution writes into its ``results_dir``: a table, a figure, the executed notebook."""
    folder = Path(output).parent
    (folder / "table.csv").write_text(table)
    (folder / "figure.png").write_bytes(b"png " + table.encode())
    Path(output).write_text(notebook)


def test_outputs_of_a_failed_execution_never_mix_with_the_previous_ones(monkeypatch, tmp_path):
    seen = {}

    def succeed(source, output, parameters, **kwargs):
        seen["results_dir"] = parameters["results_dir"]
        assert (Path(parameters["results_dir"]) / "runs").resolve() == (tmp_path / "runs").resolve(), \
            "runs are stored where every later execution finds them"
        write_outputs(output, "good", json.dumps({"cells": [{"source": f"results_dir = {parameters['results_dir']!r}"}]}))
        (Path(output).parent / "only_first.csv").write_text("first")

    monkeypatch.setattr(papermill, "execute_notebook", succeed)
    execute("quickstart", "smoke", tmp_path)
    assert (tmp_path / "table.csv").read_text() == "good" and (tmp_path / "only_first.csv").exists()
    notebook = (tmp_path / "quickstart.ipynb").read_text()
    assert str(tmp_path) in notebook and ".running" not in notebook, "the notebook names where its files are"
    assert seen["results_dir"] != str(tmp_path)

    def fail(source, output, **kwargs):
        write_outputs(output, "from the failed run")
        raise papermill.PapermillExecutionError(5, 7, "raise ValueError", "ValueError", "boom", [])

    monkeypatch.setattr(papermill, "execute_notebook", fail)
    with pytest.raises(NotebookError):
        execute("quickstart", "smoke", tmp_path)
    assert (tmp_path / "table.csv").read_text() == "good" and (tmp_path / "figure.png").read_bytes() == b"png good"
    assert (tmp_path / "quickstart.ipynb").read_text() == notebook
    assert not list(tmp_path.glob(".*running*"))

    monkeypatch.setattr(papermill, "execute_notebook", lambda source, output, **kwargs: write_outputs(output, "second"))
    execute("quickstart", "smoke", tmp_path)
    assert (tmp_path / "table.csv").read_text() == "second"
    assert not (tmp_path / "only_first.csv").exists(), "a file the previous success wrote and this one did not is gone"
    assert (tmp_path / "runs").is_dir() or not (tmp_path / "runs").exists()


def test_a_killed_execution_leaves_the_previous_outputs_and_its_staging_is_cleared_later(tmp_path):
    """A real ``gflkit notebook`` killed with SIGKILL while its kernel runs: the folder keeps the previous
    success's files, and the next execution discards the dead one's staging folder."""
    (tmp_path / "table.csv").write_text("previous")
    (tmp_path / "quickstart.ipynb").write_text("previous")
    env = {**os.environ, "GFLKIT_PROGRESS": "off"}
    process = subprocess.Popen([sys.executable, "-m", "gflkit.cli", "notebook", "quickstart", "--profile", "smoke",
                                "--results", str(tmp_path), "-p", 'overrides={"rounds": 200}'],
                               env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("runs/*/checkpoint.pt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    process.kill()
    process.wait()
    staged = list(tmp_path.glob(".quickstart.*.running"))
    assert staged and list(tmp_path.glob("runs/*/checkpoint.pt")), "the kernel was mid-run when the command died"
    assert (tmp_path / "table.csv").read_text() == "previous" and (tmp_path / "quickstart.ipynb").read_text() == "previous"
    from gflkit import staging

    deadline = time.monotonic() + 30  # the kernel ends with the command (gflkit.lifeline) and writes no more
    while staged[0].exists() and time.monotonic() < deadline:
        staging.remove_dead(tmp_path, "quickstart")
        time.sleep(0.5)
    assert not staged[0].exists() and (tmp_path / "runs").is_dir(), "staging cleared, the stored runs kept"


def test_a_killed_kernel_says_what_to_do(monkeypatch, tmp_path):
    from nbclient.exceptions import DeadKernelError

    def die(source, output, **kwargs):
        Path(output).write_text("{}")
        raise DeadKernelError("Kernel died")

    monkeypatch.setattr(papermill, "execute_notebook", die)
    with pytest.raises(NotebookError, match="the kernel died .* run the same command again .* resumes from its last"):
        execute("quickstart", "smoke", tmp_path)
    assert (tmp_path / "quickstart.failed.ipynb").exists() and not (tmp_path / "quickstart.ipynb").exists()


def test_a_profile_whose_required_data_are_missing_fails_with_the_files_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    with pytest.raises(NotebookError, match=r"needs data that are missing.*planetoid/Cora/raw/"):
        execute("fedvgae", "smoke", tmp_path / "out", {"data_root": str(tmp_path / "empty")})
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, message", [
    (["notebook", "nosuch"], "gflkit notebook: unknown notebook 'nosuch'; choose one of"),
    (["notebook", "quickstart", "--profile", "turbo"], "gflkit notebook: unknown profile 'turbo'"),
    (["notebook", "quickstart", "-p", "rounds=1"], "gflkit notebook: unknown parameter(s) ['rounds']"),
])
def test_cli_mistakes_are_one_line_and_exit_2(argv, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "gflkit.cli", *argv, "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().startswith(message) and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("from_environment", [False, True])
def test_an_unreachable_ray_cluster_is_one_line_and_exit_2_within_the_bounded_wait(tmp_path, from_environment):
    """Named with --ray-address, or in $RAY_ADDRESS (Ray's own variable) with no flag."""
    import os

    with socket.socket() as probe:  # a loopback port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    address = [] if from_environment else ["--ray-address", f"127.0.0.1:{port}"]
    env = {**os.environ, **({"RAY_ADDRESS": f"127.0.0.1:{port}"} if from_environment else {})}
    done = subprocess.run([sys.executable, "-m", "gflkit.cli", "notebook", "quickstart", "--profile", "smoke",
                           "--executor", "ray", *address, "--results", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"gflkit notebook: no Ray cluster answers at 127.0.0.1:{port} (Connection "
                                   "refused, waited up to 5 s): start one there (ray start --head) or name another "
                                   "with --ray-address")
    assert time.monotonic() - started < 60


@pytest.mark.integration
def test_quickstart_ci_profile_on_real_mnist(tmp_path, real_data_root):
    execute("quickstart", "ci", tmp_path, {"data_root": str(real_data_root)})
    table = pd.read_csv(tmp_path / "table.csv")
    assert len(table) == 9 and set(table["method"]) == {"local", "fedavg", "fedprox"}
    records = pd.read_csv(tmp_path / "records.csv")
    assert records["client"].nunique() == 100, "the ci profile federates 100 MNIST clients"
    per_run_round = records.groupby(["q", "method", "round"])["num_samples"].sum()
    assert (per_run_round == 14_000).all(), "pooled 70,000 MNIST samples, 20 % of each client's 700 held out"
    assert table["mean"].between(10, 100).all()
    comparison = pd.read_csv(tmp_path / "paper_vs_measured.csv")
    assert comparison["paper"].notna().all(), "every MNIST cell has a paper number beside it"
    for figure in ("learning_curves.png", "client_distribution.png", "partition.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_dataset_available_names_the_missing_file_and_the_fix(tmp_path, monkeypatch):
    from gflkit.data import dataset_available

    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    available, message = dataset_available("cifar10", tmp_path)
    assert not available
    assert "cifar-10-python.tar.gz is missing" in message and "gflkit data fetch cifar10" in message
    assert dataset_available("digits", tmp_path)[0], "embedded datasets need no files"


def test_a_skip_hint_names_the_exact_path_in_the_datasets_own_layout(tmp_path, monkeypatch):
    from gflkit.data import dataset_available

    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    available, message = dataset_available("cora", tmp_path)
    assert not available
    assert f"{tmp_path}/planetoid/Cora/raw/" in message and "holding planetoid/Cora/raw/" in message
    assert "cora/raw" not in message


def assert_claims_decided_from_clients(claims: pd.DataFrame, decided: pd.DataFrame) -> None:
    """The notebook's claims are what its paper module decides from the per-client CSV the notebook wrote:
    the same verdicts, differences and intervals, so a table or verdict the notebook shows is the library's."""
    shown = claims.set_index("claim").loc[decided["claim"]]
    columns = ["verdict", "difference", "interval", "noise model"]
    pd.testing.assert_frame_equal(shown[columns].reset_index(drop=True), decided[columns].reset_index(drop=True))


@pytest.mark.integration
def test_fedska_ci_profile_on_real_mnist(tmp_path, real_data_root):
    execute("fedska", "ci", tmp_path, {"data_root": str(real_data_root)})
    table1 = pd.read_csv(tmp_path / "table1_paper_vs_measured.csv")
    methods = {"local", "fedavg", "fedprox", "ditto", "ifca", "fedu", "sfl", "fedska"}
    assert set(table1["method"]) == methods
    assert set(table1["setting"]) == {"shards_2", "shards_5", "shards_10"}
    assert len(table1) == 8 * 3 * 3 and table1["paper"].notna().all()
    assert table1["measured"].between(0, 100).all()
    records = pd.read_csv(tmp_path / "table1_records.csv")
    assert records["client"].nunique() == 100
    table3 = pd.read_csv(tmp_path / "table3.csv")
    assert set(table3["setting"]) == {"given_graph", "learned_graph", "learned_graph_features_init",
                                      "no_structure_term"}
    assert sorted(pd.read_csv(tmp_path / "figure4_k.csv")["k"]) == [5, 30, 80]
    protocols = pd.read_csv(tmp_path / "table1_protocols.csv")
    assert len(protocols) == 24 and protocols[["server", "local"]].notna().all().all()
    assert dict(zip(protocols["method"], protocols["protocol"]))["ifca"] == "local"
    overlap = pd.read_csv(tmp_path / "overlap.csv")
    assert set(overlap["method"]) == {"local", "fedavg", "fedska"}
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) == 10 and set(claims["verdict"]) <= set(VERDICTS)
    assert_claims_decided_from_clients(claims, fedska.decide_from_clients(tmp_path, "ci"))
    for figure in ("figure3_learning_curves.png", "figure4_k_sensitivity.png", "figure5_learned_graph.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_jgesr_notebook_writes_table1_figures_and_claims(tmp_path):
    execute("jgesr", "smoke", tmp_path, {"overrides": {"rounds": 2}})
    table1 = pd.read_csv(tmp_path / "table1_paper_vs_measured.csv")
    paper_methods = {"pdca", "two_step", "fedavg", "fedprox", "cfl", "fedamp", "pfedgraph"}
    assert set(table1["method"]) == paper_methods | {"pdca_e"}  # pDCAe: our variant, no paper number
    assert set(table1["setting"]) == {"s_0.1", "s_0.2"}
    assert table1[table1["method"].isin(paper_methods)]["paper"].notna().all()
    assert table1[table1["method"] == "pdca_e"]["paper"].isna().all()
    assert sorted(pd.read_csv(tmp_path / "figure4_missing.csv")["missing"]) == [0.0, 0.1]
    same_matrix = pd.read_csv(tmp_path / "solvers_same_matrix.csv")
    assert list(same_matrix["solver"]) == ["two_step", "pdca (printed)", "pdca_e (pDCAe)"]
    assert same_matrix["F"].notna().all() and (same_matrix["graph gap at stop"] >= 0).all()
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) == 5 and set(claims["verdict"]) <= set(VERDICTS)
    assert_claims_decided_from_clients(claims, jgesr.decide_from_clients(tmp_path, "smoke"))
    clients = pd.read_csv(tmp_path / "table1_clients.csv")
    means = clients.groupby(["s", "method"])["accuracy"].mean()
    table = pd.read_csv(tmp_path / "table1.csv").set_index(["s", "method"])["mean"]
    pd.testing.assert_series_equal(table.sort_index(), means.sort_index(), check_names=False)
    for figure in ("figure3_accuracy_per_round.png", "figure4_missing_rates.png", "learned_graph_vs_labels.png",
                   "pdca_objective.png", "jgesr_scale.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_a_subset_of_methods_still_writes_every_claim_with_those_it_cannot_check_not_run(tmp_path, capfd):
    execute("quickstart", "smoke", tmp_path, {"overrides": {"methods": ["local", "fedavg"]}})
    streamed = capfd.readouterr()  # the kernel's output reached the terminal while it ran
    assert re.search(r"runs: (\d+)/\1 \(fedavg seed=0\)", streamed.err), "runs done / total with the current one"
    assert re.search(r"fedavg seed=0: +\d+%\|[# ]*\| \d+/15", streamed.err), "the round bar of a run"
    saved = (tmp_path / "quickstart.ipynb").read_text()
    assert "widget-view" not in saved and "runs: 1/" in saved, "progress is saved as readable text"
    assert "\\u001b[A" not in saved, "no cursor movements in the saved notebook"
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) == 3
    assert claims["verdict"].iloc[0] == "not run" and "fedprox" in claims["evidence"].iloc[0]
    assert set(claims["verdict"].iloc[1:]) <= set(VERDICTS)


def test_sfl_notebook_runs_with_its_optional_sections_emptied(tmp_path):
    """The shape of a GPU reading: Table 3's paper rows only, every other section emptied by an override."""
    emptied = {name: [] for name in ("readings", "table4", "timing_layers", "learn_steps", "frequency",
                                     "local_epoch_counts")}
    execute("sfl", "smoke", tmp_path, {"overrides": {**emptied, "table3": ["fedavg", "sfl", "sfl_star"], "rounds": 2}})
    assert not (tmp_path / "graph_mixing.csv").exists()
    claims = pd.read_csv(tmp_path / "claims.csv").set_index("claim")["verdict"]
    authors_step = [claim for claim in claims.index if "authors' code's local step" in claim]
    assert len(authors_step) == 1 and claims[authors_step[0]] == "not run"
    evidence = pd.read_csv(tmp_path / "claims.csv").set_index("claim")["evidence"][authors_step[0]]
    assert "sfl under the authors_code reading" in evidence, "names the missing reading, not the methods that ran"
    assert claims["SFL* (learned graph) beats SFL (given graph) on MNIST (Table 3)"] in VERDICTS


DECIDED_BY_THE_PAPER = ("quickstart", "fedska", "sfl", "jgesr", "fedvgae")
NOTEBOOKS = sorted(path.stem for path in (Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
#: a call that writes a file
FILE_WRITES = re.compile(r"\.to_csv\(|\bsave_figure\(|\.savefig\(|\.write_text\(|\.write_bytes\(|\.to_json\(|"
                         r"\bjson\.dump\(|\btorch\.save\(|\bopen\([^)]*[\"'][wax]b?[\"']|\bwrite_outputs\(")


def _code(name: str) -> str:
    notebook = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / f"{name}.ipynb").read_text())
    return "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code")


@pytest.mark.parametrize("name", DECIDED_BY_THE_PAPER)
def test_a_notebook_decides_its_claims_with_the_function_that_decides_a_committed_folder(name):
    """The notebook's tables come from its paper's ``derive``, which decides the claims with the paper's ``decide``;
    ``decide_from_clients`` reads the same frames back from a folder's CSVs and calls the same function, so the
    two cannot decide differently."""
    import importlib
    import inspect

    code = _code(name)
    assert re.search(r"\bderive\(", code), f"{name}.ipynb does not derive its tables with {name}.derive"
    assert not re.search(r"\bclaims_table\(|\bclaims\(|\bdecide\(", code), f"{name}.ipynb decides claims on its own"
    module = importlib.import_module(f"gflkit.papers.{name}")
    assert "decide(" in inspect.getsource(module.derive)
    assert "decide(" in inspect.getsource(module.decide_from_clients)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_notebook_writes_its_files_in_one_call(name):
    """A notebook's tables and figures are written by one ``write_outputs`` call: the file contract is its paper
    module's (``derive``), not ``to_csv`` calls spread through cells."""
    writes = FILE_WRITES.findall(_code(name))
    assert len(writes) <= 1, f"{name}.ipynb writes files in {len(writes)} places: {writes}"


def test_the_file_write_pattern_sees_every_kind_of_write():
    """The pattern the test above counts with recognises each way a cell could write a file."""
    cells = ['frame.to_csv(results / "a.csv")', 'plots.save_figure(fig, results / "a.png")', 'fig.savefig("a.png")',
             'path.write_text("x")', 'path.write_bytes(b"")', 'json.dump(x, handle)', 'torch.save(x, "a.pt")',
             'open("a.txt", "w")', "open(path, 'wb')", 'write_outputs(results, tables)']
    assert [len(FILE_WRITES.findall(cell)) for cell in cells] == [1] * len(cells)
    assert not FILE_WRITES.findall('pd.read_csv(results / "a.csv"); open(path).read(); tables["a.csv"] = frame')
