"""The ``gflkit`` command: ``precompute`` fills the result store a notebook reads."""
import re

import pytest

from gflkit.cli import main
from gflkit.papers.fedska import PROFILES, grids
from gflkit.profiles import resolve_profile
from gflkit.results import ResultStore
from gflkit.runtime import Runtime


def test_precompute_stores_exactly_the_runs_the_notebook_reads(tmp_path, capsys):
    assert main(["precompute", "fedska", "--profile", "smoke", "--section", "table3", "--results", str(tmp_path),
                 "--device", "cpu"]) == 0
    store = ResultStore(tmp_path / "runs")
    configs = [run.config for run in grids(resolve_profile(PROFILES, "smoke"), ["table3"])["table3"]]
    for config in configs:
        assert store.load({**config.to_dict(), "device": "cpu"}) is not None
    assert len(list((tmp_path / "runs").iterdir())) == len(configs) == 4
    assert "4 runs of fedska (smoke)" in capsys.readouterr().out


def test_precompute_refuses_an_unknown_executor_in_one_line(tmp_path, capsys):
    assert main(["precompute", "fedska", "--results", str(tmp_path), "--executor", "bogus"]) == 2
    said = capsys.readouterr().err
    assert "unknown executor 'bogus'" in said and said.count("\n") == 1
    assert not (tmp_path / "runs").exists()


def test_notebook_and_precompute_take_the_same_runtime_options():
    from gflkit.cli import build_parser

    commands = build_parser()._subparsers._group_actions[0].choices
    options = {name: {a.dest for a in commands[name]._actions} for name in ("notebook", "precompute")}
    assert {"device", "executor", "ray_address"} <= options["notebook"] & options["precompute"]


def test_precompute_can_select_methods(tmp_path):
    main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local",
          "--results", str(tmp_path), "--device", "cpu"])
    assert len(list((tmp_path / "runs").iterdir())) == 2  # local at the smoke profile's two shard settings


def test_precompute_runs_the_seeds_asked_for(tmp_path):
    main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local", "--seeds", "3",
          "--results", str(tmp_path), "--device", "cpu"])
    store = ResultStore(tmp_path / "runs")
    runs = grids(resolve_profile(PROFILES, "smoke", seeds=[3]), ["table1"])["table1"]
    local = [run.config for run in runs if run.config.method == "local"]
    assert {c.seed for c in local} == {3} and all(store.load({**c.to_dict(), "device": "cpu"}) is not None for c in local)


def test_fedvgae_grids_are_the_notebooks_runs_on_the_datasets_present(tmp_path):
    from graph_fixtures import write_planetoid

    from gflkit.data import registered
    from gflkit.papers import fedvgae

    spec, _ = write_planetoid(tmp_path, "cora")
    params = resolve_profile(fedvgae.PROFILES, "ci", seeds=[0, 1])
    with registered(spec):
        sections = fedvgae.grids(params, runtime=Runtime(data_root=tmp_path))
    assert {run.config.dataset for runs in sections.values() for run in runs} == {"cora"}, "CiteSeer / PolBlogs are absent"
    assert sections["table3"] == sorted(fedvgae.runs(params, "cora", "link_prediction"), key=lambda run: run.config.seed)
    assert [run.config.seed for run in sections["table4"]] == [0] * 8 + [1] * 8, "a first seed of every cell comes first"
    assert {run.labels["setting"] for run in sections["table5"]} == {"encoder", "first_layer", "all"}
    assert all(run.labels["setting"] == run.config.method_options["share"] for run in sections["table5"])
    assert {run.labels["setting"] for run in sections["table6"]} == set(fedvgae.COMPONENTS)
    assert len(sections["tables7_8"]) == 2 * (3 + 3)
    with pytest.raises(ValueError, match=re.escape("unknown section(s) ['table9']")):
        fedvgae.grids(params, ["table9"], runtime=Runtime(data_root=tmp_path))


def test_help_is_instant_it_imports_no_torch():
    import subprocess
    import sys

    code = ("import sys; from gflkit.cli import build_parser; build_parser().format_help(); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'torch_geometric', 'numpy', 'pandas'}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_notebook_help_lists_the_notebooks_their_profiles_and_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["notebook", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "``" not in out
    assert re.search(r"fedvgae\s+profiles: smoke, ci, paper", out) and re.search(r"quickstart\s+profiles:", out)
    assert "-p 'overrides={\"rounds\": 3}'" in out and "--threads 1" in out


def test_version(capsys):
    from importlib import metadata

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and capsys.readouterr().out.strip() == f"gflkit {metadata.version('gflkit')}"


def test_threads_before_or_after_the_command(monkeypatch, capsys):
    import torch

    from gflkit.cli import build_parser
    from gflkit.threads import limit_threads

    parser = build_parser()
    assert parser.parse_args(["--threads", "2", "precompute", "fedska"]).threads == 2
    assert parser.parse_args(["precompute", "fedska", "--threads", "1"]).threads == 1
    assert parser.parse_args(["precompute", "fedska"]).threads is None
    with pytest.raises(SystemExit) as exit_:
        parser.parse_args(["--threads", "0", "data", "list"])
    assert exit_.value.code == 2 and "expected a positive integer" in capsys.readouterr().err
    previous = torch.get_num_threads()
    for variable in ("GFLKIT_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(variable, "")
    try:
        assert limit_threads() is None and torch.get_num_threads() == previous  # nothing asked: torch's default
        monkeypatch.setenv("GFLKIT_THREADS", "1")
        assert limit_threads() == 1 and torch.get_num_threads() == 1
        assert limit_threads(2) == 2 and torch.get_num_threads() == 2
        import os
        assert os.environ["OMP_NUM_THREADS"] == "2", "a notebook kernel started now uses 2 threads too"
        monkeypatch.setenv("GFLKIT_THREADS", "many")
        with pytest.raises(ValueError, match="GFLKIT_THREADS='many' is not a number of threads"):
            limit_threads()
        with pytest.raises(ValueError, match="threads must be a positive integer"):
            limit_threads(0)
    finally:
        torch.set_num_threads(previous)


def test_text_progress_bars_are_plain_text_on_stderr(monkeypatch, capsys):
    from gflkit.progress import progress_bar

    monkeypatch.setenv("GFLKIT_PROGRESS", "text")
    assert list(progress_bar(range(3), desc="rounds", leave=True)) == [0, 1, 2]
    err = capsys.readouterr().err
    assert re.search(r"rounds: 100%\|#+\| 3/3", err)
    monkeypatch.setenv("GFLKIT_PROGRESS", "off")
    assert list(progress_bar(range(3), desc="rounds", leave=True)) == [0, 1, 2] and capsys.readouterr().err == ""
    monkeypatch.setenv("GFLKIT_PROGRESS", "widget")
    with pytest.raises(ValueError, match=r"GFLKIT_PROGRESS='widget' is not a progress mode; use one of"):
        progress_bar(range(3), desc="rounds")


def test_outer_progress_is_one_line_per_item_in_text_mode(monkeypatch, capsys):
    from gflkit.progress import outer_progress

    monkeypatch.setenv("GFLKIT_PROGRESS", "text")
    assert list(outer_progress(["a", "b"], desc="runs", label=str.upper)) == ["a", "b"]
    assert capsys.readouterr().err == "runs: 1/2 (A)\nruns: 2/2 (B)\n"
    monkeypatch.setenv("GFLKIT_PROGRESS", "off")
    assert list(outer_progress(["a"], desc="runs", label=str.upper)) == ["a"] and capsys.readouterr().err == ""
