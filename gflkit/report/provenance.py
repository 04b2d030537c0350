"""Where an archived notebook's numbers come from: every table it shows must be one of the CSVs beside it.

An archived notebook (:mod:`gflkit.report.archive`) shows tables as HTML; the CSVs beside it are what the
same execution wrote. A displayed table is *explained* when a single CSV of its folder contains each of its
numbers at the precision shown (a cell ``81.80`` is explained by a CSV value ``x`` with
``|x - 81.80| <= 0.005``) and each of its text cells that carries digits verbatim (or, when pandas cut
it short with ``...``, as a prefix). Pivots, column subsets and rounding of a saved frame are therefore
explained; a number typed into the notebook by hand, or a CSV edited after the run, is not.

Row and column labels (``<th>`` cells) are not checked: they name what a number is, and numeric labels
(a shard count, a round) would be explained by almost any CSV.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

NUMBER = re.compile(r"^[+\-−]?(\d+(?:\.(\d*))?|\.\d+)(?:[eE]([+\-]?\d+))?%?$")


class _TableCells(HTMLParser):
    """Collects the text of every ``<td>`` of the tables in an HTML fragment, one list per table."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "td":
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._cell is not None:
            self.tables[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table_cells(html: str) -> list[list[str]]:
    """The ``<td>`` texts of each table in ``html`` (entities decoded), in document order."""
    parser = _TableCells()
    parser.feed(html)
    parser.close()
    return parser.tables


def parse_number(text: str) -> tuple[float, float] | None:
    """``(value, half of the last shown digit)`` of a displayed number such as ``81.80``, ``-3``,
    ``1.5e-05`` or ``12.5%``; None when ``text`` is not a plain number."""
    match = NUMBER.match(text.strip())
    if not match:
        return None
    decimals = len(match.group(2) or "")
    exponent = int(match.group(3) or 0)
    value = float(text.strip().rstrip("%").replace("−", "-"))
    return value, 0.5 * 10.0 ** (exponent - decimals)


@dataclass(frozen=True)
class CsvContents:
    """The numeric values (sorted) and the text cells of one CSV."""

    name: str
    values: np.ndarray
    texts: frozenset[str]

    @classmethod
    def read(cls, path: Path) -> CsvContents:
        """Read ``path`` without type guessing beyond numbers: every cell, index and header included."""
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, header=None)
        cells = [cell.strip() for cell in frame.to_numpy().ravel() if cell.strip()]
        numbers = [value for cell in cells for value in [_as_float(cell)] if value is not None]
        return cls(path.name, np.sort(np.asarray(numbers, dtype=float)), frozenset(cells))

    def contains_number(self, value: float, tolerance: float) -> bool:
        """Whether a value of this CSV rounds to ``value`` at the shown precision."""
        slack = tolerance * (1 + 1e-9) + 1e-12 * max(1.0, abs(value))
        i = np.searchsorted(self.values, value - slack)
        return bool(i < len(self.values) and self.values[i] <= value + slack)

    def contains_text(self, text: str) -> bool:
        """Whether ``text`` is a cell of this CSV, or the start of one that pandas cut short with ``...``."""
        if text in self.texts:
            return True
        shortened = text.endswith("...") and text[:-3]
        return bool(shortened) and any(cell.startswith(shortened) for cell in self.texts)


def _as_float(cell: str) -> float | None:
    try:
        value = float(cell.replace("−", "-"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def unexplained(cells: Iterable[str], csv: CsvContents) -> list[str]:
    """The cells of one displayed table that ``csv`` does not explain (see the module docstring)."""
    missing = []
    for text in cells:
        number = parse_number(text)
        if number is not None:
            if not csv.contains_number(*number):
                missing.append(text)
        elif any(ch.isdigit() for ch in text) and not csv.contains_text(text):
            missing.append(text)
    return missing


def html_tables(notebook: Mapping[str, Any]) -> list[tuple[int, str]]:
    """``(cell index, HTML)`` of every table a notebook's code cells show (``text/html`` outputs)."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            html = output.get("data", {}).get("text/html")
            if html is not None:
                html = "".join(html) if isinstance(html, list) else html
                if "<table" in html:
                    found.append((index, html))
    return found


@dataclass(frozen=True)
class Unexplained:
    """A displayed table that no CSV of its folder explains: the nearest CSV and the cells it lacks."""

    cell: int
    nearest_csv: str | None
    missing: list[str]

    def __str__(self) -> str:
        where = f"closest CSV {self.nearest_csv} lacks" if self.nearest_csv else "no CSV beside it; cells"
        return f"cell {self.cell}: {where} {self.missing[:8]}{' …' if len(self.missing) > 8 else ''}"


def check_notebook(notebook: Mapping[str, Any], folder: Path) -> list[Unexplained]:
    """Every table of ``notebook`` that no single CSV in ``folder`` explains (empty: all are explained)."""
    csvs = [CsvContents.read(path) for path in sorted(folder.glob("*.csv"))]
    problems = []
    for cell, html in html_tables(notebook):
        for cells in table_cells(html):
            if not cells:
                continue
            gaps = sorted(((unexplained(cells, csv), csv.name) for csv in csvs), key=lambda gap: len(gap[0]))
            if not gaps:
                problems.append(Unexplained(cell, None, cells))
            elif gaps[0][0]:
                problems.append(Unexplained(cell, gaps[0][1], gaps[0][0]))
    return problems
