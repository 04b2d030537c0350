"""Finished runs on disk, keyed by a hash of the full configuration.

Layout under a results root (``results/<notebook>/runs`` by default)::

    <root>/<key>/config.json      the configuration that produced the run
    <root>/<key>/artifacts.pt     tensors a method leaves behind, e.g. a learned client graph (optional)
    <root>/<key>/records.csv      tidy per-round, per-client records
    <root>/<key>/manifest.json    written last: the records' row count and the sha256 of the exact bytes of
                                  records.csv (and of artifacts.pt), against which every load checks them
    <root>/<key>/checkpoint.pt    the state of an unfinished run, and checkpoint.previous.pt the one before
                                  (both removed once the manifest exists)
    <root>/<key>/lock             held by the process computing the run (host and pid inside)
    <root>/<key>.damaged-<UTC time>/  the files of a run found damaged, set aside (never deleted)

A finished run is returned without recomputation, after checking its files against its manifest; an
interrupted run resumes from its checkpoint. A run whose files do not match their manifest (cut short,
overwritten, missing) or cannot be parsed is treated like a corrupt checkpoint: its files are moved to
``<key>.damaged-<UTC time>`` with a ``RuntimeWarning`` naming the folder and the fault, and the run is
recomputed. A run stored before manifests existed (``records.csv`` alone) is accepted when its records
parse and end with a line break, and its manifest is written then, so that later damage is detected.

Every file is written through a uniquely named temporary file and a rename, and a process computes a
run only while holding its lock (:meth:`ResultStore.lock`), so two notebooks, or a notebook and
``gflkit precompute``, sharing a results folder never clobber each other and compute each run once: the
second waits for the first and reads its records. Records without a manifest may be a run being saved
at this moment, and a damaged folder may be being set aside by another process, so a run is adopted or
set aside only by a process holding its lock; a reader that finds the lock taken treats the run as
unfinished (:meth:`ResultStore.load` returns None) and :func:`~gflkit.experiment.run` then waits for
the lock and looks again.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import socket
import stat
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import torch

from gflkit.atomic import atomic_write, atomic_write_text
from gflkit.checkpoint import Checkpoint
from gflkit.lifeline import process_alive

#: Bump when a change to the engine changes the numbers a config produces; old runs are then ignored.
SCHEMA_VERSION = 4  # 3: graph runs record validation metrics (val_<metric>); 4: RunConfig.held_out

RECORDS = "records.csv"
ARTIFACTS = "artifacts.pt"
MANIFEST = "manifest.json"
LOCK = "lock"


class DamagedRun(Exception):
    """A stored run's files are unusable; the message says which file and what is wrong with it."""


def config_key(config: dict[str, Any]) -> str:
    """A stable 16-hex-digit key of a JSON-serialisable configuration (sorted keys, schema version)."""
    canonical = json.dumps({"schema": SCHEMA_VERSION, **config}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _lock_owner_alive(text: str) -> bool:
    """Whether the owner written in a lock file (``host pid``) still runs; owners on other hosts are
    assumed alive (remove their lock by hand if they died)."""
    host, _, pid = text.strip().rpartition(" ")
    if host != socket.gethostname():
        return True
    return pid.isdigit() and process_alive(int(pid))


#: Seconds a lock file may name no owner before it is judged stale: its writer died, or failed (a full disk),
#: between creating it and writing its host and pid into it.
LOCK_WRITE_GRACE_S = 10.0


def _lock_owner(path: Path) -> str | None:
    """The owner written in the lock file ``path`` (``""`` while none is, or it cannot be read as text, or
    is no regular file), or None when the file is gone."""
    try:
        return _read_regular(path).decode()
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, PermissionError, IsADirectoryError, DamagedRun):
        return ""


