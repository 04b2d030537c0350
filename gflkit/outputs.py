"""What a notebook publishes, written by one call: its tables as CSV files and its figures as PNG files.

A paper module derives the tables a notebook publishes, keyed by their file names (e.g.
:func:`gflkit.papers.quickstart.derive`); the notebook shows them, collects its figures under their file names,
and hands both to :func:`write_outputs` in its last cell. So the file contract of a results folder is read in
the paper's module, not gathered from ``to_csv`` calls spread through cells, and a notebook that fails halfway
writes nothing (``gflkit notebook`` then keeps the previous outputs, :mod:`gflkit.staging`).
"""
from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from gflkit.atomic import atomic_write, atomic_write_text

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: the resolution of a published figure
DPI = 150


def _checked_name(name: object, suffix: str, kind: str) -> str:
    """``name`` when it is a plain file name ending in ``suffix``; ``ValueError`` naming the fix otherwise."""
    if not isinstance(name, str) or not name.endswith(suffix) or name != Path(name).name or name.startswith("."):
        raise ValueError(f"{kind} name {name!r} must be a plain file name ending in {suffix!r} (no folder, not "
                         f"hidden), e.g. 'table1{suffix}'")
    return name


def png_bytes(figure: Figure, source: str = "", dpi: int = DPI) -> bytes:
    """``figure`` as PNG bytes (tight bounding box, ``dpi`` dots per inch) with no timestamp or software version, so a
    redraw of the same data is the same file; ``source`` (e.g. the digest of the CSVs it was drawn from,
    :func:`gflkit.report.figures.source_digest`) is kept in its ``Source`` text chunk."""
    buffer = io.BytesIO()
    metadata = {"Software": None, **({"Source": source} if source else {})}
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight", metadata=metadata)
    return buffer.getvalue()


def write_outputs(folder: str | Path, tables: Mapping[str, pd.DataFrame],
                  figures: Mapping[str, Figure] | None = None) -> list[Path]:
    """Write every table of ``tables`` (``{file name: frame}``, written without the index) and every figure of
    ``figures`` (``{file name: matplotlib figure}``) into ``folder``, created if missing; returns the paths
    written, tables first.

    Every name is checked, and every figure rendered, before the first file is written: a mistake (a name
    with a folder or the wrong suffix) is a ``ValueError`` that leaves
    ``folder`` as it was.
    Each file is replaced atomically (:func:`gflkit.atomic.atomic_write`).
    """
    figures = dict(figures or {})
    csvs = {_checked_name(name, ".csv", "table"): frame.to_csv(index=False) for name, frame in tables.items()}
    pngs = {_checked_name(name, ".png", "figure"): png_bytes(figure) for name, figure in figures.items()}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in csvs.items():
        atomic_write_text(folder / name, text)
        written.append(folder / name)
    for name, data in pngs.items():
        with atomic_write(folder / name) as handle:
            handle.write(data)
        written.append(folder / name)
    return written


__all__ = ["DPI", "png_bytes", "write_outputs"]
