"""Dataset registry: where raw files live, what they must hash to, how to get them, and the tensor cache.

Layout
------
Raw files live under a *data root* as ``<root>/<name>/raw/<canonical file names>``, e.g.
``<root>/mnist/raw/train-images-idx3-ubyte.gz`` or ``<root>/shakespeare/raw/tff/shakespeare_train.h5``
(a spec's ``folder`` may replace ``<name>``: the Planetoid graphs follow PyG's ``planetoid/Cora/raw/``).
The root is the ``root=`` argument, else the environment variable ``GFLKIT_DATA``, else the default root
(:data:`DEFAULT_ROOT`): the ``data/`` folder of the source checkout gflkit runs from, whatever the working
directory (papermill runs notebooks inside ``notebooks/``), or ``~/.local/share/gflkit/data`` for an
installed package.
The root may be read-only (a shared copy); nothing is ever written into a read-only root.

Every raw file is pinned by its sha256 (:class:`RawFile`); a dataset is a :class:`DatasetSpec` (files,
canonical source, how to obtain the files, the loader). :func:`load_dataset` makes sure the files are
present (downloading missing ones when allowed and online), verifies their sha256 *before* they are
parsed (CIFAR's python archives are pickles: they are only unpickled after the archive matched), converts
them to tensors once and caches the converted form with :func:`torch.save`. Graph datasets
(``kind="graph"``) are loaded the same way by :func:`load_graph`, which returns a
:class:`torch_geometric.data.Data`.

Converted-tensor cache
----------------------
``$GFLKIT_CACHE/<name>/`` if ``GFLKIT_CACHE`` is set, else the per-user ``$XDG_CACHE_HOME/gflkit/<name>/``
(``~/.cache/gflkit/<name>/``) when writable, else ``<root>/<folder>/processed/`` beside the raw files when
writable (:func:`cache_dir`); nothing derived is written anywhere else. Cached files are named by a hash
of the raw files' sha256, the loader options and the loader's format version, so a changed raw file never
reuses a stale conversion; each file also stores that key, and a file whose key does not match its name
(copied or swapped) is rebuilt with a warning. :func:`clean_cache` (``gflkit data clean``) deletes them.
The same folder holds ``sha256-index.json``, a cache of file hashes keyed by path, size, mtime, ctime and
inode; :func:`load_dataset` (when a converted copy exists) and ``gflkit data list`` may use it, while
:func:`verify_dataset` (``gflkit data verify``) always hashes every byte. All writes are atomic (temporary
file in the target folder + :func:`os.replace`).

A folder counts as writable when the process may write to it *and* it has a write permission bit set, so
a tree made read-only with ``chmod -R a-w`` is respected even by root.

Downloads
---------
Only files with a URL can be downloaded (``urllib`` with a timeout, progress with ``tqdm``). A file whose
canonical distribution is an archive (``RawFile.member``) is obtained by downloading the archive and
extracting that member; the member's sha256 is checked (and the archive's, when pinned). Downloads go to
a temporary file beside the target and are only moved into place after the hash matched, so a failed or
corrupted download leaves nothing behind. Set ``GFLKIT_OFFLINE=1`` to never try the network.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
import tarfile
import tempfile
import urllib.error
import urllib.request
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from gflkit.atomic import atomic_write

if TYPE_CHECKING:  # torch is imported where tensors are read or written, so listing datasets stays light
    from torch_geometric.data import Data

    from gflkit.data.dataset import SampleDataset

__all__ = [
    "ChecksumError", "DataError", "DatasetNotFoundError", "DatasetSpec", "DownloadError", "FileStatus",
    "RawFile", "UnknownDatasetError", "atomic_write", "cache_dir", "cached_conversion", "clean_cache", "data_root",
    "dataset_names", "download_files", "fetch_dataset", "get_spec", "git_blob_file", "is_writable", "load_dataset", "load_graph",
    "register", "registered", "reject_options", "require_files", "sha256_file", "user_cache_root", "verify_dataset",
]

_CHECKOUT = Path(__file__).resolve().parents[2]
#: ``<checkout>/data`` when gflkit runs from a source checkout, else a per-user folder; never the cwd.
DEFAULT_ROOT = (_CHECKOUT / "data" if (_CHECKOUT / "pyproject.toml").exists()
                else Path.home() / ".local" / "share" / "gflkit" / "data")
ENV_ROOT = "GFLKIT_DATA"
ENV_CACHE = "GFLKIT_CACHE"
ENV_OFFLINE = "GFLKIT_OFFLINE"
DEFAULT_TIMEOUT = 60.0
_CHUNK = 1 << 20
_HASH_INDEX = "sha256-index.json"
_CACHE_KEY = "__gflkit_cache_key__"


# ----------------------------------------------------------------------------------------------- errors
class DataError(Exception):
    """Base class of the data layer's own errors (each also derives from a builtin error class)."""


