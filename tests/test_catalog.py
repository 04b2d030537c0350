"""The papers' registry (gflkit.catalog.PAPERS): read without torch, validated, and the one list the
archive, the report pages and the command's checks are built from."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gflkit.catalog import PAPERS, FigureSpec, Paper, paper_of_folder, profile_of_folder
from gflkit.notebooks import NOTEBOOK_DIR
from gflkit.report.archive import ARCHIVE
from gflkit.report.pages import PAGES, RESULTS


def test_papers_are_read_without_importing_torch():
    code = ("import sys; from gflkit.papers import PAPERS; import gflkit.report.pages, gflkit.report.archive; "
            "print(len(PAPERS), 'torch' in sys.modules)")
    said = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert said == [str(len(PAPERS)), "False"]


def test_every_notebook_is_a_paper_and_every_paper_a_notebook():
    assert set(PAPERS) == {path.stem for path in NOTEBOOK_DIR.glob("*.ipynb")}
    assert {"quickstart", "benchmark", "fedska", "sfl", "jgesr", "fedcg", "fedvgae"} <= set(PAPERS)


def test_archive_and_pages_are_read_from_the_papers():
    assert [a.key for a in ARCHIVE] == [f"{p.name}:{profile}" for p in PAPERS.values() for profile in p.archived]
    assert next(a for a in ARCHIVE if a.key == "sfl:ci").parameters == {"seeds": [0, 1, 2]}
    assert [(page.name, page.title, page.notebooks) for page in PAGES] == [
        (p.page, p.title, (p.name,)) for p in PAPERS.values()]
    engine = next(page for page in PAGES if page.name == "engine")
    assert engine.notebooks == ("flower",) and not engine.claims and not engine.figures


def test_folders_name_their_paper_and_profile():
    assert paper_of_folder("sfl_paper_gpu").name == "sfl" and profile_of_folder("sfl_paper_gpu") == "paper_gpu"
    assert profile_of_folder("benchmark_paper1") == "paper1"
    with pytest.raises(KeyError, match="'nosuch_ci' is no paper's"):
        paper_of_folder("nosuch_ci")
    for folder in (path for path in RESULTS.iterdir() if path.is_dir()):
        paper = paper_of_folder(folder.name)
        assert profile_of_folder(folder.name) in paper.profiles or profile_of_folder(folder.name).startswith("paper")


def test_continued_folders_and_figure_sources_are_declared_consistently():
    for paper in PAPERS.values():
        for folder, earlier in paper.continues.items():
            assert paper_of_folder(folder) is paper and all(paper_of_folder(e) is paper for e in earlier)
        for spec in paper.figures:
            assert spec.caption and spec.source.endswith(".csv")


def test_a_paper_and_a_figure_refuse_what_they_cannot_mean():
    with pytest.raises(ValueError, match="unknown kind 'pie'"):
        FigureSpec("a.png", "pie", "a.csv", "a pie")
    with pytest.raises(ValueError, match="must be a PNG name"):
        FigureSpec("sub/a.png", "seed_means", "a.csv", "dots")
    with pytest.raises(ValueError, match=r"archives profiles \['paper'\] it does not declare"):
        Paper("toy", "Toy", ("smoke", "ci"), archived={"paper": {}})
    twice = FigureSpec("a.png", "paper_vs_measured", "a.csv", "gaps")
    with pytest.raises(ValueError, match="declares a figure file twice"):
        Paper("toy", "Toy", ("ci",), figures=(twice, twice))
    assert Paper("toy", "Toy", ("ci",)).page == "toy" and Paper("toy", "Toy", ("ci",)).folder("ci") == "toy_ci"


def test_declarations_cannot_be_changed_in_place():
    paper = PAPERS["sfl"]
    with pytest.raises(TypeError):
        paper.archived["paper"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        paper.figures[0].options["value"] = "loss"  # type: ignore[index]
