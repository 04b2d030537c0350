"""The archive of executed notebooks: what a reader sees without running anything.

Each entry of :data:`ARCHIVE` is a notebook and a profile that a page under docs/papers/ reports. Archiving one
(``gflkit archive NAME:PROFILE``, or every entry with ``gflkit archive``) executes it with ``gflkit
notebook`` against its result store ``results/<name>_<profile>`` — finished runs are read, missing ones
computed — and then writes, under ``docs/results/<name>_<profile>/``:

* ``<name>.ipynb``: the executed notebook, outputs and figures included, opening with a cell that states the
  commit, profile, parameters, device and date it ran with and the command that regenerates it (the same
  facts are in its metadata under ``gflkit``); progress-bar output is dropped;
* every CSV the notebook wrote beside its executed copy except the per-round ``*records.csv`` logs, replacing
  the folder's previous CSVs, so that each number shown has one source (:mod:`gflkit.report.provenance`
  checks that every table shown is one of those CSVs).

Nothing is replaced unless the notebook executed successfully; each file is written atomically.
"""
from __future__ import annotations

import base64
import copy
import datetime as dt
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gflkit.atomic import atomic_write, atomic_write_text
from gflkit.catalog import PAPERS
from gflkit.notebooks import REPO, NotebookError

DOCS_RESULTS = REPO / "docs" / "results"
PROGRESS_LINE = re.compile(r"^\s*(\S.*?:\s*)?\d+%\|.*\|.*$|^\s*$")
MAX_IMAGE_BYTES = 400_000


@dataclass(frozen=True)
class Archived:
    """One archived execution: notebook ``name`` at ``profile`` with extra notebook ``parameters``; the
    report page showing it is :func:`gflkit.report.pages.page_of` its folder."""

    name: str
    profile: str
    parameters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """``name:profile``, as the command line names it."""
        return f"{self.name}:{self.profile}"

    @property
    def folder(self) -> str:
        """The folder name of its result store and of its archive, ``<name>_<profile>``."""
        return f"{self.name}_{self.profile}"


#: every execution a paper of :data:`gflkit.catalog.PAPERS` archives, in its order
ARCHIVE: tuple[Archived, ...] = tuple(Archived(paper.name, profile, dict(parameters))
                                      for paper in PAPERS.values() for profile, parameters in paper.archived.items())


def entry(key: str) -> Archived:
    """The archive entry named ``name:profile``, with an error listing the known ones."""
    for archived in ARCHIVE:
        if archived.key == key:
            return archived
    raise NotebookError(f"{key!r} is not archived; choose from {', '.join(a.key for a in ARCHIVE)} "
                        f"(or add the profile to its paper's `archived` in gflkit/catalog.py)")


def archived_notebooks(docs: Path = DOCS_RESULTS) -> list[Path]:
    """The archived notebooks present under ``docs`` (one per entry that has been archived)."""
    return [path for a in ARCHIVE for path in [docs / a.folder / f"{a.name}.ipynb"] if path.exists()]


def archive(archived: Archived, results: Path = REPO / "results", docs: Path = DOCS_RESULTS) -> Path:
    """Execute ``archived`` against its store ``results/<folder>`` and archive it under ``docs/<folder>``
    (see the module docstring); returns the archived notebook's path."""
    import nbformat

    from gflkit.notebooks import execute

    executed = execute(archived.name, archived.profile, results / archived.folder, dict(archived.parameters))
    notebook = nbformat.read(executed, as_version=4)
    stamped = stamp(without_progress(notebook), run_facts(archived))
    check_images(stamped, executed)
    target = docs / archived.folder
    _replace_csvs(executed.parent, target)
    path = target / f"{archived.name}.ipynb"
    atomic_write_text(path, nbformat.writes(stamped) + "\n")
    return path