class DatasetNotFoundError(DataError, FileNotFoundError):
    """Raw files of a dataset are missing and could not be downloaded; the message says how to fix it."""

    def __str__(self) -> str:  # FileNotFoundError would otherwise format (errno, strerror) tuples
        return str(self.args[0]) if self.args else ""


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


# ------------------------------------------------------------------------------------------------ specs
@dataclass(frozen=True)
class RawFile:
    """One raw file of a dataset, pinned by its sha256 (or, when no sha256 is published, its git blob id).

    Attributes:
        path: POSIX path relative to ``<root>/<name>/raw/`` (the canonical file name).
        sha256: the pinned sha256 of the file as stored under ``raw/``; None when the file is pinned by
            ``git_blob`` instead.
        size: its size in bytes when known (a cheap first check; None skips it).
        urls: where to download it (mirrors, tried in order); empty when it cannot be downloaded.
        member: when ``urls`` serve an archive, the archive member to extract (matched by exact name or
            by trailing path component); None when the URL serves the file itself.
        archive_sha256: the pinned sha256 of that archive, when known.
        group: the dataset variant the file belongs to (e.g. ``"tff"`` / ``"leaf"`` for Shakespeare).
        git_blob: the file's git blob id (``git hash-object``: SHA-1 of ``"blob <size>\\0"`` + content),
            for a file whose only published fingerprint is its blob in a git repository (ASTGCN's PEMS
            readings). Such a file has no download URL here (downloads are checked by sha256).
    """

    path: str
    sha256: str | None
    size: int | None = None
    urls: tuple[str, ...] = ()
    member: str | None = None
    archive_sha256: str | None = None
    group: str = "default"
    git_blob: str | None = None

    def __post_init__(self) -> None:
        if (self.sha256 is None) == (self.git_blob is None):
            raise ValueError(f"raw file {self.path!r} must be pinned by exactly one of sha256 and git_blob")
        if self.git_blob is not None and self.urls:
            raise ValueError(f"raw file {self.path!r}: a file pinned by its git blob id cannot be downloaded here")

    @property
    def pin(self) -> tuple[str, str]:
        """``(kind, digest)`` — ``("sha256", ...)`` or ``("git blob", ...)``."""
        return ("sha256", self.sha256) if self.sha256 is not None else ("git blob", self.git_blob)

    @property
    def downloadable(self) -> bool:
        """Whether the file has a download URL."""
        return bool(self.urls)


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its raw files, canonical source and loader.

    Attributes:
        name: registry name (``load_dataset(name)``); also the folder name under the data root unless
            ``folder`` is set.
        description: one line shown by ``gflkit data list``.
        source: canonical source URL.
        files: the raw files the registry expects (exactly these; subsets are pinned as such).
        loader: ``loader(spec, root, download=..., **options)``, returning a
            :class:`~gflkit.data.dataset.SampleDataset` (``kind="samples"``) or a
            :class:`torch_geometric.data.Data` (``kind="graph"``).
        obtain: how to obtain the files when they cannot be downloaded (shown in errors).
        license: licence as commonly stated.
        embedded: True when the data ship with a dependency and need no files (``digits``).
        format_version: version of the converted-tensor format (part of the cache key).
        kind: ``"samples"`` (:func:`load_dataset`) or ``"graph"`` (:func:`load_graph`).
        folder: the folder under the data root when it differs from ``name`` (e.g. ``planetoid/Cora``,
            PyG's layout); empty means ``name``.
    """

    name: str
    description: str
    source: str
    files: tuple[RawFile, ...] = ()
    loader: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    obtain: str = ""
    license: str = ""
    embedded: bool = False
    format_version: int = 1
    kind: str = "samples"
    folder: str = ""

    def raw_dir(self, root: str | Path | None = None) -> Path:
        """``<root>/<folder or name>/raw``."""
        return data_root(root) / (self.folder or self.name) / "raw"

    def files_in(self, group: str | None = None) -> tuple[RawFile, ...]:
        """The raw files of one group (variant), or all of them when ``group`` is None."""
        return self.files if group is None else tuple(f for f in self.files if f.group == group)

    @property
    def groups(self) -> tuple[str, ...]:
        """The variants (file groups) in order of first appearance."""
        return tuple(dict.fromkeys(f.group for f in self.files))


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


_REGISTRY: dict[str, DatasetSpec] = {}
_BUILTINS_LOADED = False


def _ensure_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        import gflkit.data.loaders  # noqa: F401  (registers the built-in datasets)


def register(spec: DatasetSpec, *, replace: bool = False) -> DatasetSpec:
    """Add a dataset to the registry (``replace=True`` to overwrite an existing name); returns it."""
    if not replace and spec.name in _REGISTRY:
        raise ValueError(f"dataset {spec.name!r} is already registered (pass replace=True to overwrite)")
    if spec.loader is None:
        raise ValueError(f"dataset {spec.name!r} has no loader")
    _REGISTRY[spec.name] = spec
    return spec


@contextlib.contextmanager
def registered(spec: DatasetSpec) -> Iterator[DatasetSpec]:
    """Temporarily register ``spec`` (e.g. a copy with fixture hashes), restoring the previous entry."""
    _ensure_builtins()
    previous = _REGISTRY.get(spec.name)
    _REGISTRY[spec.name] = spec
    try:
        yield spec
    finally:
        if previous is None:
            _REGISTRY.pop(spec.name, None)
        else:
            _REGISTRY[spec.name] = previous


def dataset_names() -> list[str]:
    """The registered dataset names, sorted."""
    _ensure_builtins()
    return sorted(_REGISTRY)


def get_spec(name: str) -> DatasetSpec:
    """The :class:`DatasetSpec` of a registered dataset; :class:`UnknownDatasetError` lists the known names."""
    _ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownDatasetError(f"unknown dataset {name!r}; known datasets: {', '.join(sorted(_REGISTRY))}") from None


# --------------------------------------------------------------------------------------- root and cache
def data_root(root: str | Path | None = None) -> Path:
    """The data root: ``root`` if given, else ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT` (made absolute,
    ``~`` expanded; a relative ``root`` or ``$GFLKIT_DATA`` is relative to the working directory)."""
    chosen = root if root is not None and str(root) != "" else os.environ.get(ENV_ROOT) or DEFAULT_ROOT
    return Path(chosen).expanduser().absolute()


def is_writable(path: str | Path) -> bool:
    """Whether ``path`` (or, if it does not exist, its nearest existing ancestor) may be written to.

    Requires both :func:`os.access` and a write permission bit, so a ``chmod a-w`` tree counts as
    read-only even for root.
    """
    p = Path(path).absolute()
    while not p.exists():
        if p.parent == p:
            return False
        p = p.parent
    try:
        mode = p.stat().st_mode
    except OSError:
        return False
    return p.is_dir() and os.access(p, os.W_OK | os.X_OK) and bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def user_cache_root() -> Path:
    """The per-user cache folder: ``$XDG_CACHE_HOME/gflkit``, else ``~/.cache/gflkit``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser().absolute() / "gflkit"


def cache_dir(name: str, root: str | Path | None = None) -> Path:
    """Folder for ``name``'s converted tensors and hash index (not created here).

    ``$GFLKIT_CACHE/<name>`` if set; else the per-user ``<user cache>/<name>`` (:func:`user_cache_root`)
    when writable; else ``<root>/<folder>/processed`` beside the raw files (``folder`` as in
    :meth:`DatasetSpec.raw_dir`, e.g. ``planetoid/Cora/processed``) when writable; else the per-user one
    (conversions are then not cached, with a warning). A dataset's derived files are only ever written
    to this one folder.
    """
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser().absolute() / name
    user = user_cache_root() / name
    beside_raw = get_spec(name).raw_dir(root).parent / "processed"
    return next((folder for folder in (user, beside_raw) if is_writable(folder)), user)


def clean_cache(name: str, root: str | Path | None = None) -> list[Path]:
    """Delete ``name``'s converted tensors and hash index from every cache location; return the deleted files.

    Only gflkit's own files (``<name>-*.pt``, ``<name>.pt``, the hash index) are removed, so a PyG
    ``processed/`` folder beside the raw files keeps PyG's files. Raw files are never touched.
    """
    env = os.environ.get(ENV_CACHE)
    folders = [Path(env).expanduser().absolute() / name] if env else []
    folders += [user_cache_root() / name, get_spec(name).raw_dir(root).parent / "processed"]
    removed = []
    for folder in dict.fromkeys(folders):
        if not folder.is_dir() or not is_writable(folder):
            continue
        for path in [*folder.glob(f"{name}-*.pt"), *folder.glob(f"{name}.pt"), folder / _HASH_INDEX]:
            if path.is_file():
                path.unlink()
                removed.append(path)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when nothing else is left in it
    return removed


# -------------------------------------------------------------------------------------------- hashing
def sha256_file(path: str | Path, chunk_size: int = _CHUNK) -> str:
    """The sha256 (hex) of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk_size), b""):
            digest.update(block)
    return digest.hexdigest()


def git_blob_file(path: str | Path, chunk_size: int = _CHUNK) -> str:
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


class _HashIndex:
    """sha256 of files keyed by absolute path + (size, mtime, ctime, inode), stored in the cache dir."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / _HASH_INDEX
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


def _hash_with_index(path: Path, index: _HashIndex | None, use_index: bool, kind: str = "sha256") -> str:
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


def _file_status(spec: DatasetSpec, raw: RawFile, root: Path, index: _HashIndex | None, full: bool) -> FileStatus:
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
    index = _HashIndex(cache_dir(spec.name, root_path))
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


# ------------------------------------------------------------------------------------------- download
def _offline() -> bool:
    return os.environ.get(ENV_OFFLINE, "").strip().lower() not in ("", "0", "false", "no")


def _progress(total: int | None, label: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label, leave=False,
                disable=not enabled)


def _fetch_url(url: str, target: IO[bytes], timeout: float, progress: bool) -> str:
    """Stream ``url`` into ``target``; returns the sha256 of what was written."""
    digest = hashlib.sha256()
    request = urllib.request.Request(url, headers={"User-Agent": "gflkit-data/0.1"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        length = response.headers.get("Content-Length") if hasattr(response, "headers") else None
        total = int(length) if length and length.isdigit() else None
        with _progress(total, url.rsplit("/", 1)[-1], progress) as bar:
            for block in iter(lambda: response.read(_CHUNK), b""):
                target.write(block)
                digest.update(block)
                bar.update(len(block))
    return digest.hexdigest()


def _find_member(names: Sequence[str], member: str) -> str | None:
    for name in names:
        if name == member or name.lstrip("./") == member.lstrip("./"):
            return name
    for name in names:
        if name.endswith("/" + member):
            return name
    return None


def _extract_member(archive: Path, member: str, target: IO[bytes]) -> str:
    """Copy one archive member (tar.* or zip) into ``target``; returns its sha256."""
    digest = hashlib.sha256()

    def copy(source: IO[bytes]) -> None:
        for block in iter(lambda: source.read(_CHUNK), b""):
            target.write(block)
            digest.update(block)

    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            found = _find_member(zf.namelist(), member)
            if found is None:
                raise DownloadError(f"archive {archive.name} has no member {member!r}")
            with zf.open(found) as source:
                copy(source)
    else:
        try:
            with tarfile.open(archive, "r:*") as tf:
                members = {m.name: m for m in tf.getmembers() if m.isfile()}
                found = _find_member(list(members), member)
                if found is None:
                    raise DownloadError(f"archive {archive.name} has no member {member!r}")
                source = tf.extractfile(members[found])
                assert source is not None
                copy(source)
        except tarfile.TarError as exc:
            raise DownloadError(f"cannot read downloaded archive {archive.name}: {exc}") from exc
    return digest.hexdigest()


def _temp_in(folder: Path, name: str) -> tuple[IO[bytes], Path]:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".part")
    return os.fdopen(fd, "wb"), Path(tmp)


def _download_source(urls: tuple[str, ...], raws: Sequence[RawFile], raw_dir: Path, *,
                     timeout: float, progress: bool) -> None:
    """Download one source (a file, or an archive holding several members) and place the verified files."""
    errors: list[Exception] = []
    for url in urls:
        temps: list[Path] = []
        try:
            placed: list[tuple[Path, Path]] = []
            archive_needed = raws[0].member is not None
            first_dest = raw_dir / raws[0].path
            first_dest.parent.mkdir(parents=True, exist_ok=True)
            handle, download_tmp = _temp_in(first_dest.parent, Path(raws[0].path).name)
            temps.append(download_tmp)
            with handle:
                downloaded_sha = _fetch_url(url, handle, timeout, progress)
            if not archive_needed:
                raw = raws[0]
                if downloaded_sha != raw.sha256:
                    raise ChecksumError(url, raw.sha256, downloaded_sha,
                                        "The downloaded file does not match the pinned sha256; nothing was kept.")
                placed.append((download_tmp, first_dest))
            else:
                pinned = raws[0].archive_sha256
                if pinned and downloaded_sha != pinned:
                    raise ChecksumError(url, pinned, downloaded_sha,
                                        "The downloaded archive does not match the pinned sha256; nothing was kept.")
                for raw in raws:
                    dest = raw_dir / raw.path
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    out, member_tmp = _temp_in(dest.parent, Path(raw.path).name)
                    temps.append(member_tmp)
                    with out:
                        member_sha = _extract_member(download_tmp, raw.member or raw.path, out)
                    if member_sha != raw.sha256:
                        raise ChecksumError(f"{url}!{raw.member}", raw.sha256, member_sha,
                                            "The extracted member does not match the pinned sha256; nothing was kept.")
                    placed.append((member_tmp, dest))
            for tmp, dest in placed:  # every hash matched: move into place
                os.replace(tmp, dest)
                temps.remove(tmp)
            return
        except (urllib.error.URLError, OSError, ValueError, EOFError) as exc:
            errors.append(exc)
        finally:
            for tmp in temps:
                with contextlib.suppress(FileNotFoundError):
                    tmp.unlink()
    checksum_errors = [e for e in errors if isinstance(e, ChecksumError)]
    if checksum_errors:
        raise checksum_errors[-1]
    reasons = "; ".join(f"{type(e).__name__}: {e}" for e in errors)
    raise DownloadError(f"could not download {', '.join(r.path for r in raws)} from {', '.join(urls)} ({reasons})")


def download_files(spec: DatasetSpec, raws: Sequence[RawFile], root: str | Path | None = None, *,
                   timeout: float = DEFAULT_TIMEOUT, progress: bool = True) -> None:
    """Download the given raw files of ``spec`` into ``<root>/<name>/raw`` and verify their sha256.

    Files sharing the same URLs (members of one archive) are fetched with one download.
    Raises :class:`DownloadError` (network, read-only root, no URL) or :class:`ChecksumError`; in both
    cases nothing is left under the data root.
    """
    raw_dir = spec.raw_dir(root)
    if _offline():
        raise DownloadError(f"downloads are disabled ({ENV_OFFLINE} is set)")
    if not is_writable(raw_dir):
        raise DownloadError(f"the data root {data_root(root)} is read-only, so nothing can be downloaded into it; "
                            f"choose a writable root (GFLKIT_DATA=..., root=..., --root ...)")
    no_url = [r.path for r in raws if not r.urls]
    if no_url:
        raise DownloadError(f"no download URL for {', '.join(no_url)}: {spec.obtain or spec.source}")
    by_source: dict[tuple[str, ...], list[RawFile]] = {}
    for raw in raws:
        by_source.setdefault(raw.urls, []).append(raw)
    for urls, group in by_source.items():
        _download_source(urls, group, raw_dir, timeout=timeout, progress=progress)


def _not_found_message(spec: DatasetSpec, root: Path, missing: Sequence[RawFile], reason: str = "") -> str:
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
    return message


def require_files(spec: DatasetSpec, root: str | Path | None = None, *, download: bool = True,
                  group: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Path]:
    """Make sure the raw files of ``spec`` (optionally one variant) exist; returns ``{relpath: path}``.

    Missing files are downloaded when ``download`` is True, they have a URL and the network answers;
    otherwise ONE :class:`DatasetNotFoundError` names the dataset, the missing files, the root and the fix.
    Presence only: hashes are checked by :func:`cached_conversion` before anything is parsed.
    """
    root_path = data_root(root)
    raws = spec.files_in(group)
    raw_dir = spec.raw_dir(root_path)
    missing = [r for r in raws if not (raw_dir / r.path).is_file()]
    if missing:
        reason = ""
        if download and all(r.downloadable for r in missing):
            try:
                download_files(spec, missing, root_path, timeout=timeout)
            except DownloadError as exc:
                reason = str(exc)
            missing = [r for r in missing if not (raw_dir / r.path).is_file()]
        if missing:
            raise DatasetNotFoundError(_not_found_message(spec, root_path, missing, reason))
    return {r.path: raw_dir / r.path for r in raws}


def _check_hashes(spec: DatasetSpec, raws: Sequence[RawFile], root: Path, *, full: bool) -> None:
    index = _HashIndex(cache_dir(spec.name, root))
    try:
        for raw in raws:
            status = _file_status(spec, raw, root, index, full)
            if status.state == "missing":
                raise DatasetNotFoundError(_not_found_message(spec, root, [raw]))
            if status.state == "checksum-bad":
                raise ChecksumError(status.path, status.expected_sha256, status.actual_sha256 or "?",
                                    f"Delete or replace it: run `gflkit data fetch {spec.name}` when online, or "
                                    f"copy the canonical file (source: {spec.source}); `gflkit data verify "
                                    f"{spec.name}` lists every bad file.", kind=status.kind)
    finally:
        index.save()


