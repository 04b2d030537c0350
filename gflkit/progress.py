"""Progress bars that read well wherever gflkit runs.

``GFLKIT_PROGRESS`` picks the kind: ``auto`` (default: :mod:`tqdm.auto`, a widget in JupyterLab, text in a
terminal), ``text`` (plain text bars on stderr, updated at most every two seconds — what a notebook
executed by ``gflkit notebook`` shows, streamed to the terminal and saved readably in the executed
notebook instead of a widget's frozen "0%… 0/200" placeholder) or ``off``.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")

ENV_PROGRESS = "GFLKIT_PROGRESS"
PROGRESS_MODES = ("auto", "text", "off")


def progress_mode() -> str:
    """The progress mode from ``$GFLKIT_PROGRESS`` (default ``auto``); ValueError for an unknown one."""
    mode = os.environ.get(ENV_PROGRESS) or "auto"
    if mode not in PROGRESS_MODES:
        raise ValueError(f"{ENV_PROGRESS}={mode!r} is not a progress mode; use one of {list(PROGRESS_MODES)}")
    return mode


def progress_bar(iterable: Iterable[Any], *, desc: str, enabled: bool = True, leave: bool = False,
                 **options: Any):
    """A tqdm bar over ``iterable`` of the kind :func:`progress_mode` selects (``options`` go to tqdm)."""
    mode = progress_mode()
    if mode == "text":
        from tqdm.std import tqdm

        return tqdm(iterable, desc=desc, disable=not enabled, leave=leave, file=sys.stderr, ascii=True,
                    mininterval=2.0, ncols=100, **options)
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, disable=not enabled or mode == "off", leave=leave, **options)


def outer_progress(items: Iterable[T], *, desc: str, label: Callable[[T], str], unit: str = "it",
                   enabled: bool = True) -> Iterator[T]:
    """Iterate ``items`` showing "``desc``: i/n (label)" for the current one, around inner round bars.

    In ``text`` mode this is one plain line per item on stderr (two live text bars would need cursor
    movements, which a saved notebook shows as ``[A`` garbage); otherwise a tqdm bar kept on screen.
    """
    items = list(items)
    mode = progress_mode()
    if not enabled or mode == "off":
        yield from items
        return
    if mode == "text":
        for number, item in enumerate(items, 1):
            print(f"{desc}: {number}/{len(items)} ({label(item)})", file=sys.stderr, flush=True)
            yield item
        return
    bar = progress_bar(items, desc=desc, unit=unit, leave=True)
    for item in bar:
        bar.set_postfix_str(label(item))
        yield item
