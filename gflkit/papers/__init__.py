"""The papers' reported numbers, stored as data, and the paper-vs-measured comparison.

Each paper has a CSV file beside this module (``fedska.csv``, ...) with one reported number per row:
``table, dataset, setting, method, metric, value, std``. Numbers are transcribed from the paper's text
(``../shared/papers``); they are shown next to measured ones and never used to produce them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

import pandas as pd

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
    """Measured numbers beside the paper's: columns ``*on, measured, paper, difference``.

    ``difference = measured − paper``. Every measured row is kept (the paper column is NaN where the
    paper reports nothing); paper rows without a measured counterpart are dropped.
    """
    left = measured[list(on) + [measured_col]].rename(columns={measured_col: "measured"})
    right = paper[list(on) + [paper_col]].rename(columns={paper_col: "paper"})
    table = left.merge(right, on=list(on), how="left")
    table["difference"] = table["measured"] - table["paper"]
    return table


@dataclass(frozen=True)
class Claim:
    """A qualitative statement of a paper and whether our measurements support it (``None``: not run)."""

    statement: str
    reproduced: bool | None
    evidence: str
    profile: str

    def as_row(self) -> dict[str, str]:
        """A row of the claims table."""
        verdicts = {True: "reproduced", False: "not reproduced", None: "not run"}
        return {
            "claim": self.statement,
            "verdict": verdicts[None if self.reproduced is None else bool(self.reproduced)],
            "evidence": self.evidence,
            "profile": self.profile,
        }


def check_claim(statement: str, needs: Iterable[str], ran: Iterable[str],
                check: Callable[[], tuple[bool, str]], profile: str) -> Claim:
    """The claim ``statement``, checked by ``check()`` (verdict and evidence) when every method or
    dataset it ``needs`` is among those that ``ran``; otherwise "not run", naming what is missing — so an
    override that runs a subset of the methods still gets a claims table. ``check()`` may also return
    ``(None, why)`` when what ran cannot decide the claim (e.g. no method learned at this budget)."""
    missing = [name for name in dict.fromkeys(needs) if name not in set(ran)]
    if missing:
        return Claim(statement, None, f"needs {missing}, which this run did not include", profile)
    reproduced, evidence = check()
    return Claim(statement, None if reproduced is None else bool(reproduced), evidence, profile)


def standing(scores: pd.Series, method: str, unit: str = " %") -> str:
    """Where ``method`` stands among ``scores`` (indexed by method, higher is better) in words — "ranks 2
    of 8 (91.20 %)" — or "did not run" when it is not among them (an override ran a subset)."""
    if method not in scores.index:
        return "did not run"
    ranked = scores.sort_values(ascending=False)
    return f"ranks {list(ranked.index).index(method) + 1} of {len(ranked)} ({scores[method]:.2f}{unit})"


def claims_table(claims: Sequence[Claim]) -> pd.DataFrame:
    """The claims as a table with columns ``claim, verdict, evidence, profile``."""
    return pd.DataFrame([c.as_row() for c in claims], columns=["claim", "verdict", "evidence", "profile"])
