"""Atomic file writes: a reader never sees half a file, two writers never share a temporary name."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write ``path`` atomically: a uniquely named temporary file in the same folder, flushed to disk and
    renamed over ``path`` when the block succeeds, removed when it fails (or the process is killed
    before the rename: then ``path`` keeps its previous content)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`)."""
    with atomic_write(path, "w") as handle:
        handle.write(text)


__all__ = ["atomic_write", "atomic_write_text"]
