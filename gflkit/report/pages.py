"""The report's pages and what their summaries read: one page per paper, the numbers from the committed CSVs.

Every folder ``docs/results/<notebook>_<profile>/`` belongs to the page of its notebook (:data:`PAGES`). A
folder's summary (:func:`summarize`) is computed, never typed: the verdict counts of its claims CSV, the
mean absolute difference ours − paper over its paper-vs-measured CSVs, the number of seeds its per-seed CSVs hold,
the last commit that changed it, and the folder that supersedes it (continues its seeds). The landing page
shows one row per folder; a paper's page shows its own rows, so both read the same numbers.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from gflkit.catalog import PAPERS, paper_of_folder
from gflkit.catalog import profile_of_folder as profile_of
from gflkit.notebooks import REPO

DOCS = REPO / "docs"
RESULTS = DOCS / "results"
#: the verdicts counted apart; "trivial: identical runs" marks a comparison of identical runs, no evidence either way
VERDICTS = ("reproduced", "not reproduced", "inconclusive", "trivial: identical runs")
# the benchmark decides "the headline method beats every baseline" per setting instead of claims.csv
CLAIMS_FILES = ("claims.csv", "headline_vs_best_baseline.csv")


@dataclass(frozen=True)
class Page:
    """A page of the report: ``name`` (docs/papers/<name>.md), its title, the notebooks it reports, whether it
    reports a paper's claims (then it must show a claims table) and whether an archived notebook gives it
    figures (then it must show one)."""

    name: str
    title: str
    notebooks: tuple[str, ...]
    claims: bool = True
    figures: bool = True

    @property
    def html(self) -> str:
        """The page's path in the built site."""
        return f"papers/{self.name}.html"

    def folders(self, results: Path = RESULTS) -> list[Path]:
        """The committed result folders of this page's notebooks, best budget first (paper before ci)."""
        found = [path for path in results.iterdir() if path.is_dir() and _notebook_of(path.name) in self.notebooks]
        return sorted(found, key=lambda path: (_budget_rank(path.name), path.name))


#: one page per paper of :data:`gflkit.catalog.PAPERS`, in its order
PAGES: tuple[Page, ...] = tuple(Page(paper.page, paper.title, (paper.name,), paper.claims, paper.notebook_figures)
                                for paper in PAPERS.values())


def _notebook_of(folder: str) -> str:
    """The notebook of a result folder ``<notebook>_<profile>``."""
    return paper_of_folder(folder).name


def _budget_rank(folder: str) -> int:
    profile = profile_of(folder)
    return 0 if profile.startswith("paper") else 1 if profile == "ci" else 2


def page_of(folder: str) -> Page:
    """The page that reports result folder ``folder``."""
    notebook = _notebook_of(folder)
    for page in PAGES:
        if notebook in page.notebooks:
            return page
    raise KeyError(f"result folder {folder!r} belongs to no report page; add its paper to gflkit/catalog.py")


def committed_figures(folder: Path) -> list[tuple[str, Path]]:
    """``(caption, path)`` of every figure the paper of ``folder`` declares whose PNG the folder holds (drawn from
    its CSVs by ``gflkit figures``), in the order the paper declares them."""
    return [(spec.caption, folder / spec.file) for spec in paper_of_folder(folder.name).figures
            if (folder / spec.file).exists()]


def claims_file(folder: Path) -> Path | None:
    """The CSV of ``folder`` whose rows are verdicts, or None."""
    return next((folder / name for name in CLAIMS_FILES if (folder / name).exists()), None)


def verdict_column(frame: pd.DataFrame) -> str:
    """The column of a claims CSV that holds the verdicts."""
    return next(column for column in frame.columns if column.startswith("verdict"))


def verdict_css(verdict: str) -> str:
    """The CSS name of a verdict's badge and count: ``not-reproduced``, ``trivial-identical-runs``."""
    return re.sub(r"[^a-z]+", "-", verdict.lower()).strip("-")


def verdict_counts(folder: Path) -> Counter[str]:
    """How many claims of ``folder`` have each verdict (:data:`VERDICTS` and any other, e.g. "not run")."""
    path = claims_file(folder)
    if path is None:
        return Counter()
    frame = pd.read_csv(path)
    return Counter(frame[verdict_column(frame)].astype(str))


