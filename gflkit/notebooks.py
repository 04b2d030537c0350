"""Executing the project's notebooks with papermill (``make demo``, ``make reproduce``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = REPO / "notebooks"


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
    return False, (
        f"{name}: section skipped: {first.relpath} is {first.state} under {where} ({len(bad)} of "
        f"{len(statuses)} files unavailable). To run it, download the data with `gflkit data fetch {name}` "
        f"(needs internet) or set GFLKIT_DATA to a folder holding {name}/raw/{first.relpath}."
    )


def notebook_path(name: str) -> Path:
    """``notebooks/<name>.ipynb`` of the repository, with a clear error listing the notebooks."""
    path = NOTEBOOK_DIR / f"{name}.ipynb"
    if not path.exists():
        known = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
        raise ValueError(f"unknown notebook {name!r}; available in {NOTEBOOK_DIR}: {known}")
    return path


def execute(
    name: str,
    profile: str = "smoke",
    output_dir: str | Path | None = None,
    parameters: dict[str, Any] | None = None,
) -> Path:
    """Run ``notebooks/<name>.ipynb`` with papermill; the executed copy and all results go to ``output_dir``.

    The notebook receives ``profile``, ``results_dir`` and, when ``GFLKIT_DATA`` is set, ``data_root``,
    plus any extra ``parameters``. Returns the path of the executed notebook.
    """
    import papermill

    source = notebook_path(name)
    output = Path(output_dir).resolve() if output_dir else default_results_dir(name)
    output.mkdir(parents=True, exist_ok=True)
    params = {"profile": profile, "results_dir": str(output), **(parameters or {})}
    if os.environ.get("GFLKIT_DATA") and "data_root" not in params:
        params["data_root"] = os.environ["GFLKIT_DATA"]
    executed = output / f"{name}.ipynb"
    papermill.execute_notebook(str(source), str(executed), parameters=params, cwd=str(source.parent), progress_bar=False)
    return executed
