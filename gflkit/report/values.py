"""Numbers in the report's prose, read from the committed CSVs when the site is built, and the check that no
measured number is typed by hand.

A page writes a measured number as a reference to one cell of a committed CSV under ``docs/results/``::

    PDCA reaches {gflkit-value}`jgesr_paper1/table1.csv mean s=0.1 method=pdca` % at s = 0.1.

— the file, the column, then ``column=value`` filters that must select exactly one row (compared as the CSV's
text; a name or value with spaces in quotes, ``"seed 0"``, ``setting="shards q=2"``), and optionally a format
such as ``:.1f`` (numbers default to ``:.2f``; text, e.g. a verdict, is shown as
it is). A number the paper reports is written ``{gflkit-paper}`95.17``` and shown marked as the paper's. Settings
are written as code (``lr = 0.01``) or math (``$\\alpha = 0.5$``). :func:`hand_typed_numbers` finds every other
decimal in a page's prose, and :func:`diary_lines` every line that narrates how the work was done (a date, a
working period); ``tests/test_site.py`` fails on either.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

#: the default format of a number read from a CSV
DEFAULT_FORMAT = ".2f"


@dataclass(frozen=True)
class ValueReference:
    """One cell of a committed CSV: ``file`` (relative to ``docs/results/``), its ``column``, the ``filters``
    ``{column: text}`` that select its row and the ``format`` of a number."""

    file: str
    column: str
    filters: tuple[tuple[str, str], ...]
    format: str = DEFAULT_FORMAT

    @classmethod
    def parse(cls, text: str) -> ValueReference:
        """The reference written ``FILE COLUMN [key=value ...] [:FORMAT]`` (a column or value with spaces in
        quotes: ``"seed 0"``, ``setting="shards q=2"``); ``ValueError`` naming the mistake."""
        try:
            tokens = shlex.split(text)
        except ValueError as error:
            raise ValueError(f"{text!r}: {error} (close every quote)") from None
        if len(tokens) < 2 or not tokens[0].endswith(".csv"):
            raise ValueError(f"{text!r}: write 'FOLDER/FILE.csv COLUMN key=value ... [:.2f]', e.g. "
                             "'jgesr_paper1/table1.csv mean s=0.1 method=pdca'")
        file, column, *rest = tokens
        form = rest.pop()[1:] if rest and rest[-1].startswith(":") else DEFAULT_FORMAT
        malformed = [token for token in rest if "=" not in token or token.startswith("=")]
        if malformed:
            raise ValueError(f"{text!r}: filters are written column=value, not {malformed}")
        return cls(file, column, tuple(tuple(token.split("=", 1)) for token in rest), form)

    def read(self, results: str | Path) -> str:
        """The referenced cell of ``results/<file>`` as text: a number in :attr:`format`, other text as it is.
        ``ValueError`` when the file, the column or a filter's column is missing or the filters do not select
        exactly one row."""
        path = Path(results) / self.file
        if not path.is_file():
            raise ValueError(f"{self.file}: no such committed CSV under {results}")
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        unknown = [c for c in (self.column, *(key for key, _ in self.filters)) if c not in frame.columns]
        if unknown:
            raise ValueError(f"{self.file} has no column(s) {unknown}; columns: {list(frame.columns)}")
        rows = frame
        for key, value in self.filters:
            rows = rows[rows[key] == value]
        if len(rows) != 1:
            where = ", ".join(f"{k}={v}" for k, v in self.filters) or "no filter"
            raise ValueError(f"{self.file}: {where} selects {len(rows)} rows, not one; add or fix a column=value filter")
        text = rows[self.column].iloc[0]
        try:
            return format(float(text), self.format)
        except ValueError:
            return text


#: a decimal number (``12.5``, ``0.05``, ``−3.20``)
DECIMAL = re.compile(r"(?<![\w.])[−-]?\d+\.\d+(?![\w.])")
#: what may hold a decimal: code, math, a role, a directive's fenced block, an HTML comment, a link's target
_EXEMPT = [
    re.compile(r"^(```|~~~).*?^\1", re.S | re.M),  # fenced blocks: directives, code
    re.compile(r"<!--.*?-->", re.S),
    re.compile(r"\$\$.*?\$\$", re.S),
    re.compile(r"\{[\w-]+\}`[^`]*`"),  # roles
    re.compile(r"`[^`\n]*`"),
    re.compile(r"\$[^$\n]+\$"),
    re.compile(r"\]\([^)]*\)"),
]


def _blank(text: str) -> str:
    """``text`` with every exempt span replaced by spaces (line breaks kept, so line numbers still hold)."""
    for pattern in _EXEMPT:
        text = pattern.sub(lambda match: re.sub(r"[^\n]", " ", match.group(0)), text)
    return text


def hand_typed_numbers(text: str) -> list[tuple[int, str]]:
    """``(line number, decimal)`` of every decimal a page's markdown ``text`` holds outside code, math, roles,
    fenced blocks, comments and link targets: a number typed by hand."""
    return [(text.count("\n", 0, match.start()) + 1, match.group(0)) for match in DECIMAL.finditer(_blank(text))]


#: words that narrate how the work was done rather than what holds
DIARY = re.compile(r"\b(20\d\d-\d\d-\d\d|sessions?|previous entry|this entry|earlier entry|re-measured on|"
                   r"(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth)"
                   r" (stop|period))\b", re.I)


def diary_lines(text: str) -> list[tuple[int, str]]:
    """``(line number, word)`` of every line of a page's prose (outside code and fenced blocks) that dates an
    entry or speaks of the project's own working periods: history belongs in the changelog page."""
    return [(text.count("\n", 0, match.start()) + 1, match.group(0)) for match in DIARY.finditer(_blank(text))]


__all__ = ["DECIMAL", "DEFAULT_FORMAT", "DIARY", "ValueReference", "diary_lines", "hand_typed_numbers"]
