"""Executing the project's notebooks with papermill (``make demo``, ``make reproduce``).

Everything a reproduction needs is checked before a kernel starts, cheapest first: the notebook's name,
its parameters and profile, the results folder and the device are checked with the standard library
alone (torch is imported only to ask whether a CUDA device exists), because the notebook's parameters
cell is read as a declaration (JSON and :mod:`ast`), not executed, and its profiles are the data of
:data:`gflkit.catalog.PAPERS`. Then the profile is resolved with its overrides and the data its core tables need are
looked for (:func:`check_profile`). A mistake raises :class:`NotebookError` in one line.
"""
from __future__ import annotations

import ast
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from gflkit import staging
from gflkit.atomic import disk_full
from gflkit.catalog import PAPERS
from gflkit.data.registry import ENV_ROOT, data_root
from gflkit.fields import check_plain_fields, check_sweep_not_emptied
from gflkit.lifeline import ENV_PARENT

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"
DEVICE = re.compile(r"auto|cpu|cuda(:\d+)?")
RESULTS_HINT = "choose a writable folder with --results (or GFLKIT_RESULTS)"


class NotebookError(ValueError):
    """A reproduction that cannot start or did not finish, said in one line (the CLI prints it, exit 2)."""


def results_folder(name: str, given: str | Path | None = None) -> Path:
    """The absolute results folder of notebook ``name``: ``given``, else ``$GFLKIT_RESULTS/<name>``, else
    ``results/<name>`` in the repository. Not created (see :func:`default_results_dir`)."""
    if given:
        return Path(given).resolve()
    return (Path(os.environ.get("GFLKIT_RESULTS") or REPO / "results") / name).resolve()


