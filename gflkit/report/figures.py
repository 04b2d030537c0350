"""A results folder's figures, redrawn from its committed CSVs alone: no result store, no training.

Each paper declares its figures in :data:`gflkit.catalog.PAPERS` (:class:`~gflkit.catalog.FigureSpec`): which
CSV each reads and how it is drawn. ``gflkit figures FOLDER`` (:func:`draw_folder`) draws every declared figure
whose CSV the folder holds and saves it beside the CSVs, atomically, so that a paper-budget folder — whose
runs were computed on another machine, their stores gone — shows figures of its own numbers rather than of
the reduced ``ci`` profile. A figure whose CSV the folder lacks is skipped and named, never drawn from
something else. Each PNG keeps the digest of the CSVs it was drawn from (:func:`is_current`), so a figure left
behind when its CSVs grow (later seeds appended) is caught.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from gflkit import plots
from gflkit.atomic import atomic_write
from gflkit.catalog import FigureSpec, paper_of_folder
from gflkit.outputs import png_bytes

#: columns of a paper-vs-measured CSV that hold numbers, not the row's name
NUMBER_COLUMNS = ("measured", "measured_std", "seeds", "paper", "difference")
DPI = 110


def _by_seed(rows: pd.DataFrame, spec: FigureSpec) -> pd.DataFrame:
    """Per-client rows as each run's mean ``value`` over its clients: columns ``setting`` (the panel),
    ``method`` (the label along the axis), ``seed``, ``mean``."""
    options = spec.options
    x = [options["x"]] if isinstance(options["x"], str) else list(options["x"])
    panels, value = list(options["panels"]), options["value"]
    for column, wanted in options["where"].items():
        rows = rows[rows[column] == wanted]
    missing = [c for c in [*x, *panels, value, "seed"] if c not in rows.columns]
    if missing:
        raise ValueError(f"figure {spec.file}: {spec.source} has no columns {missing}; it has {list(rows.columns)}")
    rows = rows.dropna(subset=[value])
    if rows.empty:
        raise ValueError(f"figure {spec.file}: no row of {spec.source} has a {value!r} "
                         f"score{' where ' + str(dict(options['where'])) if options['where'] else ''}")
    labelled = rows.assign(
        method=rows[x].astype(str).agg(" ".join, axis=1),
        setting=rows[panels].astype(str).radd([f"{c}=" for c in panels]).agg(", ".join, axis=1) if panels else "")
    return labelled.groupby(["setting", "method", "seed"], as_index=False, sort=False)[value].mean().rename(
        columns={value: "mean"})


def draw_seed_means(frame: pd.DataFrame, spec: FigureSpec) -> Figure:
    """Kind ``seed_means``: each run's mean over its clients, one dot per seed, a bar at their mean."""
    per_seed = _by_seed(frame, spec)
    order = list(dict.fromkeys(per_seed["method"]))
    return plots.seed_means_by_setting(per_seed, order=order, ylabel=f"mean client {spec.options['value']}")


