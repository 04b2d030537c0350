"""Checking raw files against their pinned digests: sha256 (or git blob id) per file, with an index that spares
re-hashing unchanged files where a full check is not asked for.

The index (``sha256-index.json`` in the dataset's cache folder, :func:`gflkit.data.cache.cache_dir`) keys each
digest by path, size, mtime, ctime and inode; :func:`~gflkit.data.loading.load_dataset` (when a converted copy
exists) and ``gflkit data list`` may use it, while :func:`verify_dataset` (``gflkit data verify``) always
hashes every byte.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from gflkit.atomic import atomic_write
from gflkit.data.cache import HASH_INDEX, cache_dir
from gflkit.data.errors import ChecksumError, DatasetNotFoundError
from gflkit.data.registry import DatasetSpec, RawFile, data_root, get_spec, is_writable

CHUNK = 1 << 20


@dataclass(frozen=True)
class FileStatus:
    """The state of one raw file: ``present``, ``missing`` or ``checksum-bad``."""

    dataset: str
    relpath: str
    path: Path
    state: str
    expected_sha256: str
    actual_sha256: str | None = None
    size: int | None = None
    kind: str = "sha256"  #: what ``expected_sha256`` / ``actual_sha256`` hold — "sha256" or "git blob"

    @property
    def ok(self) -> bool:
        """True when the file is present with the pinned digest."""
        return self.state == "present"


def sha256_file(path: str | Path, chunk_size: int = CHUNK) -> str:
    """The sha256 (hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_file(path: str | Path, chunk_size: int = CHUNK) -> str:
    """The git blob id of a file, as ``git hash-object`` prints it: SHA-1 of ``"blob <size>\\0"`` + content."""
    path = Path(path)
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


class HashIndex:
    """sha256 of files keyed by absolute path + (size, mtime, ctime, inode), stored in the cache dir."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / HASH_INDEX
        self.entries: dict[str, list] = {}
        self.dirty = False
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.file.read_text())
            if isinstance(loaded, dict):
                self.entries = loaded

    def lookup(self, entry_name: Path, path: Path) -> str | None:
        entry = self.entries.get(str(entry_name))
        if isinstance(entry, list) and len(entry) == 5 and entry[:4] == _stat_key(path):
            return str(entry[4])
        return None

    def store(self, path: Path, key: list[int], digest: str) -> None:
        self.entries[str(path)] = [*key, digest]
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            if is_writable(self.file.parent):
                with atomic_write(self.file, "w") as handle:
                    json.dump(self.entries, handle)
        except OSError:
            pass  # the index is only an optimisation
        self.dirty = False


def _hash_with_index(path: Path, index: HashIndex | None, use_index: bool, kind: str = "sha256") -> str:
    entry = path if kind == "sha256" else Path(f"{kind}:{path}")  # the index keeps one digest per entry
    if index is not None and use_index:
        cached = index.lookup(entry, path)
        if cached is not None:
            return cached
    key = _stat_key(path)
    digest = sha256_file(path) if kind == "sha256" else git_blob_file(path)
    if index is not None and key == _stat_key(path):
        index.store(entry, key, digest)
    return digest


def _file_status(spec: DatasetSpec, raw: RawFile, root: Path, index: HashIndex | None, full: bool) -> FileStatus:
    path = spec.raw_dir(root) / raw.path
    kind, expected = raw.pin
    if not path.is_file():
        return FileStatus(spec.name, raw.path, path, "missing", expected, kind=kind)
    size = path.stat().st_size
    actual = _hash_with_index(path, index, not full, kind)
    # a size mismatch is decisive; the report still shows the actual digest
    state = "present" if actual == expected and (raw.size is None or size == raw.size) else "checksum-bad"
    return FileStatus(spec.name, raw.path, path, state, expected, actual, size, kind)


def verify_dataset(name: str, root: str | Path | None = None, *, full: bool = True,
                   group: str | None = None) -> list[FileStatus]:
    """The state of every raw file of ``name`` (``present``, ``missing`` or ``checksum-bad``).

    Args:
        name: a registered dataset name.
        root: the data root (default: ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT`).
        full: hash every byte of every file (default). ``False`` re-uses a hash cached for an unchanged
            file (same path, size, mtime, ctime and inode) — fast, used by ``gflkit data list``.
        group: only the files of one variant (e.g. ``"tff"``), default all.

    Returns:
        One :class:`FileStatus` per expected file, in the spec's order (empty for embedded datasets).
    """
    spec = get_spec(name)
    root_path = data_root(root)
    index = HashIndex(cache_dir(spec.name, root_path))
    try:
        return [_file_status(spec, raw, root_path, index, full) for raw in spec.files_in(group)]
    finally:
        index.save()


def dataset_available(name: str, root: str | Path | None = None, group: str | None = None) -> tuple[bool, str]:
    """Whether every raw file of dataset ``name`` (optionally one variant ``group``) is present and
    verified under the data root, with a sentence for the notebook saying so — or naming the missing
    file and how to get it."""
    statuses = verify_dataset(name, root, full=False, group=group)
    bad = [status for status in statuses if not status.ok]
    where = data_root(root)
    if not bad:
        return True, f"{name}: {len(statuses)} raw file(s) present and verified under {where}"
    first = bad[0]
    expected = first.path.relative_to(where) if first.path.is_relative_to(where) else first.path
    return False, (
        f"{name}: section skipped: {first.path} is {first.state} ({len(bad)} of {len(statuses)} files "
        f"unavailable under {where}). To run it, download the data with `gflkit data fetch {name}` "
        f"(needs internet) or set GFLKIT_DATA to a folder holding {expected}."
    )


def check_hashes(spec: DatasetSpec, raws: Sequence[RawFile], root: Path, *, full: bool) -> None:
    index = HashIndex(cache_dir(spec.name, root))
    try:
        for raw in raws:
            status = _file_status(spec, raw, root, index, full)
            if status.state == "missing":
                raise DatasetNotFoundError.for_files(spec, root, [raw])
            if status.state == "checksum-bad":
                raise ChecksumError(status.path, status.expected_sha256, status.actual_sha256 or "?",
                                    f"Delete or replace it: run `gflkit data fetch {spec.name}` when online, or "
                                    f"copy the canonical file (source: {spec.source}); `gflkit data verify "
                                    f"{spec.name}` lists every bad file.", kind=status.kind)
    finally:
        index.save()