def _stale(path: Path, owner: str) -> bool:
    """Whether the lock ``path`` with ``owner`` written in it is left by nobody alive: its owner died on this
    host, or it has named no owner for :data:`LOCK_WRITE_GRACE_S` seconds."""
    if owner.strip():
        return not _lock_owner_alive(owner)
    try:
        return time.time() - path.stat().st_mtime > LOCK_WRITE_GRACE_S
    except FileNotFoundError:
        return False


def _try_acquire(path: Path) -> bool:
    """One attempt at the lock file ``path`` (created with ``O_EXCL``, host and pid inside): whether this
    process now holds it. A stale lock (:func:`_stale`) is taken over; a lock this process could create but
    not write (a full disk) is removed again before the error propagates, so it never wedges later runs."""
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            owner = _lock_owner(path)
            if owner is None:
                continue  # released in between
            if _stale(path, owner):
                path.unlink(missing_ok=True)
                continue
            return False
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(f"{socket.gethostname()} {os.getpid()}")
        except BaseException:
            path.unlink(missing_ok=True)
            raise
        return True


def _sha256(data: bytes) -> str:
    """The hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def _torch_bytes(tensors: dict[str, Any]) -> bytes:
    """What ``torch.save`` writes for ``tensors``."""
    buffer = io.BytesIO()
    torch.save(tensors, buffer)
    return buffer.getvalue()


def _parse_records(data: bytes) -> pd.DataFrame:
    """The records held by the bytes of a ``records.csv``; raises :class:`DamagedRun` when they are empty,
    cut short (no final line break) or cannot be parsed."""
    if not data:
        raise DamagedRun(f"{RECORDS} is empty")
    if not data.endswith(b"\n"):
        raise DamagedRun(f"{RECORDS} does not end with a line break: it was cut short")
    try:
        return pd.read_csv(io.BytesIO(data))
    except ValueError as error:  # pandas' EmptyDataError and ParserError, UnicodeDecodeError
        raise DamagedRun(f"{RECORDS} cannot be parsed ({type(error).__name__}: {error})") from None


def _check_artifacts(data: bytes) -> None:
    """Raise :class:`DamagedRun` unless the bytes of an ``artifacts.pt`` load."""
    try:
        torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")  # a GPU run read without one
    except Exception as error:  # torch raises RuntimeError, EOFError, UnpicklingError, ... on bad files
        raise DamagedRun(f"{ARTIFACTS} cannot be loaded ({type(error).__name__}: {error})") from None


#: The largest file a stored run may hold; a larger one is damage (the records of a paper grid's run are MBs).
MAX_FILE_BYTES = 1 << 30


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (a link to one is followed). A FIFO, a device or a folder, or a
    file over :data:`MAX_FILE_BYTES`, raises :class:`DamagedRun`: it is opened without blocking and checked
    before a byte is read, so no planted file can hang or flood a load."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise DamagedRun(f"{path.name} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise DamagedRun(f"{path.name} holds {info.st_size} bytes, more than a stored run's {MAX_FILE_BYTES}")
        return handle.read()


def _read(folder: Path, name: str) -> bytes:
    """The bytes of ``folder / name`` (:func:`_read_regular`); raises :class:`DamagedRun` when the manifest
    lists a missing file or anything but a plain name of the folder."""
    if Path(name).name != name or name in (".", ".."):
        raise DamagedRun(f"{MANIFEST} lists {name!r}, which is not a file of the run's folder")
    try:
        return _read_regular(folder / name)
    except (FileNotFoundError, IsADirectoryError):
        raise DamagedRun(f"{name} is missing although {MANIFEST} lists it") from None


def _read_manifest(folder: Path) -> tuple[int, dict[str, str]]:
    """The row count and the sha256 per file that ``folder``'s manifest vouches for."""
    try:
        manifest = json.loads(_read_regular(folder / MANIFEST))
        rows, digests = int(manifest["rows"]), dict(manifest["sha256"])
    except (ValueError, KeyError, TypeError) as error:  # not JSON, not UTF-8, or not a manifest's fields
        raise DamagedRun(f"{MANIFEST} is unreadable ({type(error).__name__}: {error})") from None
    if RECORDS not in digests:
        raise DamagedRun(f"{MANIFEST} does not list {RECORDS}")
    return rows, digests


