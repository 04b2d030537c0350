"""The archive of executed notebooks, where their numbers come from, and the report pages' summaries."""
from __future__ import annotations

import base64
import io
import json
from collections import Counter
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from gflkit.notebooks import NotebookError
from gflkit.report import archive as archive_module
from gflkit.report.archive import (ARCHIVE, MAX_IMAGE_BYTES, Archived, archived_csvs, archived_notebooks,
                                   check_images, entry, stamp, without_progress)
from gflkit.report.pages import PAGES, RESULTS, all_summaries, mean_paper_gap, page_of, profile_of, verdict_counts
from gflkit.report.provenance import check_notebook, parse_number, table_cells

ARCHIVE_BUDGET_BYTES = 6_000_000  # all archived notebooks together (figures at 100 dpi inline)


def _notebook_showing(frame: pd.DataFrame) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("display(frame)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": frame._repr_html_(),
                                                                 "text/plain": repr(frame)})]
    return nbformat.v4.new_notebook(cells=[cell])


@pytest.fixture
def table() -> pd.DataFrame:
    return pd.DataFrame({"q": [2, 2, 10], "method": ["fedavg", "local", "fedavg"],
                         "mean": [81.80000000000001, 97.65000000000003, 85.65],
                         "claim": ["a long sentence that pandas will cut short when it displays this cell " * 2,
                                   "x", "y"]})


# --- provenance -------------------------------------------------------------------------------------------

def test_parse_number_reads_the_precision_shown():
    assert parse_number("81.80") == (81.80, pytest.approx(0.005))
    assert parse_number("−3.74") == (-3.74, pytest.approx(0.005))
    assert parse_number("140") == (140.0, 0.5)
    assert parse_number("1.5e-05")[1] == pytest.approx(0.05e-5)
    assert parse_number("[+1.0, +2.0]") is None and parse_number("fedavg") is None


def test_table_cells_are_the_data_cells_only(table):
    cells = table_cells(table.round(2)._repr_html_())
    assert len(cells) == 1 and "81.80" in cells[0] and "fedavg" in cells[0]
    assert "method" not in cells[0]  # column labels are <th>


def test_a_rounded_pivot_of_a_saved_csv_is_explained(tmp_path, table):
    table.to_csv(tmp_path / "table.csv", index=False)
    shown = table.pivot_table(index="method", columns="q", values="mean").round(2)
    assert check_notebook(_notebook_showing(shown), tmp_path) == []
    with pd.option_context("display.max_colwidth", 30):  # pandas cuts long text with "..."
        assert check_notebook(_notebook_showing(table), tmp_path) == []


def test_a_hand_edited_number_is_caught(tmp_path, table):
    table.to_csv(tmp_path / "table.csv", index=False)
    edited = table.round(2).astype({"mean": float})
    edited.loc[1, "mean"] = 97.75  # not 97.65
    problems = check_notebook(_notebook_showing(edited), tmp_path)
    assert len(problems) == 1 and problems[0].missing == ["97.75"] and problems[0].nearest_csv == "table.csv"
    assert "97.75" in str(problems[0])


def test_a_table_needs_one_csv_for_all_its_numbers(tmp_path, table):
    table.iloc[:2].to_csv(tmp_path / "first.csv", index=False)
    table.iloc[2:].to_csv(tmp_path / "second.csv", index=False)
    assert [p.missing for p in check_notebook(_notebook_showing(table.round(2)), tmp_path)] == [["10", "85.65"]]


def test_a_table_without_csv_is_reported(tmp_path, table):
    (problem,) = check_notebook(_notebook_showing(table.round(2)), tmp_path)
    assert problem.nearest_csv is None and "81.8" in " ".join(problem.missing)


# --- archive mechanics --------------------------------------------------------------------------------------

FACTS = {"notebook": "quickstart", "profile": "ci", "parameters": {"seeds": [0, 1]}, "commit": "abc123",
         "device": "CPU: test, 2 cores", "date": "2026-11-27 00:00 UTC", "command": "gflkit archive quickstart:ci",
         "store": "results/quickstart_ci"}


def test_stamp_opens_with_the_facts_and_keeps_the_cells():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    stamped = stamp(notebook, FACTS)
    header = stamped.cells[0]
    assert header.cell_type == "markdown" and "gflkit-archive-header" in header.metadata["tags"]
    for fact in ("abc123", "`ci`", "seeds=[0, 1]", "CPU: test, 2 cores", "2026-11-27 00:00 UTC",
                 "gflkit archive quickstart:ci", "results/quickstart_ci"):
        assert fact in header.source
    assert stamped.metadata["gflkit"]["commit"] == "abc123" and stamped.cells[1].source == "x = 1"
    assert len(notebook.cells) == 1  # a copy
    nbformat.validate(stamped)


def test_progress_bars_are_dropped_and_warnings_kept():
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stderr", text="runs:  50%|█████     | 1/2 [00:01<00:01]\rruns: 100%|██████████| 2/2 [00:02<00:00]\n"),
        nbformat.v4.new_output("stream", name="stderr", text="UserWarning: careful\nruns: 100%|███| 2/2 [00:02<00:00]\n"),
        nbformat.v4.new_output("stream", name="stdout", text="done\n"),
    ]
    cleaned = without_progress(nbformat.v4.new_notebook(cells=[cell])).cells[0].outputs
    assert [o["text"] for o in cleaned] == ["UserWarning: careful\n", "done\n"]


def test_an_oversized_figure_is_refused(tmp_path):
    cell = nbformat.v4.new_code_cell("plot()")
    big = base64.b64encode(b"\0" * (MAX_IMAGE_BYTES + 1)).decode()
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": big})]
    with pytest.raises(NotebookError, match="over the archive's"):
        check_images(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "x.ipynb")


