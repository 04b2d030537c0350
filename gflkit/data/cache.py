"""Where a dataset's derived files live: the converted-tensor cache and the hash index.

Converted-tensor cache
----------------------
``$GFLKIT_CACHE/<name>/`` if ``GFLKIT_CACHE`` is set, else the per-user ``$XDG_CACHE_HOME/gflkit/<name>/``
(``~/.cache/gflkit/<name>/``) when writable, else ``<root>/<folder>/processed/`` beside the raw files when
writable (:func:`cache_dir`); nothing derived is written anywhere else. Cached files are named by a hash
of the raw files' sha256, the loader options and the loader's format version, so a changed raw file never
reuses a stale conversion (:mod:`gflkit.data.conversion`). :func:`clean_cache` (``gflkit data clean``) deletes them.
The same folder holds ``sha256-index.json``, a cache of file hashes keyed by path, size, mtime, ctime and
inode; :func:`load_dataset` (when a converted copy exists) and ``gflkit data list`` may use it, while
:func:`verify_dataset` (``gflkit data verify``) always hashes every byte. All writes are atomic (temporary
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from gflkit.data.registry import get_spec, is_writable

ENV_CACHE = "GFLKIT_CACHE"
#: the file of the hash index (:class:`gflkit.data.integrity.HashIndex`) in a dataset's cache folder
HASH_INDEX = "sha256-index.json"


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
        for path in [*folder.glob(f"{name}-*.pt"), *folder.glob(f"{name}.pt"), folder / HASH_INDEX]:
            if path.is_file():
                path.unlink()
                removed.append(path)
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when nothing else is left in it
    return removed
