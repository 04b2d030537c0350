"""The papers' reported numbers, stored as data, the paper-vs-measured comparison, and the papers' claims.

Each paper has a CSV file beside this module (``fedska.csv``, ...) with one reported number per row:
``table, dataset, setting, method, metric, value, std``. Numbers are transcribed from the paper's text
(``../shared/papers``); they are shown next to measured ones and never used to produce them. A claim's
verdict (:class:`~gflkit.papers.verdict.Verdict`) comes from its check; a claim that compares measured
numbers is decided against their noise (:mod:`gflkit.papers.comparison`). :data:`PAPERS` is the registry of
the papers (:mod:`gflkit.catalog`): their profiles, archived executions, pages and figures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import pandas as pd

from gflkit.catalog import PAPERS, FigureSpec, Paper
from gflkit.papers.comparison import Comparison, Difference, every
from gflkit.papers.verdict import Verdict

HERE = Path(__file__).parent


def available_papers() -> list[str]:
    """Papers with reported numbers stored here."""
    return sorted(p.stem for p in HERE.glob("*.csv"))


def reported(paper: str, table: str | None = None) -> pd.DataFrame:
    """The numbers ``paper`` reports (optionally one ``table`` of it), as a tidy DataFrame."""
    path = HERE / f"{paper}.csv"
    if not path.exists():
        raise ValueError(f"no reported numbers for paper {paper!r}; available: {available_papers()}")
    numbers = pd.read_csv(path)
    if table is not None:
        numbers = numbers[numbers["table"] == table]
        if numbers.empty:
            raise ValueError(f"paper {paper!r} has no table {table!r}")
    return numbers.reset_index(drop=True)


def paper_vs_measured(
    measured: pd.DataFrame,
    paper: pd.DataFrame,
    on: Sequence[str],
    measured_col: str = "value",
    paper_col: str = "value",
) -> pd.DataFrame:
    """Measured numbers beside the paper's: columns ``*on, measured, paper, difference``, and
    ``measured_std, seeds`` after ``measured`` where ``measured`` has the columns ``std`` and ``seeds`` (the
    spread over seeds and how many ran, :func:`gflkit.metrics.long_summary`).

    ``difference = measured − paper``. Every measured row is kept (the paper column is NaN where the
    paper reports nothing); paper rows without a measured counterpart are dropped.
    """
    if measured.columns.has_duplicates:
        raise ValueError(f"measured has duplicate columns {sorted(set(measured.columns[measured.columns.duplicated()]))}")
    spread = ["std", "seeds"] if {"std", "seeds"} <= set(measured.columns) else []
    left = measured[list(on) + [measured_col, *spread]].rename(columns={measured_col: "measured",
                                                                       "std": "measured_std"})
    right = paper[list(on) + [paper_col]].rename(columns={paper_col: "paper"})
    table = left.merge(right, on=list(on), how="left")
    table["difference"] = table["measured"] - table["paper"]
    return table


#: what a claim's check returns first — whether it holds (a claim that is no comparison), its verdict, or
#: the difference(s) that decide it (:mod:`gflkit.papers.comparison`)
Outcome = bool | None | Verdict | Difference | Comparison
CLAIM_COLUMNS = ("id", "claim", "verdict", "difference", "interval", "noise model", "evidence", "profile")
#: a claim's id: lower-case words joined by ``_``, unique within its paper
CLAIM_ID = re.compile(r"[a-z0-9]+(_[a-z0-9]+)*")


@dataclass(frozen=True)
class Claim:
    """A qualitative statement of a paper, our verdict on it and the measurements behind it.

    ``key``: the claim's stable id within its paper (:data:`CLAIM_ID`), what tests, CSVs and later runs'
    comparisons identify it by; ``statement`` is display text and may be reworded.
    ``differences``: for a claim that compares measured numbers, the differences that decided it, each with
    a label (the setting it belongs to; empty for a claim decided by one difference).
    """

    key: str
    statement: str
    verdict: Verdict
    evidence: str
    profile: str
    differences: tuple[tuple[str, Difference], ...] = ()

    def _each(self, text: Callable[[Difference], str]) -> str:
        """``text`` of every difference, labelled when it has a label; "—" for a claim that compares nothing."""
        return "; ".join(f"{label}: {text(d)}" if label else text(d) for label, d in self.differences) or "—"

    def as_row(self) -> dict[str, str]:
        """A row of the claims table (columns :data:`CLAIM_COLUMNS`)."""
        decided = [d for _, d in self.differences if not d.short_of and not d.identical]
        models = dict.fromkeys(d.model for d in decided)
        return {
            "id": self.key,
            "claim": self.statement,
            "verdict": self.verdict.value,
            "difference": self._each(lambda d: d.estimate_text),
            "interval": self._each(lambda d: d.interval_text),
            "noise model": "; ".join(models) or "—",
            "evidence": self.evidence,
            "profile": self.profile,
        }


def check_claim(key: str, statement: str, needs: Iterable[str], ran: Iterable[str],
                check: Callable[[], tuple[Outcome, str]], profile: str) -> Claim:
    """The claim ``statement`` (stable id ``key``, :data:`CLAIM_ID`), checked by ``check()`` when every method or dataset it ``needs`` is among
    those that ``ran``; otherwise "not run", naming what is missing — so an override that runs a subset of
    the methods still gets a claims table.

    ``check()`` returns ``(outcome, evidence)``. The outcome of a comparison is a
    :class:`~gflkit.papers.comparison.Difference` or a :class:`~gflkit.papers.comparison.Comparison` (several
    differences, e.g. one per setting): its verdict may be *inconclusive*, and the table shows the
    differences, their intervals and noise models. A claim that is no comparison ("the objective is
    non-increasing") returns whether it holds (``True`` / ``False``), or ``None`` when what ran cannot
    decide it (e.g. no method learned at this budget: not run).
    """
    if not CLAIM_ID.fullmatch(key):
        raise ValueError(f"claim id {key!r} must be lower-case words joined by '_', e.g. 'pdca_best'")
    missing = [name for name in dict.fromkeys(needs) if name not in set(ran)]
    if missing:
        return Claim(key, statement, Verdict.NOT_RUN, f"needs {missing}, which this run did not include", profile)
    outcome, evidence = check()
    if isinstance(outcome, Difference):
        outcome = every({"": outcome})
    if isinstance(outcome, Comparison):
        return Claim(key, statement, outcome.verdict, evidence, profile, outcome.parts)
    return Claim(key, statement, Verdict.of(outcome), evidence, profile)


def standing(scores: pd.Series, method: str, unit: str = " %") -> str:
    """Where ``method`` stands among ``scores`` (indexed by method, higher is better) in words — "ranks 2
    of 8 (91.20 %)" — or "did not run" when it is not among them (an override ran a subset)."""
    if method not in scores.index:
        return "did not run"
    ranked = scores.sort_values(ascending=False)
    return f"ranks {list(ranked.index).index(method) + 1} of {len(ranked)} ({scores[method]:.2f}{unit})"


def committed_csvs(folder: str | Path, files: Mapping[str, str], required: Sequence[str],
                   notebook: str) -> dict[str, pd.DataFrame | None]:
    """The CSVs ``files`` (``{name: file}``) of a results folder a paper's ``decide_from_clients`` reads, by name:
    None for an absent optional one (its claims are then "not run"); a ``FileNotFoundError`` names a missing
    ``required`` one and the ``notebook`` that writes it."""
    folder = Path(folder)
    missing = [files[name] for name in required if not (folder / files[name]).exists()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {missing}, which the {notebook} notebook writes")
    return {name: pd.read_csv(folder / file) if (folder / file).exists() else None for name, file in files.items()}


def _named(row: pd.Series, keys: Sequence[str]) -> str:
    """A row's key as ``method=pdca, seed=0``."""
    return ", ".join(f"{key}={row[key]}" for key in keys)


def append_seeds(committed: pd.DataFrame, later: pd.DataFrame, keys: Sequence[str],
                 tolerance: float = 1e-6) -> pd.DataFrame:
    """Per-client rows of later runs (``later``: more seeds, more methods) appended to a results folder's
    committed rows, each row once: what whoever ran a grid's next seeds commits before re-deciding
    the claims from the folder.

    A row is identified by its ``keys`` (e.g. method, setting, seed, client). A row both frames hold is the
    same run computed twice, so its numbers must agree (within ``tolerance``: a CSV round trip rounds); a
    ``ValueError`` names the first that does not — a later run whose configuration changed is a new grid, not
    more seeds of this one. Also ``ValueError`` when the frames' columns differ or a key repeats in one frame.
    Returns the committed rows, then the new ones, in their order.
    """
    keys = list(keys)
    if set(committed.columns) != set(later.columns):
        raise ValueError(f"the later rows' columns {sorted(later.columns)} are not the committed rows' "
                         f"{sorted(committed.columns)}")
    missing = [k for k in keys if k not in committed.columns]
    if missing:
        raise ValueError(f"keys {missing} are not columns of the rows; columns: {list(committed.columns)}")
    for name, frame in (("committed", committed), ("later", later)):
        repeated = frame[frame.duplicated(keys, keep=False)]
        if not repeated.empty:
            raise ValueError(f"the {name} rows repeat the key {_named(repeated.iloc[0], keys)}: each of "
                             f"{keys} names one row")
    later = later[list(committed.columns)]
    shared = committed.merge(later, on=keys, suffixes=("", " later"))
    for column in (c for c in committed.columns if c not in keys):
        before, after = shared[column], shared[f"{column} later"]
        if pd.api.types.is_numeric_dtype(before) and pd.api.types.is_numeric_dtype(after):
            differs = ~((before - after).abs().le(tolerance) | (before.isna() & after.isna()))
        else:
            differs = before.astype(str) != after.astype(str)
        if differs.any():
            row = shared[differs].iloc[0]
            raise ValueError(f"the row {_named(row, keys)} differs between the committed ({row[column]}) and the "
                             f"later ({row[f'{column} later']}) runs in {column!r}: the same run must give the same "
                             "numbers (was its configuration or the code changed?)")
    new = later.merge(committed[keys], on=keys, how="left", indicator=True)["_merge"].eq("left_only").to_numpy()
    return pd.concat([committed, later[new]], ignore_index=True)


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a table with columns :data:`CLAIM_COLUMNS`; ``ValueError`` when two claims share an id."""
    keys = [c.key for c in claims]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    if repeated:
        raise ValueError(f"claim ids {repeated} name more than one claim; each claim needs its own id")
    return pd.DataFrame([c.as_row() for c in claims], columns=list(CLAIM_COLUMNS))
