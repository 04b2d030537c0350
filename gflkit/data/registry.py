"""The dataset registry: what a dataset's raw files are, what they must hash to and where they live.

Layout
------
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
canonical source, how to obtain the files, the loader), registered by name (:func:`register`).

A folder counts as writable when the process may write to it *and* it has a write permission bit set, so

The data layer's other jobs live beside this module: getting missing files (:mod:`gflkit.data.download`),
checking digests (:mod:`gflkit.data.integrity`), the converted-tensor cache (:mod:`gflkit.data.cache`,
:mod:`gflkit.data.conversion`) and the entry points :func:`~gflkit.data.loading.load_dataset` /
:func:`~gflkit.data.loading.load_graph`.
"""
from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from gflkit.data.errors import UnknownDatasetError

_CHECKOUT = Path(__file__).resolve().parents[2]
#: ``<checkout>/data`` when gflkit runs from a source checkout, else a per-user folder; never the cwd.
DEFAULT_ROOT = (_CHECKOUT / "data" if (_CHECKOUT / "pyproject.toml").exists()
                else Path.home() / ".local" / "share" / "gflkit" / "data")
ENV_ROOT = "GFLKIT_DATA"


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


def spec_of_kind(name: str, kind: str) -> DatasetSpec:
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


# ------------------------------------------------------------------------------------------------ roots
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