def draw_paper_vs_measured(frame: pd.DataFrame, spec: FigureSpec) -> Figure:
    """Kind ``paper_vs_measured``: one line per row of the table, the measured number beside the paper's, in
    one panel per metric (the lines of every panel name the same rows)."""
    frame = frame.rename(columns={"Unnamed: 0": "method"})  # a table written with its index
    if "metric" not in frame:
        frame = frame.assign(metric="value")
    labels = [column for column in frame.columns if column not in (*NUMBER_COLUMNS, "metric")]
    frame = frame.assign(line=frame[labels].astype(str).agg(", ".join, axis=1) if labels else frame.index.astype(str))
    lines = list(dict.fromkeys(frame["line"]))
    metrics = list(dict.fromkeys(frame["metric"].astype(str)))
    fig, axes = plt.subplots(1, len(metrics), figsize=(2 + 3.5 * len(metrics), 1.2 + 0.24 * len(lines)),
                             sharey=True, squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        rows = frame[frame["metric"].astype(str) == metric].drop_duplicates("line").set_index("line")
        plots.paper_vs_measured(rows.reindex(lines), [], ax=ax)
        ax.set_yticks(range(len(lines))[::-1], lines, fontsize="small")
        ax.set_title(metric, fontsize="medium", pad=22)
    fig.tight_layout()
    return fig


def draw_benchmark_seed_means(clients: pd.DataFrame, spec: FigureSpec) -> Figure:
    """Kind ``benchmark_seed_means``: every method's per-seed mean own-protocol accuracy in every setting."""
    from gflkit.papers import benchmark

    per_seed = benchmark.seed_means(clients)
    return plots.seed_means_by_setting(per_seed, order=list(dict.fromkeys(clients["variant"])))


def draw_benchmark_critical_difference(clients: pd.DataFrame, spec: FigureSpec) -> Figure:
    """Kind ``benchmark_critical_difference``: each seed's and the mean's critical-difference diagram."""
    from gflkit.papers import benchmark

    return plots.critical_difference_panels(benchmark.seed_rank_panels(clients))


DRAWERS: dict[str, Callable[[pd.DataFrame, FigureSpec], Figure]] = {
    "seed_means": draw_seed_means,
    "paper_vs_measured": draw_paper_vs_measured,
    "benchmark_seed_means": draw_benchmark_seed_means,
    "benchmark_critical_difference": draw_benchmark_critical_difference,
}


def source_files(folder: Path, spec: FigureSpec) -> list[Path]:
    """The CSVs ``spec`` is drawn from: its source in ``folder`` (for the benchmark, its per-client files and those
    of the folders it continues, earliest first); empty when the folder holds none of it."""
    if not any(folder.glob(spec.source)):
        return []
    folders = [folder]
    if spec.kind.startswith("benchmark_"):
        folders = [*(folder.parent / name for name in paper_of_folder(folder.name).continues.get(folder.name, ())),
                   folder]
    return [path for each in folders for path in sorted(each.glob(spec.source))]


def source_digest(files: list[Path]) -> str:
    """``sha256:<hex>`` of the files' names and contents, stored in the PNG so that a stale figure is seen."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.parent.name}/{path.name}\n".encode())
        digest.update(path.read_bytes())
    return f"sha256:{digest.hexdigest()}"


def read_source(folder: Path, spec: FigureSpec) -> pd.DataFrame | None:
    """The rows ``spec`` is drawn from (:func:`source_files`), or None when the folder holds none of them."""
    files = source_files(folder, spec)
    if not files:
        return None
    if spec.kind.startswith("benchmark_"):
        from gflkit.papers import benchmark

        return benchmark.committed_clients(list(dict.fromkeys(path.parent for path in files)))
    return pd.read_csv(files[0])


@dataclass(frozen=True)
class Drawn:
    """What :func:`draw_folder` did: the figures it saved and the declared ones it skipped, with why."""

    saved: tuple[Path, ...]
    skipped: tuple[tuple[str, str], ...]


def declared_figures(folder: Path) -> list[FigureSpec]:
    """The figures the paper of ``folder`` declares (:data:`gflkit.catalog.PAPERS`)."""
    return list(paper_of_folder(Path(folder).name).figures)


def draw(folder: Path, spec: FigureSpec) -> Figure | None:
    """Figure ``spec`` drawn from ``folder``'s CSVs, or None when the folder lacks its CSV."""
    frame = read_source(folder, spec)
    return None if frame is None else DRAWERS[spec.kind](frame, spec)


def drawn_from(png: Path) -> str | None:
    """The ``Source`` digest a figure of :func:`draw_folder` was drawn from, or None for another PNG."""
    from PIL import Image

    with Image.open(png) as image:
        return image.info.get("Source")


def is_current(folder: Path, spec: FigureSpec) -> bool:
    """Whether ``folder``'s PNG of ``spec`` was drawn from the CSVs the folder holds now."""
    png = folder / spec.file
    return png.exists() and drawn_from(png) == source_digest(source_files(folder, spec))


def draw_folder(folder: str | Path, out: str | Path | None = None) -> Drawn:
    """Draw every declared figure of results ``folder`` whose CSV it holds, saved under ``out`` (default: the
    folder itself), each file written atomically. ``FileNotFoundError`` for a missing folder; ``KeyError`` for a
    folder that is no paper's ``<name>_<profile>``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} is not a results folder (e.g. docs/results/jgesr_paper1)")
    out = Path(out) if out is not None else folder
    saved, skipped = [], []
    for spec in declared_figures(folder):
        fig = draw(folder, spec)
        if fig is None:
            skipped.append((spec.file, f"no {spec.source}"))
            continue
        try:
            with atomic_write(out / spec.file) as handle:
                handle.write(png_bytes(fig, source_digest(source_files(folder, spec)), DPI))
        finally:
            plt.close(fig)
        saved.append(out / spec.file)
    return Drawn(tuple(saved), tuple(skipped))


__all__ = ["DRAWERS", "Drawn", "declared_figures", "draw", "draw_folder", "drawn_from", "is_current",
           "read_source", "source_digest", "source_files"]
