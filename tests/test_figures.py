"""``gflkit figures``: a results folder's declared figures redrawn from its CSVs alone."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from gflkit.catalog import PAPERS  # noqa: E402
from gflkit.cli import main  # noqa: E402
from gflkit.report import figures  # noqa: E402
from gflkit.report.pages import RESULTS, committed_figures, summarize  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


def client_rows() -> pd.DataFrame:
    """Two methods, two noise scales, two seeds, three clients: accuracy = 10·method + s·100 + seed + client."""
    rows = [{"method": method, "seed": seed, "evaluate": "server", "s": s, "client": client, "round": 30,
             "accuracy": 10.0 * m + 100 * s + seed + client, "num_samples": 50}
            for m, method in enumerate(["pdca", "fedavg"]) for s in (0.1, 0.2) for seed in (0, 1)
            for client in range(3)]
    return pd.DataFrame(rows)


@pytest.fixture
def folder(tmp_path):
    """A JGESR paper-budget folder with Table 1's per-client rows and paper-vs-measured table, no Figure 4."""
    folder = tmp_path / "jgesr_paper1"
    folder.mkdir()
    client_rows().to_csv(folder / "table1_clients.csv", index=False)
    pd.DataFrame({"setting": ["s=0.1", "s=0.1"], "method": ["pdca", "fedavg"], "metric": ["mean", "mean"],
                  "measured": [91.0, 93.0], "measured_std": [2.0, 0.5], "seeds": [2, 2], "paper": [95.0, 90.0],
                  "difference": [-4.0, 3.0]}).to_csv(folder / "table1_paper_vs_measured.csv", index=False)
    return folder


def test_seed_means_are_each_runs_mean_over_its_clients():
    spec = next(s for s in PAPERS["jgesr"].figures if s.file == "table1_seed_means.png")
    per_seed = figures._by_seed(client_rows(), spec)
    assert list(per_seed.columns) == ["setting", "method", "seed", "mean"]
    row = per_seed[(per_seed["setting"] == "s=0.2") & (per_seed["method"] == "fedavg") & (per_seed["seed"] == 1)]
    assert row["mean"].item() == pytest.approx(10 + 20 + 1 + 1)  # clients 0, 1, 2 average to +1
    assert len(per_seed) == 8


def test_where_keeps_the_declared_rows_and_says_when_none_has_a_score():
    spec = next(s for s in PAPERS["fedvgae"].figures if s.file == "table4_seed_means.png")
    rows = pd.DataFrame({"section": ["table3", "table4"], "dataset": ["cora", "cora"], "method": ["a", "b"],
                         "seed": [0, 0], "client": [0, 0], "auc": [80.0, None], "accuracy": [None, 70.0]})
    assert figures._by_seed(rows, spec)[["method", "mean"]].values.tolist() == [["b", 70.0]]
    with pytest.raises(ValueError, match="no row of clients.csv has a 'accuracy' score where"):
        figures._by_seed(rows.assign(accuracy=None), spec)
    with pytest.raises(ValueError, match=r"has no columns \['dataset'\]"):
        figures._by_seed(rows.drop(columns="dataset"), spec)


def test_draw_folder_saves_the_figures_whose_csv_it_holds_and_names_the_rest(folder):
    drawn = figures.draw_folder(folder)
    assert [p.name for p in drawn.saved] == ["table1_seed_means.png", "table1_paper_vs_measured.png"]
    assert drawn.skipped == (("figure4_seed_means.png", "no figure4_clients.csv"),)
    first = {p.name: p.read_bytes() for p in drawn.saved}
    assert all(data.startswith(PNG) for data in first.values())
    figures.draw_folder(folder)
    assert {p.name: p.read_bytes() for p in drawn.saved} == first, "a redraw of the same CSVs is the same file"
    assert [caption for caption, _ in committed_figures(folder)] == [
        s.caption for s in PAPERS["jgesr"].figures if s.file in first]


def test_a_figure_that_fails_leaves_no_file(folder, monkeypatch):
    def failing(frame, spec):
        raise ValueError("cannot draw")

    monkeypatch.setitem(figures.DRAWERS, "seed_means", failing)
    with pytest.raises(ValueError, match="cannot draw"):
        figures.draw_folder(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["table1_clients.csv", "table1_paper_vs_measured.csv"]


def test_the_command_draws_and_refuses_in_one_line(folder, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["figures", str(folder), "--out", str(out)]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"drew {out / 'table1_seed_means.png'}" and said[-1].startswith("skipped figure4_seed_means.png")
    assert main(["figures", str(tmp_path / "jgesr_nothing")]) == 2
    assert capsys.readouterr().err.strip().endswith("is not a results folder (e.g. docs/results/jgesr_paper1)")
    assert main(["figures", str(folder), str(folder), "--out", str(out)]) == 2
    assert "--out takes one FOLDER, got 2" in capsys.readouterr().err
    (tmp_path / "nosuch_ci").mkdir()
    assert main(["figures", str(tmp_path / "nosuch_ci")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'nosuch_ci' is no paper's" in err


PAPER_BUDGET = [path for path in sorted(RESULTS.iterdir()) if path.is_dir() and summarize(path).notebook is None]


def test_a_figure_knows_the_csvs_it_was_drawn_from(folder):
    figures.draw_folder(folder)
    spec = next(s for s in PAPERS["jgesr"].figures if s.file == "table1_seed_means.png")
    assert figures.is_current(folder, spec)
    assert figures.drawn_from(folder / spec.file) == figures.source_digest([folder / "table1_clients.csv"])
    more = pd.concat([client_rows(), client_rows().assign(seed=2)], ignore_index=True)
    more.to_csv(folder / "table1_clients.csv", index=False)  # a later seed appended, the figure not redrawn
    assert not figures.is_current(folder, spec)
    figures.draw_folder(folder)
    assert figures.is_current(folder, spec)


@pytest.mark.parametrize("path", PAPER_BUDGET, ids=[p.name for p in PAPER_BUDGET])
def test_every_paper_budget_folder_has_its_declared_figures_committed_and_current(path):
    declared = [spec for spec in figures.declared_figures(path) if any(path.glob(spec.source))]
    assert declared, f"{path.name}: its paper declares no figure drawable from its CSVs"
    held = {file.name for _, file in committed_figures(path)}
    assert held == {spec.file for spec in declared}, f"run `gflkit figures {path}` and commit the figures"
    stale = [spec.file for spec in declared if not figures.is_current(path, spec)]
    assert not stale, f"{stale} were drawn from other CSVs than {path.name} holds: run `gflkit figures {path}`"
