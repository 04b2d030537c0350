"""Atomic file writes: a reader never sees half a file, two writers never share a temporary name; a full disk
is said in one line (:class:`DiskFullError`)."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Iterator

#: What torch.save raises when the disk fills under it (its zip writer checks positions, not errno).
TORCH_SHORT_WRITE = "unexpected pos"


class DiskFullError(OSError):
    """A write failed for want of space; the message names the file and the free space of its folder."""


def disk_full(path: str | Path, error: BaseException) -> DiskFullError | None:
    """The :class:`DiskFullError` that ``error`` (raised while writing ``path``) means, or None when it is
    something else: ``ENOSPC`` / ``EDQUOT``, or torch's short write."""
    full = (isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)) or (
        isinstance(error, RuntimeError) and TORCH_SHORT_WRITE in str(error))
    if not full or isinstance(error, DiskFullError):
        return None
    folder = Path(path).parent
    try:
        free = f"{shutil.disk_usage(folder).free / 2**20:.1f} MiB free there"
    except OSError:
        free = "its free space unknown"
    return DiskFullError(errno.ENOSPC, f"no space left to write {path} ({free}): free some space on that disk or "
                                       f"choose another folder, then run the same command again")


def _mode_for(path: Path) -> int:
    """The permissions ``open(path, "w")`` would leave: an existing file's own, else 0o666 less the umask
    (a temporary file is created 0o600, which would hide results from the other readers of a shared folder)."""
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """Write ``path`` atomically: a uniquely named temporary file in the same folder, flushed to disk and
    renamed over ``path`` when the block succeeds, removed when it fails (or the process is killed
    before the rename: then ``path`` keeps its previous content)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        full = disk_full(path, error)
        if full is not None:
            raise full from None
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`)."""
    with atomic_write(path, "w") as handle:
        handle.write(text)


__all__ = ["DiskFullError", "atomic_write", "atomic_write_text", "disk_full"]