def run_facts(archived: Archived) -> dict[str, Any]:
    """The facts an archived notebook opens with: commit, profile, parameters, device, date, command."""
    return {
        "notebook": archived.name,
        "profile": archived.profile,
        "parameters": dict(archived.parameters),
        "commit": _commit(),
        "device": device_description(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": f"gflkit archive {archived.key}",
        "store": f"results/{archived.folder}",
    }


def _commit() -> str:
    """The repository's commit, marked when the working tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", "gflkit", "notebooks")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"{commit} with uncommitted changes to gflkit/ or notebooks/" if dirty else commit


def device_description() -> str:
    """The device a notebook of this process's environment computes on: the CUDA GPU when one is visible
    (a notebook's ``device="auto"``), else the CPU model and its core count."""
    import torch

    if torch.cuda.is_available():
        return f"CUDA: {torch.cuda.get_device_name(0)}"
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        names = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), flags=re.M)
        model = names[0].strip() if names else model
    return f"CPU: {model}, {os.cpu_count()} cores"


def stamp(notebook: Any, facts: Mapping[str, Any]) -> Any:
    """A copy of ``notebook`` opening with a markdown cell that states ``facts``, also stored in its metadata."""
    import nbformat

    stamped = copy.deepcopy(notebook)
    parameters = ", ".join(f"{k}={v!r}" for k, v in facts["parameters"].items()) or "the profile's defaults"
    text = (f"> **Archived execution** of `notebooks/{facts['notebook']}.ipynb`, profile `{facts['profile']}` "
            f"({parameters}) — commit `{facts['commit']}`, {facts['device']}, executed {facts['date']} from the "
            f"result store `{facts['store']}`.\n>\n> Regenerate with `{facts['command']}`; every table below is "
            f"one of the CSVs in this folder (tests/test_report.py checks it).")
    header = nbformat.v4.new_markdown_cell(text, metadata={"tags": ["gflkit-archive-header"]})
    stamped.cells.insert(0, header)
    stamped.metadata["gflkit"] = dict(facts)
    return stamped


def without_progress(notebook: Any) -> Any:
    """A copy of ``notebook`` whose stderr outputs keep no progress-bar line (an output left empty is dropped)."""
    cleaned = copy.deepcopy(notebook)
    for cell in cleaned.cells:
        outputs = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                kept = [line for line in output["text"].splitlines() if not PROGRESS_LINE.match(line.split("\r")[-1])]
                if not kept:
                    continue
                output["text"] = "\n".join(kept) + "\n"
            outputs.append(output)
        if cell.cell_type == "code":
            cell.outputs = outputs
    return cleaned


def check_images(notebook: Any, source: Path) -> None:
    """Refuse to archive a notebook with an image over :data:`MAX_IMAGE_BYTES` (a figure drawn at too high a
    resolution for a page)."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            png = output.get("data", {}).get("image/png")
            if png is not None and len(base64.b64decode(png)) > MAX_IMAGE_BYTES:
                raise NotebookError(f"{source}: cell {index} shows a {len(base64.b64decode(png)):,}-byte image, over "
                                    f"the archive's {MAX_IMAGE_BYTES:,}; draw it smaller (figsize / dpi)")


def archived_csvs(folder: Path) -> list[Path]:
    """The CSVs of an executed notebook's folder that are archived: all but the per-round ``*records.csv``."""
    return sorted(path for path in folder.glob("*.csv") if not path.name.endswith("records.csv"))


def _check_archivable(path: Path) -> None:
    """Only a regular file of the results folder itself is copied into docs/ (ready to commit): a link
    could bring the text of any file it points to."""
    if path.is_symlink() or not path.is_file():
        what = f"a link to {os.readlink(path)}" if path.is_symlink() else "not a regular file"
        raise NotebookError(f"{path} is {what}; the archive copies only the results folder's own CSV files "
                            "(remove it and run the archive again)")


def _replace_csvs(source: Path, target: Path) -> None:
    """Make ``target``'s CSVs exactly ``source``'s archived ones (each written atomically); nothing is
    written when one of them is not a regular file of ``source``."""
    for path in archived_csvs(source):
        _check_archivable(path)
    target.mkdir(parents=True, exist_ok=True)
    written = {path.name for path in archived_csvs(source)}
    for path in archived_csvs(source):
        with atomic_write(target / path.name) as handle:
            handle.write(path.read_bytes())
    for stale in target.glob("*.csv"):
        if stale.name not in written:
            stale.unlink()


def main(keys: Sequence[str] = ()) -> list[Path]:
    """Archive the entries named ``name:profile`` (all of :data:`ARCHIVE` when none is named)."""
    chosen = [entry(key) for key in keys] if keys else list(ARCHIVE)
    return [archive(archived) for archived in chosen]
