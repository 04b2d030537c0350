"""The papers as data: one :class:`Paper` per notebook, the single list the rest of the package reads.

A paper declares its profiles, whether its module publishes ``grids``, the executions the archive keeps, the
report page that shows it, the figures drawn from its committed CSVs alone and the results folders whose
seeds continue another's. The ``gflkit`` command's checks (:mod:`gflkit.notebooks`), the archive list
(:data:`gflkit.report.archive.ARCHIVE`), the report pages (:data:`gflkit.report.pages.PAGES`) and the
figures command (:mod:`gflkit.report.figures`) are read from :data:`PAPERS`, so there is no second list to
keep in step. The module is the standard library only: the command checks a notebook's name and profile
against it before importing a paper module (and so torch). ``tests/test_cli_refusals.py`` checks that it
says what the paper modules declare (``PROFILES``, ``grids``). ``from gflkit.papers import PAPERS`` reads the
same object.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

#: how a figure is drawn from its CSV (:mod:`gflkit.report.figures` has one function per kind)
FIGURE_KINDS = ("seed_means", "paper_vs_measured", "benchmark_seed_means", "benchmark_critical_difference")


def _frozen(mapping: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class FigureSpec:
    """A figure drawn from one CSV of a committed results folder, with no store and no training.

    Attributes:
        file: the PNG it is saved as, beside the CSV.
        kind: how it is drawn (:data:`FIGURE_KINDS`):

            * ``seed_means``: per-client rows averaged per run, one dot per seed and a bar at the mean over
              seeds, in one panel per value of ``panels`` (options ``x``: the column(s) along the axis;
              ``panels``: the column(s) that split the panels; ``value``: the score column; ``where``:
              ``{column: value}`` rows to keep);
            * ``paper_vs_measured``: each row's measured number (± its seed spread where the CSV has one)
              beside the paper's;
            * ``benchmark_seed_means`` / ``benchmark_critical_difference``: the benchmark's per-seed means and
              critical-difference diagrams, from its per-client rows and those of the folders it continues.
        source: the CSV it reads, a file of the folder (or a glob pattern of several, e.g. ``clients*.csv``).
        caption: what it shows, in words.
        options: the kind's options (above).
    """

    file: str
    kind: str
    source: str
    caption: str
    options: Mapping[str, Any] = field(default_factory=_frozen)

    def __post_init__(self) -> None:
        if self.kind not in FIGURE_KINDS:
            raise ValueError(f"figure {self.file!r}: unknown kind {self.kind!r}; choose one of {FIGURE_KINDS}")
        if not self.file.endswith(".png") or "/" in self.file:
            raise ValueError(f"figure file {self.file!r} must be a PNG name inside its folder (e.g. 'table1.png')")
        object.__setattr__(self, "options", _frozen(self.options))


@dataclass(frozen=True)
class Paper:
    """One paper (or the quickstart, the benchmark, the engine's Flower check) and everything that reads it.

    Attributes:
        name: its notebook ``notebooks/<name>.ipynb``, its module ``gflkit.papers.<name>`` and the prefix of its
            results folders ``<name>_<profile>``.
        title: its report page's title.
        profiles: the profiles its module declares, in their order.
        grids: whether its module publishes ``grids(profile, ...)``, the runs ``gflkit precompute`` computes.
        archived: the executions ``gflkit archive`` keeps, ``{profile: notebook parameters}``.
        page: the name of the report page that shows it (docs/papers/<page>.md; default ``name``).
        claims: whether the page reports claims (then it shows a claims table).
        notebook_figures: whether its archived notebook draws figures (then the page shows one).
        figures: the figures :mod:`gflkit.report.figures` draws from a results folder's committed CSVs.
        continues: ``{folder: earlier folders}`` — a results folder that holds later seeds of the runs whose
            first seeds an earlier folder holds (its figures and claims read them together).
    """

    name: str
    title: str
    profiles: tuple[str, ...]
    grids: bool = True
    archived: Mapping[str, Mapping[str, Any]] = field(default_factory=_frozen)
    page: str = ""
    claims: bool = True
    notebook_figures: bool = True
    figures: tuple[FigureSpec, ...] = ()
    continues: Mapping[str, tuple[str, ...]] = field(default_factory=_frozen)

    def __post_init__(self) -> None:
        object.__setattr__(self, "page", self.page or self.name)
        object.__setattr__(self, "archived", _frozen({p: _frozen(v) for p, v in self.archived.items()}))
        object.__setattr__(self, "continues", _frozen(self.continues))
        unknown = sorted(set(self.archived) - set(self.profiles))
        if unknown:
            raise ValueError(f"paper {self.name!r} archives profiles {unknown} it does not declare {self.profiles}")
        files = [figure.file for figure in self.figures]
        if len(set(files)) != len(files):
            raise ValueError(f"paper {self.name!r} declares a figure file twice: {files}")

    def folder(self, profile: str) -> str:
        """The results folder of ``profile``: ``<name>_<profile>``."""
        return f"{self.name}_{profile}"


def _seed_means(file: str, source: str, caption: str, x: str | tuple[str, ...], panels: tuple[str, ...] = (),
                value: str = "accuracy", **where: Any) -> FigureSpec:
    return FigureSpec(file, "seed_means", source, caption, {"x": x, "panels": panels, "value": value, "where": where})


def _paper_vs_measured(table: str, caption: str, source: str | None = None) -> FigureSpec:
    return FigureSpec(f"{table}_paper_vs_measured.png", "paper_vs_measured",
                      source or f"{table}_paper_vs_measured.csv", caption)


PAPERS: Mapping[str, Paper] = MappingProxyType({paper.name: paper for paper in (
    Paper("quickstart", "Quickstart", ("smoke", "ci", "paper"), archived={"ci": {}}, figures=(
        _seed_means("table_seed_means.png", "table_clients.csv",
                    "Mean client accuracy of each run, one dot per seed", "method"),
        _paper_vs_measured("table", "Measured mean accuracy beside the paper's", "paper_vs_measured.csv"),
    )),
    Paper("fedska", "FedSKA", ("smoke", "ci", "paper1", "paper"), archived={"ci": {}}, figures=(
        _seed_means("table1_seed_means.png", "table1_clients.csv",
                    "Table 1: mean client accuracy of each run, one dot per seed, per label skew q", "method", ("q",)),
        _seed_means("table3_seed_means.png", "table3_clients.csv",
                    "Table 3: the graph ablation's mean client accuracy, one dot per seed", "setting", ("q",)),
        _seed_means("figure4_k_seed_means.png", "k_clients.csv",
                    "Figure 4: mean client accuracy at each k of the kNN graph, one dot per seed", "k", ("q",)),
        _paper_vs_measured("table1", "Table 1: measured accuracy (± seed spread) beside the paper's"),
    )),
    Paper("sfl", "SFL", ("smoke", "ci", "authors_code", "authors_code_ci", "paper"),
          archived={"ci": {"seeds": [0, 1, 2]}}, figures=(
        _seed_means("table3_seed_means.png", "table3_clients.csv",
                    "Table 3: mean client accuracy of each run, one dot per seed", "method", ("dataset",)),
        _seed_means("table4_seed_means.png", "table4_clients.csv",
                    "Table 4: the ablation's mean client accuracy, one dot per seed", "variant", ("dataset",)),
        _paper_vs_measured("table3", "Table 3: measured accuracy (± seed spread) beside the paper's"),
        _paper_vs_measured("table4", "Table 4: measured accuracy (± seed spread) beside the paper's"),
    )),
    Paper("jgesr", "JGESR", ("smoke", "ci", "paper1", "paper"), archived={"ci": {}}, figures=(
        _seed_means("table1_seed_means.png", "table1_clients.csv",
                    "Table 1: mean client accuracy of each run, one dot per seed, per noise scale s", "method", ("s",)),
        _seed_means("figure4_seed_means.png", "figure4_clients.csv",
                    "Figure 4: PDCA's mean client accuracy at each missing rate, one dot per seed", "missing"),
        _paper_vs_measured("table1", "Table 1: measured accuracy (± seed spread) beside the paper's"),
    )),
    Paper("fedcg", "FedCG", ("smoke", "ci", "paper"), archived={"ci": {}}, figures=(
        _paper_vs_measured("table3", "Table 3: measured accuracy beside the paper's"),
        _paper_vs_measured("table4", "Table 4: measured accuracy beside the paper's"),
        _paper_vs_measured("table5", "Table 5: measured accuracy beside the paper's"),
    )),
    Paper("fedvgae", "FedVGAE", ("smoke", "ci", "paper"), archived={"ci": {}}, figures=(
        _seed_means("table3_seed_means.png", "clients.csv", "Table 3: link prediction AUC of each run, one dot "
                    "per seed", "method", ("dataset",), value="auc", section="table3"),
        _seed_means("table4_seed_means.png", "clients.csv", "Table 4: node classification accuracy of each run, "
                    "one dot per seed", "method", ("dataset",), value="accuracy", section="table4"),
        _seed_means("table6_seed_means.png", "clients.csv", "Table 6: the components' ablation (AUC), one dot "
                    "per seed", "setting", ("dataset",), value="auc", section="table6"),
        _seed_means("tables7_8_seed_means.png", "clients.csv", "Tables 7–8: AUC at each λ and φ, one dot per "
                    "seed", "setting", ("dataset",), value="auc", section="tables7_8"),
        _paper_vs_measured("table3", "Table 3: measured AUC and AP beside the paper's"),
        _paper_vs_measured("table4", "Table 4: measured accuracy beside the paper's"),
    )),
    Paper("benchmark", "Benchmark", ("smoke", "ci", "paper1", "paper"), archived={"ci": {}}, figures=(
        FigureSpec("seed_means.png", "benchmark_seed_means", "clients*.csv",
                   "Mean own-protocol client accuracy of every method in every setting, one dot per seed"),
        FigureSpec("critical_difference_seeds.png", "benchmark_critical_difference", "clients*.csv",
                   "Critical-difference diagrams of each seed and of the mean over seeds"),
    ), continues={"benchmark_paper": ("benchmark_paper1",)}),
    Paper("your_method", "Write your own method", ("smoke", "ci"), archived={"ci": {}}, claims=False),
    Paper("flower", "Engine and Flower", ("smoke", "ci", "paper"), grids=False, archived={"smoke": {}},
          page="engine", claims=False, notebook_figures=False),
)})


def paper_of_folder(folder: str) -> Paper:
    """The paper whose results folder ``<name>_<profile>`` is ``folder`` (profiles may contain ``_``)."""
    for paper in sorted(PAPERS.values(), key=lambda p: len(p.name), reverse=True):
        if folder.startswith(paper.name + "_"):
            return paper
    raise KeyError(f"results folder {folder!r} is no paper's '<name>_<profile>' (papers: {sorted(PAPERS)}); "
                   "add its paper to gflkit/catalog.py's PAPERS")


def profile_of_folder(folder: str) -> str:
    """The profile part of a results folder's name, e.g. ``paper_gpu`` for ``sfl_paper_gpu``."""
    return folder[len(paper_of_folder(folder).name) + 1:]
