"""The notebooks as data: each notebook's profiles and whether its paper module publishes ``grids``.

The ``gflkit`` command checks a notebook name, a profile and ``precompute``'s target against this table before
it imports a paper module (and so torch): it is the standard library only. ``tests/test_cli_refusals.py``
checks that it says what the paper modules declare (``PROFILES``, ``grids``), so the two cannot drift apart.
"""
from __future__ import annotations

from typing import NamedTuple


class NotebookEntry(NamedTuple):
    """A notebook's profiles, in the order its paper module declares them, and whether it publishes grids."""

    profiles: tuple[str, ...]
    grids: bool


NOTEBOOKS: dict[str, NotebookEntry] = {
    "quickstart": NotebookEntry(("smoke", "ci", "paper"), grids=True),
    "fedska": NotebookEntry(("smoke", "ci", "paper1", "paper"), grids=True),
    "sfl": NotebookEntry(("smoke", "ci", "authors_code", "authors_code_ci", "paper"), grids=True),
    "jgesr": NotebookEntry(("smoke", "ci", "paper1", "paper"), grids=True),
    "fedcg": NotebookEntry(("smoke", "ci", "paper"), grids=True),
    "fedvgae": NotebookEntry(("smoke", "ci", "paper"), grids=True),
    "benchmark": NotebookEntry(("smoke", "ci", "paper1", "paper"), grids=True),
    "flower": NotebookEntry(("smoke", "ci", "paper"), grids=False),
}
