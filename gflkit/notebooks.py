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
