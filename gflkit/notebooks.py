"""Executing the project's notebooks with papermill (``make demo``, ``make reproduce``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"


class NotebookError(ValueError):
    """A reproduction that cannot start or did not finish, said in one line (the CLI prints it, exit 2)."""


def default_results_dir(name: str) -> Path:
    """Where notebook ``name`` writes tables, figures and runs unless told otherwise:
    ``$GFLKIT_RESULTS/<name>``, else ``results/<name>`` in the repository. Created if missing."""
    folder = Path(os.environ.get("GFLKIT_RESULTS") or REPO / "results") / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def dataset_available(name: str, root: str | Path | None = None, group: str | None = None) -> tuple[bool, str]:
    """Whether every raw file of dataset ``name`` (optionally one variant ``group``) is present and
    verified under the data root, with a sentence for the notebook saying so — or naming the missing
    file and how to get it."""
    from gflkit.data import data_root, verify_dataset

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


def notebook_path(name: str) -> Path:
    """``notebooks/<name>.ipynb`` of the repository, with a clear error listing the notebooks."""
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if not path.exists():
        known = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
        raise NotebookError(f"unknown notebook {name!r}; choose one of {known} (in {NOTEBOOK_DIR})")
    return path


def notebook_parameters(name: str) -> list[str]:
    """The parameters notebook ``name`` accepts: the names in its ``parameters`` cell (no kernel started)."""
    import papermill

    return list(papermill.inspect_notebook(str(notebook_path(name))))


def check_parameters(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` for notebook ``name``, validated before any kernel starts: every name must be one of
    the notebook's parameters, ``seeds`` one integer (made a list) or a list of integers, ``overrides`` a
    dict. Raises :class:`NotebookError` saying what was wrong and how to fix it."""
    accepted = notebook_parameters(name)
    unknown = sorted(set(parameters) - set(accepted))
    if unknown:
        raise NotebookError(f"unknown parameter(s) {unknown} for notebook {name!r}; it accepts {accepted}. A run "
                            f"setting goes into overrides, e.g. -p 'overrides={{\"rounds\": 3}}'")
    checked = dict(parameters)
    seeds = checked.get("seeds")
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        checked["seeds"] = [seeds]
    elif seeds is not None and (not isinstance(seeds, (list, tuple)) or not seeds
                                or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        raise NotebookError(f"seeds must be one non-negative integer or a list of them, e.g. -p seeds=0 or "
                            f"-p 'seeds=[0, 1]'; got {seeds!r}")
    overrides = checked.get("overrides")
    if overrides is not None and not isinstance(overrides, dict):
        raise NotebookError(f"overrides must be a dict with quoted keys, e.g. -p 'overrides={{\"rounds\": 3}}'; "
                            f"got {overrides!r}")
    return checked


def check_profile(name: str, profile: str, parameters: dict[str, Any]) -> None:
    """Resolve the notebook's profile with ``parameters`` as the notebook's first cell will, and make sure the
    datasets its core tables need are present (:attr:`~gflkit.profiles.Profile.required_datasets`);
    :class:`NotebookError` otherwise, naming every missing file and where it must go."""
    import importlib

    from gflkit.profiles import resolve_profile

    try:
        paper = importlib.import_module(f"gflkit.papers.{name}")
    except ModuleNotFoundError:
        return  # a notebook without a paper module has no profiles to check
    try:
        params = resolve_profile(paper.PROFILES, profile, parameters.get("seeds"), parameters.get("overrides"),
                                 parameters.get("executor", "serial"), parameters.get("ray_address"))
    except ValueError as error:
        raise NotebookError(f"{error}") from None
    missing = [message for dataset in params.required_datasets
               for available, message in [dataset_available(dataset, parameters.get("data_root"))] if not available]
    if missing:
        raise NotebookError(f"the {profile!r} profile of {name} needs data that are missing, so its core tables "
                            f"cannot run: " + " | ".join(missing))


def execute(
    name: str,
    profile: str = "smoke",
    output_dir: str | Path | None = None,
    parameters: dict[str, Any] | None = None,
) -> Path:
    """Run ``notebooks/<name>.ipynb`` with papermill; the executed copy and all results go to ``output_dir``.

    The notebook receives ``profile``, ``results_dir`` and, when ``GFLKIT_DATA`` is set, ``data_root``,
    plus any extra ``parameters``. Everything that can be checked without a kernel is checked first
    (:func:`check_parameters`, :func:`check_profile`). The notebook executes into a temporary file that
    replaces ``<output_dir>/<name>.ipynb`` only on success; a failed execution is kept as
    ``<name>.failed.ipynb`` (papermill puts the error at its top) and raises :class:`NotebookError`.
    The kernel's output (what the notebook prints, and its progress bars as text) is streamed to this
    process's stdout / stderr while it runs. Returns the path of the executed notebook.
    """
    import papermill
    from nbclient.exceptions import DeadKernelError

    source = notebook_path(name)
    params = {"profile": profile, **check_parameters(name, dict(parameters or {}))}
    if os.environ.get("GFLKIT_DATA") and "data_root" not in params:
        params["data_root"] = os.environ["GFLKIT_DATA"]
    check_profile(name, profile, params)
    output = Path(output_dir).resolve() if output_dir else default_results_dir(name)
    output.mkdir(parents=True, exist_ok=True)
    params["results_dir"] = str(output)
    executed, failed = output / f"{name}.ipynb", output / f"{name}.failed.ipynb"
    running = output / f".{name}.{os.getpid()}.running.ipynb"
    try:
        # The kernel inherits the environment: text bars, streamed to the terminal and saved readably.
        mode = os.environ.get("GFLKIT_PROGRESS") or "auto"
        with mock.patch.dict(os.environ, {"GFLKIT_PROGRESS": "text" if mode == "auto" else mode}):
            papermill.execute_notebook(str(source), str(running), parameters=params, cwd=str(source.parent),
                                       progress_bar=False, stdout_file=sys.stdout, stderr_file=sys.stderr)
        os.replace(running, executed)
    except papermill.PapermillExecutionError as error:
        os.replace(running, failed)
        raise NotebookError(f"{name} failed in cell {error.exec_count}: {error.ename}: {error.evalue} — the failed "
                            f"notebook is {failed}; {executed.name} from an earlier success is untouched") from None
    except DeadKernelError:
        if running.exists():
            os.replace(running, failed)
        raise NotebookError(f"{name}: the kernel died (killed, or out of memory): run the same command again — "
                            f"finished runs are stored and an interrupted run resumes from its last checkpoint") from None
    finally:
        running.unlink(missing_ok=True)
    return executed
