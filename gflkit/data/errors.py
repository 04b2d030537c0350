"""The data layer's errors: each names what went wrong and how to fix it, and derives from a builtin error
class too (a missing file is a :class:`FileNotFoundError`, a bad digest a :class:`ValueError`)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from gflkit.data.registry import DatasetSpec, RawFile


class DataError(Exception):
    """Base class of the data layer's own errors (each also derives from a builtin error class)."""


class DatasetNotFoundError(DataError, FileNotFoundError):
    """Raw files of a dataset are missing and could not be downloaded; the message says how to fix it."""

    def __str__(self) -> str:  # FileNotFoundError would otherwise format (errno, strerror) tuples
        return str(self.args[0]) if self.args else ""

    @classmethod
    def for_files(cls, spec: DatasetSpec, root: Path, missing: Sequence[RawFile],
                  reason: str = "") -> DatasetNotFoundError:
        """The error for ``spec``'s ``missing`` raw files under data ``root``: which files, where they were looked
        for, and the fixes (another root, or ``gflkit data fetch`` when every file has a URL, else how to obtain
        them); ``reason``: why a download attempt failed."""
        names = ", ".join(f"'{r.path}'" for r in missing[:4])
        if len(missing) > 4:
            names += f" and {len(missing) - 4} more of {len(spec.files)} expected"
        head = (f"dataset '{spec.name}': raw file{'s' if len(missing) > 1 else ''} {names} not found under data "
                f"root '{root}' (looked in {spec.raw_dir(root)}).")
        example = f"{spec.folder or spec.name}/raw/{missing[0].path}"
        fixes = [f"set GFLKIT_DATA to a folder holding {example}", "pass root=... (CLI: --root ...)"]
        if all(r.downloadable for r in missing):
            fixes.append(f"or connect to the internet and run `gflkit data fetch {spec.name}` (downloads are verified "
                         f"against the pinned sha256)")
            obtain = ""
        else:
            fixes[-1] = "or " + fixes[-1]
            obtain = f" These files cannot be downloaded from a single URL: {spec.obtain}" if spec.obtain else ""
        message = f"{head} Fix: {', '.join(fixes)}; source: {spec.source}.{obtain}"
        if reason:
            message += f" (Download attempt: {reason})"
        return cls(message)


class ChecksumError(DataError, ValueError):
    """A file's digest (sha256, or git blob id) differs from the pinned value; the message names file,
    expected and actual digest."""

    def __init__(self, path: str | Path, expected: str, actual: str, hint: str = "", kind: str = "sha256") -> None:
        self.path, self.expected, self.actual = Path(path), expected, actual
        message = (f"{kind} mismatch for {path}: expected {expected}, got {actual}. "
                   + (hint or "The file is corrupted, truncated or a different version: delete it and run "
                      "`gflkit data fetch <name>` or replace it with the canonical file."))
        super().__init__(message)


class UnknownDatasetError(DataError, KeyError, ValueError):
    """A dataset name that is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DownloadError(DataError, OSError):
    """Downloading a file failed (no network, HTTP error, missing archive member)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
