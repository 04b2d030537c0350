"""Finished runs on disk, keyed by a hash of the full configuration.

Layout under a results root (``results/<notebook>/runs`` by default)::

    <root>/<key>/config.json      the configuration that produced the run
    <root>/<key>/artifacts.pt     tensors a method leaves behind, e.g. a learned client graph (optional)
    <root>/<key>/records.csv      tidy per-round, per-client records (written last, atomically)
    <root>/<key>/checkpoint.pt    the state of an unfinished run (removed once records exist)

A run whose ``records.csv`` exists is returned without recomputation; an interrupted run resumes
from its checkpoint.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from gflkit.engine import Checkpoint

#: Bump when a change to the engine changes the numbers a config produces; old runs are then ignored.
SCHEMA_VERSION = 2


def config_key(config: dict[str, Any]) -> str:
    """A stable 16-hex-digit key of a JSON-serialisable configuration (sorted keys, schema version)."""
    canonical = json.dumps({"schema": SCHEMA_VERSION, **config}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
            tmp = folder / ".artifacts.pt.tmp"
            torch.save(artifacts, tmp)
            os.replace(tmp, folder / "artifacts.pt")
        atomic_write_text(folder / "records.csv", records.to_csv(index=False))
        self.checkpoint(config).path.unlink(missing_ok=True)

    def load_artifacts(self, config: dict[str, Any]) -> dict[str, Any]:
        """The artifacts of a finished run ({} when it left none); raises if the run has not finished."""
        if self.load(config) is None:
            raise FileNotFoundError(f"no finished run for this config under {self.folder(config)}")
        path = self.folder(config) / "artifacts.pt"
        return torch.load(path, weights_only=True) if path.exists() else {}

    def checkpoint(self, config: dict[str, Any]) -> Checkpoint:
        """Where an unfinished run of ``config`` keeps its checkpoint."""
        return Checkpoint(self.folder(config) / "checkpoint.pt")