def paper_gaps(frame: pd.DataFrame) -> pd.Series:
    """The absolute differences measured − paper over the rows of a paper-vs-measured table with both numbers."""
    both = frame.dropna(subset=["measured", "paper"])
    return (both["measured"] - both["paper"]).abs()


def mean_paper_gap(folder: Path) -> tuple[float, int] | None:
    """Mean absolute difference measured − paper over the cells of ``folder``'s paper-vs-measured CSVs that have both numbers,
    and how many cells; None when it has no such CSV or cell."""
    gaps = [gap for path in sorted(folder.glob("*paper_vs_measured.csv")) for gap in paper_gaps(pd.read_csv(path))]
    return (sum(gaps) / len(gaps), len(gaps)) if gaps else None


def seed_values(folder: Path) -> set[int]:
    """Every seed a CSV of ``folder`` with a ``seed`` column names (one file per seed counts too), together with
    those of the folders whose seeds ``folder`` continues (:attr:`gflkit.catalog.Paper.continues`)."""
    found: set[int] = set()
    for earlier in paper_of_folder(folder.name).continues.get(folder.name, ()):
        found |= seed_values(folder.parent / earlier)
    for path in folder.glob("*.csv"):
        if "seed" in pd.read_csv(path, nrows=0).columns:
            found |= set(pd.read_csv(path, usecols=["seed"])["seed"].dropna().astype(int))
    return found


def declared_seeds(folder: str) -> int | None:
    """How many seeds the profile of a results folder declares (for a folder that keeps no per-seed rows), or
    None when its paper module declares no such profile."""
    import importlib

    paper = paper_of_folder(folder)
    profiles = getattr(importlib.import_module(f"gflkit.papers.{paper.name}"), "PROFILES", {})
    profile = profiles.get(profile_of(folder))
    return len(profile.seeds) if profile is not None else None


def seeds(folder: Path) -> int | None:
    """How many seeds ``folder``'s results cover: the distinct seeds of its per-seed CSVs (:func:`seed_values`),
    else the number its profile declares (:func:`declared_seeds`), else None."""
    return len(seed_values(folder)) or declared_seeds(folder.name)


def superseded_by(folder: str) -> str | None:
    """The results folder that continues ``folder``'s seeds and decides its claims over all of them (whose
    verdicts therefore replace ``folder``'s), or None."""
    continuing = paper_of_folder(folder).continues
    return next((later for later, earlier in continuing.items() if folder in earlier), None)


def last_commit(folder: Path) -> tuple[str, str] | None:
    """``(short hash, date)`` of the last commit that changed ``folder``, or None outside a git checkout."""
    import subprocess

    try:
        out = subprocess.run(["git", "log", "-1", "--format=%h %cs", "--", "."], cwd=folder, capture_output=True,
                             text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return (out[0], out[1]) if len(out) == 2 else None


@dataclass(frozen=True)
class Summary:
    """One row of the landing page: a result folder at a glance."""

    folder: str
    page: str
    profile: str
    seeds: int | None
    gap: tuple[float, int] | None
    verdicts: Counter[str]
    notebook: Path | None
    superseded_by: str | None = None
    commit: tuple[str, str] | None = None

    @property
    def other_verdicts(self) -> int:
        """Claims whose verdict is none of :data:`VERDICTS` (e.g. "not run")."""
        return sum(count for verdict, count in self.verdicts.items() if verdict not in VERDICTS)


def summarize(folder: Path) -> Summary:
    """The landing page's row for ``folder`` (see the module docstring)."""
    notebook = folder / f"{_notebook_of(folder.name)}.ipynb"
    return Summary(folder.name, page_of(folder.name).name, profile_of(folder.name), seeds(folder),
                   mean_paper_gap(folder), verdict_counts(folder), notebook if notebook.exists() else None,
                   superseded_by(folder.name), last_commit(folder))


def all_summaries(results: Path = RESULTS) -> list[Summary]:
    """The rows of every committed result folder, page by page in :data:`PAGES` order."""
    return [summarize(folder) for page in PAGES for folder in page.folders(results)]
