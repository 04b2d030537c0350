"""A results folder that tells the truth: a notebook's outputs replace the previous ones together, or not at all.

An execution of notebook ``name`` writes into a staging folder ``<output>/.<name>.<pid>.running/`` whose
``runs`` entry links to ``<output>/runs``, so finished runs are stored where every later execution finds them
(a killed execution's runs resume) while its tables, figures and executed notebook stay out of sight. On
success :func:`publish` moves every file of the staging folder into ``<output>`` and removes the files the
previous success wrote that this one did not (listed in ``<output>/.gflkit-outputs``): the folder then holds
one execution's outputs. A failed or killed execution's staging folder is discarded — by the failing process,
or by the next execution once its process is gone (:func:`remove_dead`) — and the previous outputs stay as
they were, consistent with each other.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from gflkit.atomic import atomic_write_text
from gflkit.lifeline import process_alive

#: The list of files the last successful execution published into a results folder.
MANIFEST = ".gflkit-outputs"
STORE = "runs"


def staging_folder(output: Path, name: str) -> Path:
    """This process's staging folder for notebook ``name`` in ``output``, created empty, with its ``runs``
    linked to ``output``'s store (created if missing)."""
    staging = output / f".{name}.{os.getpid()}.running"
    discard(staging)
    staging.mkdir()
    (output / STORE).mkdir(exist_ok=True)
    (staging / STORE).symlink_to(Path("..") / STORE, target_is_directory=True)
    return staging


def discard(staging: Path) -> None:
    """Remove a staging folder (or a temporary notebook of an earlier layout) and what it holds; the store it
    links to is not followed."""
    if staging.is_dir() and not staging.is_symlink():
        shutil.rmtree(staging, ignore_errors=True)
    else:
        staging.unlink(missing_ok=True)


def remove_dead(output: Path, name: str) -> None:
    """Discard the staging folders of ``name``'s executions in ``output`` whose process is gone."""
    for path in output.glob(f".{name}.*.running*"):
        pid = path.name[len(name) + 2:].split(".")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            discard(path)


def _replaced(value: Any, old: str, new: str) -> Any:
    """``value`` (a notebook's JSON) with every occurrence of ``old`` in its strings replaced by ``new``."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replaced(item, old, new) for item in value]
    if isinstance(value, dict):
        return {key: _replaced(item, old, new) for key, item in value.items()}
    return value


def retarget(notebook: Path, staging: Path, output: Path) -> None:
    """Rewrite the executed ``notebook`` so that it names ``output`` wherever it names ``staging`` (its injected
    ``results_dir`` parameter, printed paths): after :func:`publish` its files are there."""
    content = json.loads(notebook.read_text(encoding="utf-8"))
    atomic_write_text(notebook, json.dumps(_replaced(content, str(staging), str(output)), indent=1,
                                           ensure_ascii=False) + "\n")


def _listed(manifest: Path) -> list[str]:
    """The file names a manifest lists; only plain names of this folder count (a damaged or foreign manifest
    can name nothing outside it), and an unreadable one lists nothing."""
    try:
        listed = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(listed, list):
        return []
    return [name for name in listed if isinstance(name, str) and name and Path(name).name == name
            and not name.startswith(".")]


def publish(staging: Path, output: Path) -> list[str]:
    """Move every file of ``staging`` into ``output`` (replacing files of the same name), remove the files the
    previous publication listed that this one lacks, record this one's list and discard ``staging``; returns
    the published names. Each move is a rename within one file system."""
    names = sorted(entry.name for entry in staging.iterdir() if entry.is_file() and not entry.is_symlink())
    for name in names:
        os.replace(staging / name, output / name)
    manifest = output / MANIFEST
    for name in set(_listed(manifest)) - set(names):
        stale = output / name
        if stale.is_symlink() or stale.is_file():  # a listed folder (the store, say) is no output: kept
            stale.unlink()
    atomic_write_text(manifest, json.dumps(names, indent=0) + "\n")
    discard(staging)
    try:
        (output / STORE).rmdir()  # the store of a notebook that stores no runs: empty, not left behind
    except OSError:
        pass
    return names