def _verified_records(folder: Path) -> pd.DataFrame:
    """The records of the finished run in ``folder``, after checking every file its manifest lists;
    raises :class:`DamagedRun` on the first fault."""
    rows, digests = _read_manifest(folder)
    files = {name: _read(folder, name) for name in digests}
    for name, data in files.items():
        if _sha256(data) != digests[name]:
            raise DamagedRun(f"{name} does not match {MANIFEST} ({len(data)} bytes with sha256 "
                             f"{_sha256(data)[:12]}…, expected {digests[name][:12]}…): it was cut short or overwritten")
    records = _parse_records(files[RECORDS])
    if len(records) != rows:
        raise DamagedRun(f"{RECORDS} holds {len(records)} rows, {MANIFEST} says {rows}")
    return records


def _write_manifest(folder: Path, rows: int, files: dict[str, bytes]) -> None:
    """Write ``folder``'s manifest (atomically): the row count and the sha256 of each file's bytes."""
    manifest = {"rows": rows, "sha256": {name: _sha256(data) for name, data in files.items()}}
    atomic_write_text(folder / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))


def _adopt(folder: Path) -> pd.DataFrame:
    """The records of a run stored before manifests existed, once they (and its artifacts) parse; its
    manifest is written then, so that later damage is detected. Raises :class:`DamagedRun` otherwise."""
    files = {RECORDS: _read_regular(folder / RECORDS)}
    records = _parse_records(files[RECORDS])
    if (folder / ARTIFACTS).exists():
        files[ARTIFACTS] = _read_regular(folder / ARTIFACTS)
        _check_artifacts(files[ARTIFACTS])
    _write_manifest(folder, len(records), files)
    return records


def _set_aside(folder: Path, damage: DamagedRun) -> None:
    """Move the files of the damaged run in ``folder`` (all but its lock, the manifest last: a kill midway
    leaves a manifest without its files, still damaged) to ``<key>.damaged-<UTC time>`` and warn."""
    aside = folder.with_name(f"{folder.name}.damaged-{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}")
    aside.mkdir()
    for entry in sorted(folder.iterdir(), key=lambda path: path.name == MANIFEST):
        if entry.name != LOCK:
            os.replace(entry, aside / entry.name)
    warnings.warn(f"stored run {folder} is damaged: {damage}. Its files were moved to {aside} (nothing is "
                  "deleted: inspect it, then remove it) and the run will be recomputed", RuntimeWarning)