def test_archived_csvs_leave_out_the_round_logs(tmp_path):
    for name in ("table.csv", "records.csv", "table1_records.csv", "claims.csv"):
        (tmp_path / name).write_text("a\n1\n")
    assert [p.name for p in archived_csvs(tmp_path)] == ["claims.csv", "table.csv"]


def test_replacing_csvs_removes_stale_ones(tmp_path):
    source, target = tmp_path / "run", tmp_path / "docs"
    source.mkdir(), target.mkdir()
    (source / "table.csv").write_text("a\n1\n")
    (source / "records.csv").write_text("a\n1\n")
    (target / "old.csv").write_text("a\n2\n")
    archive_module._replace_csvs(source, target)
    assert sorted(p.name for p in target.iterdir()) == ["table.csv"]


def test_a_linked_csv_is_refused_and_nothing_is_archived(tmp_path):
    source, target = tmp_path / "run", tmp_path / "docs"
    source.mkdir()
    (source / "table.csv").write_text("a\n1\n")
    private = tmp_path / "private.csv"
    private.write_text("password\nhunter2\n")
    (source / "notes.csv").symlink_to(private)
    with pytest.raises(NotebookError, match=r"notes\.csv is a link to .*private\.csv; the archive copies only"):
        archive_module._replace_csvs(source, target)
    assert not target.exists()


def test_unknown_entry_names_the_known_ones():
    with pytest.raises(NotebookError, match="quickstart:ci"):
        entry("quickstart:paper")
    assert entry("sfl:ci").parameters == {"seeds": [0, 1, 2]}


def test_archive_writes_nothing_when_the_notebook_fails(tmp_path, monkeypatch):
    def failing(*args, **kwargs):
        raise NotebookError("quickstart failed in cell 3")

    monkeypatch.setattr("gflkit.notebooks.execute", failing)
    with pytest.raises(NotebookError):
        archive_module.archive(Archived("quickstart", "ci"), tmp_path / "results", tmp_path / "docs")
    assert not (tmp_path / "docs").exists()


def test_archive_entries_name_existing_notebooks_and_pages():
    names = {page.name for page in PAGES}
    for archived in ARCHIVE:
        assert (Path("notebooks") / f"{archived.name}.ipynb").exists()
        assert page_of(archived.folder).name in names  # a KeyError when no page reports the folder


# --- the committed archive -----------------------------------------------------------------------------------

ARCHIVED = archived_notebooks()


def test_the_archive_exists_and_stays_small():
    assert len(ARCHIVED) >= 3, "docs/results/ holds no archived notebook: run `gflkit archive`"
    total = sum(path.stat().st_size for path in ARCHIVED)
    assert total < ARCHIVE_BUDGET_BYTES, f"the archive is {total:,} bytes, over its {ARCHIVE_BUDGET_BYTES:,} budget"


@pytest.mark.parametrize("path", ARCHIVED, ids=[p.parent.name for p in ARCHIVED])
def test_archived_notebook_states_its_run_and_shows_only_committed_numbers(path):
    notebook = nbformat.read(path, as_version=4)
    facts = notebook.metadata["gflkit"]
    assert path.parent.name == f"{facts['notebook']}_{facts['profile']}"
    assert facts["commit"] and facts["device"] and facts["date"] and facts["command"].startswith("gflkit archive")
    assert "gflkit-archive-header" in notebook.cells[0].metadata["tags"]
    executed = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert executed and all(cell.execution_count for cell in executed if cell.source.strip())
    assert not any(output.get("output_type") == "error" for cell in executed for output in cell.outputs)
    problems = check_notebook(notebook, path.parent)
    assert not problems, "\n".join(map(str, problems))


# --- the report pages' summaries ------------------------------------------------------------------------------

def test_every_result_folder_belongs_to_a_page():
    folders = {path.name for path in RESULTS.iterdir() if path.is_dir()}
    assert folders == {row.folder for row in all_summaries()}
    assert profile_of("sfl_paper_gpu") == "paper_gpu" and page_of("flower_smoke").name == "engine"


def test_verdict_counts_are_the_claims_csv(tmp_path):
    pd.DataFrame({"claim": list("abcd"), "verdict": ["reproduced", "inconclusive", "reproduced", "not run"]}).to_csv(
        tmp_path / "claims.csv", index=False)
    assert verdict_counts(tmp_path) == Counter({"reproduced": 2, "inconclusive": 1, "not run": 1})


def test_mean_paper_gap_skips_cells_without_a_paper_number(tmp_path):
    pd.DataFrame({"measured": [90.0, 80.0, 70.0], "paper": [91.0, None, 73.0]}).to_csv(
        tmp_path / "table1_paper_vs_measured.csv", index=False)
    assert mean_paper_gap(tmp_path) == (2.0, 2)
    assert mean_paper_gap(tmp_path / "nothing") is None  # a folder without such a CSV


def test_every_page_with_figures_has_an_archived_notebook_that_drew_one():
    from gflkit.report.sphinx import notebook_figures

    for page in PAGES:
        if page.figures:
            notebooks = [row.notebook for row in all_summaries() if row.page == page.name and row.notebook]
            assert notebooks, f"page {page.name}: no archived notebook"
            assert any(notebook_figures(json.loads(path.read_text())) for path in notebooks), page.name


def test_archive_command_refuses_an_unknown_entry_in_one_line(capsys):
    from gflkit.cli import main

    assert main(["archive", "quickstart:paper"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "gflkit archive:" in err and "quickstart:ci" in err
