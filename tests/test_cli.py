"""The ``gflkit`` command: ``precompute`` fills the result store a notebook reads."""
import re

import pytest

from gflkit.cli import main
from gflkit.papers.fedska import PROFILES, grids
from gflkit.profiles import resolve_profile
from gflkit.results import ResultStore


def test_precompute_stores_exactly_the_runs_the_notebook_reads(tmp_path, capsys):
    assert main(["precompute", "fedska", "--profile", "smoke", "--section", "table3", "--results", str(tmp_path),
                 "--device", "cpu"]) == 0
    store = ResultStore(tmp_path / "runs")
    configs = grids(resolve_profile(PROFILES, "smoke"), ["table3"])["table3"]
    for config in configs:
        assert store.load({**config.to_dict(), "device": "cpu"}) is not None
    assert len(list((tmp_path / "runs").iterdir())) == len(configs) == 4
    assert "4 runs of fedska (smoke)" in capsys.readouterr().out


def test_precompute_can_select_methods(tmp_path):
    main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local",
          "--results", str(tmp_path), "--device", "cpu"])
    assert len(list((tmp_path / "runs").iterdir())) == 2  # local at the smoke profile's two shard settings


@pytest.mark.parametrize("argv, message", [
    (["precompute", "quickstart"], "does not publish its experiment grids"),
    (["precompute", "nonsense"], "does not publish its experiment grids"),
    (["precompute", "fedska", "--section", "table9"], "unknown section(s) ['table9']"),
])
def test_precompute_fails_with_the_reason(argv, message, tmp_path):
    with pytest.raises(SystemExit, match=re.escape(message)):
        main([*argv, "--results", str(tmp_path)])


def test_precompute_runs_the_seeds_asked_for(tmp_path):
    main(["precompute", "fedska", "--profile", "smoke", "--section", "table1", "--method", "local", "--seeds", "3",
          "--results", str(tmp_path), "--device", "cpu"])
    store = ResultStore(tmp_path / "runs")
    configs = grids(resolve_profile(PROFILES, "smoke", seeds=[3]), ["table1"])["table1"]
    local = [c for c in configs if c.method == "local"]
    assert {c.seed for c in local} == {3} and all(store.load({**c.to_dict(), "device": "cpu"}) is not None for c in local)


def test_fedvgae_grids_are_the_notebooks_runs_on_the_datasets_present(tmp_path):
    from graph_fixtures import write_planetoid

    from gflkit.data import registered
    from gflkit.papers import fedvgae

    spec, _ = write_planetoid(tmp_path, "cora")
    params = resolve_profile(fedvgae.PROFILES, "ci", seeds=[0, 1])
    with registered(spec):
        sections = fedvgae.grids(params, data_root=tmp_path)
    assert {c.dataset for runs in sections.values() for c in runs} == {"cora"}, "CiteSeer / PolBlogs are absent"
    assert sections["table3"] == sorted(fedvgae.configs(params, "cora", "link_prediction"), key=lambda c: c.seed)
    assert [c.seed for c in sections["table4"]] == [0] * 8 + [1] * 8, "a first seed of every cell comes first"
    assert {c.method_options["share"] for c in sections["table5"]} == {"encoder", "first_layer", "all"}
    assert len(sections["tables7_8"]) == 2 * (3 + 3)
    with pytest.raises(ValueError, match=re.escape("unknown section(s) ['table9']")):
        fedvgae.grids(params, ["table9"], data_root=tmp_path)
