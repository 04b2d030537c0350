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
