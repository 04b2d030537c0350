"""Raw files to tensors once: verify, convert on a cache miss, keep the converted form.

A converted dict is saved with :func:`torch.save` in the dataset's cache folder (:func:`gflkit.data.cache.cache_dir`)
under a name hashed from the raw files' digests, the loader options and the loader's format version; the file
also stores that key, and a file whose key does not match its name (copied or swapped) or that cannot be read
is rebuilt with a warning. Files are read back with ``weights_only=True``: nothing read runs code.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from gflkit.atomic import atomic_write
from gflkit.data.cache import ENV_CACHE, cache_dir
from gflkit.data.integrity import check_hashes
from gflkit.data.registry import DatasetSpec, RawFile, data_root, is_writable

_CACHE_KEY = "__gflkit_cache_key__"


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
        check_hashes(spec, raws, root_path, full=False)
        stored = _read_cache(cached, key)
        if stored is not None:
            return stored
    check_hashes(spec, raws, root_path, full=True)
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