def cached_conversion(spec: DatasetSpec, root: str | Path | None, raws: Sequence[RawFile],
                      convert: Callable[[dict[str, Path]], dict[str, Any]], *, variant: str = "",
                      options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Verify ``raws`` and return their converted form, converting (``convert``) only on a cache miss.

    The converted dict (tensors, ints, strings, lists) is saved with :func:`torch.save` under
    :func:`cache_dir`, named by a hash of the raw files' sha256, ``variant``, ``options`` and
    ``spec.format_version``, and read back with ``weights_only=True``. Before conversion every raw file
    is hashed fully (so pickles are only opened after they matched); on a cache hit the hash index may
    vouch for unchanged files.
    """
    root_path = data_root(root)
    options = dict(options or {})
    key_source = json.dumps({"name": spec.name, "variant": variant, "version": spec.format_version,
                             "files": sorted((r.path, r.sha256 or r.git_blob) for r in raws), "options": options},
                            sort_keys=True, default=str)
    key = hashlib.sha256(key_source.encode()).hexdigest()[:20]
    folder = cache_dir(spec.name, root_path)
    cached = folder / f"{spec.name}{'-' + variant if variant else ''}-{key}.pt"
    if cached.is_file():
        _check_hashes(spec, raws, root_path, full=False)
        stored = _read_cache(cached, key)
        if stored is not None:
            return stored
    _check_hashes(spec, raws, root_path, full=True)
    converted = convert({r.path: spec.raw_dir(root_path) / r.path for r in raws})
    try:
        if is_writable(folder):
            import torch

            with atomic_write(cached) as handle:
                torch.save({**converted, _CACHE_KEY: key}, handle)
        else:
            warnings.warn(f"cache folder {folder} is not writable; converted tensors are not cached "
                          f"(set {ENV_CACHE} to a writable folder)", RuntimeWarning, stacklevel=2)
    except OSError as exc:
        warnings.warn(f"could not cache converted tensors in {folder}: {exc}", RuntimeWarning, stacklevel=2)
    return converted


def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    """The converted dict stored in ``path``, or None (with a warning: it is rebuilt) when the file is
    unreadable or is not the conversion its name says (a copied or swapped cache file)."""
    import torch

    try:
        stored = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a damaged cache file is rebuilt, never trusted
        warnings.warn(f"ignoring unreadable cache file {path} (rebuilding it): {exc}", RuntimeWarning, stacklevel=3)
        return None
    if not isinstance(stored, dict) or stored.get(_CACHE_KEY) != key:
        why = ("it was written by an older gflkit" if isinstance(stored, dict) and _CACHE_KEY not in stored
               else "it does not hold the conversion its name says")
        warnings.warn(f"ignoring cache file {path}: {why} (rebuilding it)", RuntimeWarning, stacklevel=3)
        return None
    return {k: v for k, v in stored.items() if k != _CACHE_KEY}


# --------------------------------------------------------------------------------------- entry points
def fetch_dataset(name: str, root: str | Path | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                  progress: bool = True) -> list[FileStatus]:
    """Download the missing (downloadable) raw files of ``name`` and verify every file fully.

    Raises :class:`DownloadError` / :class:`ChecksumError` when a download fails; files that cannot be
    downloaded (LEAF json) stay missing and show up as such in the returned statuses.
    """
    spec = get_spec(name)
    root_path = data_root(root)
    raw_dir = spec.raw_dir(root_path)
    missing = [r for r in spec.files if r.downloadable and not (raw_dir / r.path).is_file()]
    if missing:
        download_files(spec, missing, root_path, timeout=timeout, progress=progress)
    return verify_dataset(name, root_path, full=True)


# The :rtype: field names SampleDataset's full path for Sphinx: the annotation is imported only for type checking, so
# it reaches the API reference as written, and ``SampleDataset`` is ambiguous there (gflkit.data re-exports it).
def load_dataset(name: str, root: str | Path | None = None, download: bool = True, **options: Any) -> SampleDataset:
    """Load a registered dataset as a :class:`~gflkit.data.dataset.SampleDataset` (official train + test pooled,
    ``is_test`` marks test).

    Args:
        name: one of :func:`dataset_names` (``mnist``, ``cifar10``, ``cifar100``, ``femnist``,
            ``shakespeare``, ``digits``).
        root: data root holding ``<name>/raw/...``; default ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT`.
        download: download missing files when they have a URL and the network is reachable.
        ``**options``: loader options (e.g. ``source="leaf"`` and ``stride=...`` for ``shakespeare``).

    Raises:
        UnknownDatasetError: ``name`` is not registered (the message lists the known names).
        ValueError: ``name`` is a graph dataset (use :func:`load_graph`).
        DatasetNotFoundError: raw files are missing and could not be downloaded.
        ChecksumError: a raw file does not match its pinned sha256.
        TypeError: an option the loader does not know.

    :rtype: ~gflkit.data.dataset.SampleDataset
    """
    spec = _spec_of_kind(name, "samples")
    assert spec.loader is not None
    return spec.loader(spec, data_root(root), download=download, **options)


def load_graph(name: str, root: str | Path | None = None, download: bool = True, normalize_features: bool = False,
               **options: Any) -> Data:
    """Load a registered graph dataset as one :class:`torch_geometric.data.Data`.

    The graph has ``x`` (``float32`` node features), ``edge_index`` (undirected: both directions of every
    edge, no self-loops, no duplicates, sorted), ``y`` (``int64`` labels), ``num_classes`` (int) and
    ``name``; datasets with an official split also carry ``train_mask`` / ``val_mask`` / ``test_mask``.
    Raw files and the cache work exactly as for :func:`load_dataset`.

    Args:
        name: a graph dataset (``cora``, ``citeseer``, ``pubmed``, ``cora_full``, ``polblogs``; see
            :func:`dataset_names` and :mod:`gflkit.data.loaders`).
        root: data root holding the raw files; default ``$GFLKIT_DATA``, else :data:`DEFAULT_ROOT`.
        download: download missing files when they have a URL and the network is reachable.
        normalize_features: divide every node's features by their sum (rows summing to 0 are left as
            they are), :class:`torch_geometric.transforms.NormalizeFeatures` as in PyG's Planetoid
            examples and FED-PUB's data pipeline; off by default (the raw features).
        ``**options``: loader options (e.g. ``largest_component=False`` for ``polblogs``).

    Raises:
        UnknownDatasetError: ``name`` is not registered.
        ValueError: ``name`` is a sample dataset (use :func:`load_dataset`), or ``normalize_features``
            is not a bool.
        DatasetNotFoundError, ChecksumError, TypeError: as for :func:`load_dataset`.
    """
    spec = _spec_of_kind(name, "graph")
    assert spec.loader is not None
    if not isinstance(normalize_features, bool):
        raise ValueError(f"normalize_features must be True or False, got {normalize_features!r}")
    graph = spec.loader(spec, data_root(root), download=download, **options)
    if not normalize_features:
        return graph
    from torch_geometric.transforms import NormalizeFeatures
    return NormalizeFeatures()(graph.clone())


def _spec_of_kind(name: str, kind: str) -> DatasetSpec:
    """The spec of ``name``, or a ValueError naming the right entry point when it is of another kind."""
    spec = get_spec(name)
    if spec.kind != kind:
        entry = {"samples": "load_dataset", "graph": "load_graph"}[spec.kind]
        same = sorted(n for n in dataset_names() if get_spec(n).kind == kind)
        raise ValueError(f"dataset {name!r} is a {spec.kind} dataset: load it with {entry}({name!r}); "
                         f"{kind} datasets are: {', '.join(same)}")
    return spec


def reject_options(spec: DatasetSpec, options: Mapping[str, Any], allowed: Sequence[str] = ()) -> None:
    """Raise :class:`TypeError` naming any option a loader does not accept."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        accepted = ", ".join(allowed) if allowed else "none"
        raise TypeError(f"dataset {spec.name!r} got unknown option(s) {unknown}; accepted options: {accepted}")