def default_results_dir(name: str) -> Path:
    """Where notebook ``name`` writes tables, figures and runs unless told otherwise:
    ``$GFLKIT_RESULTS/<name>``, else ``results/<name>`` in the repository. Created if missing."""
    folder = results_folder(name)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def check_results_folder(folder: Path) -> None:
    """Refuse a results folder that cannot be written, creating nothing: ``folder`` (or the nearest of its
    parents that exists) is a file, or no file can be created there. Writability is probed by creating and
    removing a temporary file, so it reflects what this process may really do (root, read-only mounts)."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        problem = "is a file" if existing == folder else f"cannot be created: {existing} is a file"
        raise NotebookError(f"results folder {folder} {problem}; {RESULTS_HINT}")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".gflkit-write-test-"):
            pass
    except OSError as error:
        raise NotebookError(f"results folder {folder} is not writable: no file can be created in {existing} "
                            f"({error.strerror}); {RESULTS_HINT}") from None


def check_device(device: object) -> None:
    """Refuse a device other than ``auto``, ``cpu``, ``cuda`` and ``cuda:N``, or a CUDA device that torch
    cannot use on this machine (torch is imported for that question only)."""
    if not isinstance(device, str) or not DEVICE.fullmatch(device):
        raise NotebookError(f"unknown device {device!r}; choose auto (a CUDA GPU when present, else the CPU), "
                            f"cpu, cuda or cuda:N")
    if device.startswith("cuda"):
        _check_cuda(device)


def _check_cuda(device: str) -> None:
    """Refuse ``cuda`` / ``cuda:N`` when torch sees no such GPU, saying which GPUs it sees."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if int(device.partition(":")[2] or 0) >= count:
        seen = (f"torch {torch.__version__} sees no CUDA GPU" if not count
                else f"torch sees {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
        raise NotebookError(f"device {device!r} is not available: {seen}; choose device auto or cpu")


def profile_names(name: str) -> list[str]:
    """The profiles of notebook ``name`` (:data:`gflkit.catalog.PAPERS`; none for a notebook it does not list)."""
    paper = PAPERS.get(name)
    return list(paper.profiles) if paper else []


def publishes_grids(name: str) -> bool:
    """Whether ``gflkit/papers/<name>.py`` publishes ``grids(profile, ...)``, the runs its notebook reads (what
    ``gflkit precompute`` computes), as :data:`gflkit.catalog.PAPERS` says."""
    paper = PAPERS.get(name)
    return bool(paper and paper.grids)


def check_profile_name(name: str, profile: object) -> None:
    """Refuse a profile that notebook ``name`` does not declare (:func:`profile_names`), with the message
    :func:`~gflkit.profiles.resolve_profile` gives; a notebook without declared profiles is not checked."""
    declared = profile_names(name)
    if declared and profile not in declared:
        raise NotebookError(f"unknown profile {profile!r}; choose one of {sorted(declared)}")


def notebook_path(name: str) -> Path:
    """``notebooks/<name>.ipynb`` of the repository, with a clear error listing the notebooks (a name is a
    notebook's stem: ``../x`` or ``a/b`` names none)."""
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if Path(name).name != name or name in ("", ".", "..") or not path.exists():
        known = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
        raise NotebookError(f"unknown notebook {name!r}; choose one of {known} (in {NOTEBOOK_DIR})")
    return path


def notebook_parameters(name: str) -> list[str]:
    """The parameters notebook ``name`` accepts: the names assigned in its cell tagged ``parameters``, the
    cell papermill replaces, read from the notebook's JSON (no kernel, no papermill)."""
    cells = json.loads(notebook_path(name).read_text())["cells"]
    tagged = [cell for cell in cells if "parameters" in cell.get("metadata", {}).get("tags", [])]
    if not tagged:
        return []
    source = "".join(tagged[0]["source"])  # nbformat stores a cell's source as one string or a list of lines
    return [target.id for node in ast.parse(source).body for target in _assigned(node)
            if isinstance(target, ast.Name)]


def _assigned(node: ast.stmt) -> list[ast.expr]:
    """The targets a statement assigns to (``x = 1``, ``x: int = 1``); none for any other statement."""
    if isinstance(node, ast.Assign):
        return node.targets
    return [node.target] if isinstance(node, ast.AnnAssign) else []


def check_parameters(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    """``parameters`` for notebook ``name``, validated before any kernel starts: every name must be one of
    the notebook's parameters, ``seeds`` one integer (made a list) or a list of integers, ``overrides`` a
    dict whose plain values fit (:func:`~gflkit.fields.check_plain_fields`; no sweep entry emptied). Raises :class:`NotebookError` saying what was wrong and how to fix it."""
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
    try:  # the values that need no registry, before torch is imported
        check_plain_fields(overrides or {})
        check_sweep_not_emptied(overrides or {})
    except ValueError as error:
        raise NotebookError(f"override {error}") from None
    return checked


def check_profile(name: str, profile: str, parameters: dict[str, Any]) -> None:
    """Resolve the notebook's profile with ``parameters`` as the notebook's first cell will, and make sure the
    datasets its core tables need are present (:attr:`~gflkit.profiles.Profile.required_datasets`);
    :class:`NotebookError` otherwise, naming every missing file and where it must go."""
    import importlib

    from gflkit.data import dataset_available
    from gflkit.experiment import check_fits_data
    from gflkit.profiles import resolve_profile
    from gflkit.runtime import check_executor

    try:
        paper = importlib.import_module(f"gflkit.papers.{name}")
    except ModuleNotFoundError:
        return  # a notebook without a paper module has no profiles to check
    try:
        check_executor(parameters.get("executor", "serial"), parameters.get("ray_address"))
        params = resolve_profile(paper.PROFILES, profile, parameters.get("seeds"), parameters.get("overrides"))
    except ValueError as error:
        raise NotebookError(f"{error}") from None
    from gflkit.executors import check_ray_address, cluster_address

    address = cluster_address(parameters.get("ray_address"))
    if parameters.get("executor") == "ray" and address:
        try:
            check_ray_address(address)
        except ConnectionError as error:
            raise NotebookError(f"{error}") from None
    missing = [message for dataset in params.required_datasets
               for available, message in [dataset_available(dataset, parameters.get("data_root"))] if not available]
    if missing:
        raise NotebookError(f"the {profile!r} profile of {name} needs data that are missing, so its core tables "
                            f"cannot run: " + " | ".join(missing))
    try:
        check_fits_data(_notebook_runs(paper, params, parameters.get("data_root")), parameters.get("data_root"))
    except ValueError as error:
        raise NotebookError(f"the {profile!r} profile of {name} does not fit its data: {error}") from None


def _notebook_runs(paper: Any, params: Any, data_root: str | Path | None) -> list[Any]:
    """The run configs a notebook will compute: its paper module's grids on the data present, else each sweep
    method on the profile's base."""
    if hasattr(paper, "grids"):
        from gflkit.runtime import Runtime

        return [run.config for runs in paper.grids(params, runtime=Runtime(data_root=data_root)).values()
                for run in runs]
    return [params.config(method=method) for method in params.sweep.get("methods", ())] or [params.config()]


def execute(
    name: str,
    profile: str = "smoke",
    output_dir: str | Path | None = None,
    parameters: dict[str, Any] | None = None,
) -> Path:
    """Run ``notebooks/<name>.ipynb`` with papermill; the executed copy and all results go to ``output_dir``
    (default: :func:`results_folder`).

    The notebook receives ``profile``, ``results_dir`` and, when ``GFLKIT_DATA`` is set, ``data_root`` (made
    absolute against this process's working directory),
    plus any extra ``parameters``. Everything that can be checked without a kernel is checked first, and
    nothing is written before it passed: :func:`check_parameters`, :func:`check_profile_name`,
    :func:`check_results_folder`, :func:`check_device` (without torch unless a CUDA device is asked for),
    then :func:`check_profile`. The notebook executes in a staging folder (:mod:`gflkit.staging`) whose
    executed notebook, tables and figures replace ``<output_dir>``'s together only on success; a failed
    execution's outputs are discarded, its notebook kept as ``<name>.failed.ipynb`` (papermill puts the error
    at its top), and :class:`NotebookError` is raised. The kernel's output (what the
    notebook prints, and its progress bars as text) is streamed to this process's stdout / stderr while it
    runs. Returns the path of the executed notebook.
    """
    source = notebook_path(name)
    params = {"profile": profile, **check_parameters(name, dict(parameters or {}))}
    check_profile_name(name, params["profile"])
    output = results_folder(name, output_dir)
    check_results_folder(output)
    check_device(params.get("device", "auto"))
    root = params.get("data_root") or os.environ.get(ENV_ROOT)
    if root:  # made absolute here: the kernel runs in notebooks/, where a relative root names another folder
        params["data_root"] = str(data_root(root))
    check_profile(name, params["profile"], params)
    output.mkdir(parents=True, exist_ok=True)
    return _execute_checked(source, output, params)


def _previous(executed: Path) -> str:
    """What a failure leaves of the last success in the results folder, in words."""
    if executed.exists():
        return f"{executed.name} and the tables beside it, from an earlier success, are untouched"
    return "no earlier success in that folder, so no outputs were published"


def _moved(source: Path, target: Path) -> bool:
    """Rename ``source`` to ``target`` (needs no space); whether it worked."""
    try:
        os.replace(source, target)
    except OSError:
        return False
    return True


def _whole(notebook: Path) -> bool:
    """Whether ``notebook`` exists and parses as JSON (a full disk cuts a notebook being saved short)."""
    try:
        json.loads(notebook.read_bytes())
    except (OSError, ValueError):
        return False
    return True


def _execute_checked(source: Path, output: Path, params: dict[str, Any]) -> Path:
    """Execute the notebook ``source`` with checked ``params`` into the existing folder ``output``
    (see :func:`execute`): in a staging folder whose outputs replace ``output``'s together on success
    (:mod:`gflkit.staging`)."""
    import papermill
    from nbclient.exceptions import DeadKernelError

    name = source.stem
    executed, failed = output / f"{name}.ipynb", output / f"{name}.failed.ipynb"
    staging.remove_dead(output, name)
    stage = staging.staging_folder(output, name)
    running = stage / executed.name
    params = {**params, "results_dir": str(stage)}
    try:
        # The kernel inherits the environment: text bars, streamed to the terminal and saved readably; and
        # this process's pid, so that it ends when this process does (gflkit.lifeline).
        mode = os.environ.get("GFLKIT_PROGRESS") or "auto"
        kernel_env = {"GFLKIT_PROGRESS": "text" if mode == "auto" else mode, ENV_PARENT: str(os.getpid())}
        if "data_root" in params:
            kernel_env[ENV_ROOT] = params["data_root"]
        with mock.patch.dict(os.environ, kernel_env):
            papermill.execute_notebook(str(source), str(running), parameters=params, cwd=str(source.parent),
                                       progress_bar=False, stdout_file=sys.stdout, stderr_file=sys.stderr)
        staging.retarget(running, stage, output)
        staging.publish(stage, output)
        failed.unlink(missing_ok=True)  # an older failure would contradict the notebook that just succeeded
    except papermill.PapermillExecutionError as error:
        os.replace(running, failed)
        raise NotebookError(f"{name} failed in cell {error.exec_count}: {error.ename}: {error.evalue} — the failed "
                            f"notebook is {failed}; {_previous(executed)}") from None
    except DeadKernelError:
        if running.exists():
            os.replace(running, failed)
        raise NotebookError(f"{name}: the kernel died (killed, or out of memory): run the same command again — "
                            f"finished runs are stored and an interrupted run resumes from its last checkpoint") from None
    except OSError as error:  # the executed notebook could not be saved: a full disk, most likely
        full = disk_full(running, error)
        if full is None:
            raise
        kept = f"the failed notebook is {failed}" if _whole(running) and _moved(running, failed) else \
            "no complete failed notebook could be written"
        raise NotebookError(f"{name}: {full.strerror}; {kept}; {_previous(executed)}") from None
    finally:
        staging.discard(stage)  # a failure's tables and figures: the previous outputs stay as they were
    return executed