class ResultStore:
    """Runs stored under ``root``, one folder per configuration key."""

    def __init__(self, root: str | Path):
        # resolved: a store reached through a link (a notebook's staging folder links to its results folder's
        # store) names its real folders in every message
        self.root = Path(root).resolve()
        self._held: set[Path] = set()  # the run folders whose lock this store holds

    def folder(self, config: dict[str, Any]) -> Path:
        """The folder of the run described by ``config``."""
        return self.root / config_key(config)

    def load(self, config: dict[str, Any]) -> pd.DataFrame | None:
        """The finished run's records, checked against its manifest, or None when it has not finished.

        A damaged run is set aside (``<key>.damaged-<UTC time>``, with a ``RuntimeWarning``) and a run
        stored before manifests existed is adopted, both only under the run's lock: taken here when it
        is free, already held when called inside :meth:`lock`; when another process holds it, the run
        counts as unfinished (None).
        """
        folder = self.folder(config)
        if (folder / MANIFEST).exists():
            try:
                return _verified_records(folder)
            except DamagedRun:
                pass  # set aside below, under the lock
        elif not (folder / RECORDS).exists():
            return None  # not finished
        if folder in self._held:
            return self._settle(folder)
        with self._lock_if_free(config) as held:
            return self._settle(folder) if held else None

    def _settle(self, folder: Path) -> pd.DataFrame | None:
        """Under the run's lock: its verified records, a run without manifest adopted, or None when it has
        not finished or was damaged (then set aside)."""
        try:
            if (folder / MANIFEST).exists():
                return _verified_records(folder)
            return _adopt(folder) if (folder / RECORDS).exists() else None
        except DamagedRun as damage:
            _set_aside(folder, damage)
            return None

    def save(self, config: dict[str, Any], records: pd.DataFrame, artifacts: dict[str, Any] | None = None) -> None:
        """Store a finished run and drop its checkpoint: config and artifacts first, records next, the
        manifest vouching for their bytes last, so that a kill at any point leaves either an unfinished
        run or records without manifest (complete: each file is renamed into place whole), adopted later."""
        folder = self.folder(config)
        atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True, default=str))
        files = {ARTIFACTS: _torch_bytes(artifacts)} if artifacts else {}
        files[RECORDS] = records.to_csv(index=False).encode()
        for name, data in files.items():
            with atomic_write(folder / name) as handle:
                handle.write(data)
        _write_manifest(folder, len(records), files)
        self.checkpoint(config).remove()

    def load_artifacts(self, config: dict[str, Any]) -> dict[str, Any]:
        """The artifacts of a finished run ({} when it left none), checked with its records by :meth:`load`,
        loaded onto the CPU (so that runs computed on a GPU read back on a machine without one); raises
        ``FileNotFoundError`` if the run has not finished (or was damaged, and so set aside)."""
        if self.load(config) is None:
            raise FileNotFoundError(f"no finished run for this config under {self.folder(config)}")
        path = self.folder(config) / ARTIFACTS
        return torch.load(path, weights_only=True, map_location="cpu") if path.exists() else {}

    def checkpoint(self, config: dict[str, Any]) -> Checkpoint:
        """Where an unfinished run of ``config`` keeps its checkpoint, which names the run by its key."""
        return Checkpoint(self.folder(config) / "checkpoint.pt", run=config_key(config))

    @contextlib.contextmanager
    def lock(self, config: dict[str, Any], poll: float = 0.5) -> Iterator[None]:
        """Hold the run's lock for the block: created with ``O_EXCL`` (host and pid inside), so one process
        at a time computes a run. Another process waits until the lock is released, saying once on stderr
        which folder and whose lock it waits for; a lock whose owner died on this host, or that has named no
        owner for :data:`LOCK_WRITE_GRACE_S` seconds, is stale and taken over."""
        path = self._lock_path(config)
        said = False
        while not _try_acquire(path):
            if not said:  # once, so that a wait is never silent
                owner = (_lock_owner(path) or "").strip() or "a process that has not written its name yet"
                print(f"gflkit: waiting for the run in {path.parent}: {owner} (host pid) is computing it; "
                      f"its lock is judged stale when that process is gone", file=sys.stderr, flush=True)
                said = True
            time.sleep(poll)
        with self._holding(path):
            yield

    @contextlib.contextmanager
    def _lock_if_free(self, config: dict[str, Any]) -> Iterator[bool]:
        """Hold the run's lock for the block if no other process holds it; yields whether it is held."""
        path = self._lock_path(config)
        if not _try_acquire(path):
            yield False
            return
        with self._holding(path):
            yield True

    @contextlib.contextmanager
    def _holding(self, path: Path) -> Iterator[None]:
        """Mark the run folder of the lock file ``path`` (just acquired) as held for the block, then release it."""
        self._held.add(path.parent)
        try:
            yield
        finally:
            self._held.discard(path.parent)
            path.unlink(missing_ok=True)

    def _lock_path(self, config: dict[str, Any]) -> Path:
        """The run's lock file (its folder created if needed)."""
        path = self.folder(config) / LOCK
        path.parent.mkdir(parents=True, exist_ok=True)
        return path
