"""Finished runs on disk, keyed by a hash of the full configuration.

Layout under a results root (``results/<notebook>/runs`` by default)::

    <root>/<key>/config.json      the configuration that produced the run
    <root>/<key>/artifacts.pt     tensors a method leaves behind, e.g. a learned client graph (optional)
    <root>/<key>/records.csv      tidy per-round, per-client records (written last, atomically)
    <root>/<key>/checkpoint.pt    the state of an unfinished run, and checkpoint.previous.pt the one before
                                  (both removed once records exist)
    <root>/<key>/lock             held by the process computing the run (host and pid inside)

A run whose ``records.csv`` exists is returned without recomputation; an interrupted run resumes
from its checkpoint. Every file is written through a uniquely named temporary file and a rename, and
a process computes a run only while holding its lock (:meth:`ResultStore.lock`), so two notebooks, or a
notebook and ``gflkit precompute``, sharing a results folder never clobber each other and compute each
run once: the second waits for the first and reads its records.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import torch

from gflkit.atomic import atomic_write, atomic_write_text
from gflkit.engine import Checkpoint

#: Bump when a change to the engine changes the numbers a config produces; old runs are then ignored.
SCHEMA_VERSION = 4  # 3: graph runs record validation metrics (val_<metric>); 4: RunConfig.held_out


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
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


class ResultStore:
    """Runs stored under ``root``, one folder per configuration key."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, config: dict[str, Any]) -> Path:
        """The folder of the run described by ``config``."""
        return self.root / config_key(config)

    def load(self, config: dict[str, Any]) -> pd.DataFrame | None:
        """The finished run's records, or None when it has not finished."""
        path = self.folder(config) / "records.csv"
        return pd.read_csv(path) if path.exists() else None

    def save(self, config: dict[str, Any], records: pd.DataFrame, artifacts: dict[str, Any] | None = None) -> None:
        """Store a finished run (config and artifacts first, records last) and drop its checkpoint."""
        folder = self.folder(config)
        atomic_write_text(folder / "config.json", json.dumps(config, indent=2, sort_keys=True, default=str))
        if artifacts:
            with atomic_write(folder / "artifacts.pt") as handle:
                torch.save(artifacts, handle)
        atomic_write_text(folder / "records.csv", records.to_csv(index=False))
        self.checkpoint(config).remove()

    def load_artifacts(self, config: dict[str, Any]) -> dict[str, Any]:
        """The artifacts of a finished run ({} when it left none); raises if the run has not finished."""
        if self.load(config) is None:
            raise FileNotFoundError(f"no finished run for this config under {self.folder(config)}")
        path = self.folder(config) / "artifacts.pt"
        return torch.load(path, weights_only=True) if path.exists() else {}

    def checkpoint(self, config: dict[str, Any]) -> Checkpoint:
        """Where an unfinished run of ``config`` keeps its checkpoint."""
        return Checkpoint(self.folder(config) / "checkpoint.pt")

    @contextlib.contextmanager
    def lock(self, config: dict[str, Any], poll: float = 0.5) -> Iterator[None]:
        """Hold the run's lock for the block: created with ``O_EXCL`` (host and pid inside), so one process
        at a time computes a run. Another process waits until the lock is released; a lock whose owner
        died on this host is stale and taken over."""
        path = self.folder(config) / "lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        owner = f"{socket.gethostname()} {os.getpid()}"
        while True:
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    held_by = path.read_text()
                except FileNotFoundError:
                    continue  # released in between
                if held_by and not _lock_owner_alive(held_by):
                    path.unlink(missing_ok=True)  # stale: its owner was killed
                    continue
                time.sleep(poll)
                continue
            with os.fdopen(fd, "w") as handle:
                handle.write(owner)
            break
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
