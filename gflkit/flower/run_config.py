"""A gflkit run from Flower's run config (``[tool.flwr.app.config]`` and ``flwr run --run-config``).

Flower's run config is a flat mapping of TOML scalars (bool, int, float, str). Its keys are the
:class:`~gflkit.experiment.RunConfig` fields, written with ``-`` or ``_`` (``num-clients``), plus the app's
own settings (:class:`AppSettings`). Fields that hold a dict or a list are given as a JSON string
(``method-options = '{"mu": 0.01}'``) or, for a dict, as dotted keys (``method-options.mu = 0.01``, which
TOML writes as a sub-table and Flower flattens). A field that may be None takes ``"none"``.

Example, from the template app project (``flower_app/``)::

    flwr run flower_app --run-config "method='sfl' rounds=5 method-options='{\\"graph\\": \\"learned\\"}'"

Every mistake fails in one line naming the key, before any data are loaded.

The ServerApp writes ``records`` and ``timing`` only inside one folder it owns, which the server's operator
chooses (:func:`results_folder`: ``$GFLKIT_FLOWER_RESULTS``, by default ``results/flower`` under the
ServerApp's working directory): whoever submits a run names a file there, never a path elsewhere on the server.
"""
from __future__ import annotations

import dataclasses
import json
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from gflkit.algorithms import ALGORITHMS
from gflkit.experiment import RunConfig
from gflkit.flower.methods import check_method

#: the app's own settings: key → (default, what it is)
APP_KEYS: dict[str, tuple[Any, str]] = {
    "device": ("auto", "where each side computes: auto | cpu | cuda | cuda:N"),
    "records": ("", "a CSV file name, in the app's results folder, for the run's records (empty: none)"),
    "timing": ("", "a CSV file name, in the app's results folder, for each round's training seconds (empty: none)"),
    "round-timeout": (600.0, "seconds the server waits for one round's replies"),
    "connect-timeout": (120.0, "seconds the server waits for one node per client"),
}
#: the environment variable naming the folder the ServerApp writes its CSVs into
RESULTS_ENV = "GFLKIT_FLOWER_RESULTS"
_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}
_HINTS = typing.get_type_hints(RunConfig)


@dataclass(frozen=True)
class AppSettings:
    """What a Flower run config asks for: the gflkit run and the app's own settings (:data:`APP_KEYS`)."""

    config: RunConfig
    device: str = "auto"
    records: str = ""
    timing: str = ""
    round_timeout: float = 600.0
    connect_timeout: float = 120.0


def _canonical(key: str) -> str:
    return key.replace("-", "_")


def _structured(name: str, value: Any) -> Any:
    """A dict / list field from its JSON string."""
    if not isinstance(value, str):
        raise ValueError(f"run config key {name!r} takes a JSON string (e.g. '{{}}'), got {value!r}")
    try:
        return json.loads(value)
    except json.JSONDecodeError as error:
        raise ValueError(f"run config key {name!r} is not valid JSON ({error.msg}): {value!r}") from None


def _kinds(name: str) -> tuple[list[type], bool]:
    """A field's accepted types and whether it may be None (``int | None`` → ``[int], True``)."""
    hint = _HINTS[name]
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    return [typing.get_origin(a) or a for a in args if a is not type(None)], type(None) in args


def _value(key: str, name: str, value: Any) -> Any:
    """A field's value from the run config, checked against the field's type (no bool for a number)."""
    kinds, optional = _kinds(name)
    if optional and isinstance(value, str) and value.lower() == "none":
        return None
    if kinds[0] in (dict, list):
        return _structured(key, value)
    if kinds[0] is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kinds[0]) or (isinstance(value, bool) and kinds[0] is not bool):
        alternative = ' (or "none")' if optional else ""
        raise ValueError(f"run config key {key!r} takes {kinds[0].__name__}{alternative}, got {value!r}")
    return value


def settings_from_run_config(run_config: Mapping[str, Any]) -> AppSettings:
    """The :class:`AppSettings` of a Flower run config (module docstring); ``ValueError`` in one line."""
    fields: dict[str, Any] = {}
    app = {key: default for key, (default, _) in APP_KEYS.items()}
    for key, value in run_config.items():
        head, _, rest = key.partition(".")
        name = _canonical(head)
        if key in APP_KEYS:
            app[key] = value
        elif name in _FIELDS and rest:
            if _kinds(name)[0][0] is not dict:
                raise ValueError(f"run config key {key!r}: {head!r} is not a dict field")
            fields.setdefault(name, {})[_canonical(rest) if name == "method_options" else rest] = value
        elif name in _FIELDS:
            fields[name] = _value(key, name, value)
        else:
            valid = sorted([*(f.replace("_", "-") for f in _FIELDS), *APP_KEYS])
            raise ValueError(f"unknown run config key {key!r}; valid keys: {', '.join(valid)}")
    if "dataset" not in fields:
        raise ValueError("the run config needs a 'dataset' (e.g. dataset = \"digits\" in [tool.flwr.app.config])")
    for key in ("records", "timing", "device"):
        if not isinstance(app[key], str):
            raise ValueError(f"run config key {key!r} takes a string, got {app[key]!r}")
    for key in ("records", "timing"):
        _check_file_name(key, app[key])
    for key in ("round-timeout", "connect-timeout"):
        if isinstance(app[key], bool) or not isinstance(app[key], (int, float)) or not app[key] > 0:
            raise ValueError(f"run config key {key!r} takes a positive number of seconds, got {app[key]!r}")
    if fields.get("method") in ALGORITHMS:  # refused by name before the method's own checks of the run
        check_method(fields["method"])
    return AppSettings(RunConfig(**fields), device=app["device"], records=app["records"], timing=app["timing"],
                       round_timeout=float(app["round-timeout"]), connect_timeout=float(app["connect-timeout"]))


def _check_file_name(key: str, name: str) -> None:
    """``name`` is empty or a relative ``*.csv`` path that stays inside the results folder."""
    path = PurePosixPath(name)
    if name and (path.is_absolute() or ".." in path.parts or "\\" in name or path.suffix != ".csv"):
        raise ValueError(f"run config key {key!r} takes a CSV file name inside the app's results folder "
                         f"(${RESULTS_ENV}), e.g. 'records.csv'; got {name!r}")


def results_folder() -> Path:
    """The folder the ServerApp writes into: ``$GFLKIT_FLOWER_RESULTS``, else ``results/flower`` (absolute)."""
    return Path(os.environ.get(RESULTS_ENV) or Path("results") / "flower").resolve()


def output_path(key: str, name: str, folder: Path) -> Path:
    """Where the file ``name`` of run config key ``key`` is written: inside ``folder``, links included."""
    _check_file_name(key, name)
    path = (folder / name).resolve()
    if not path.is_relative_to(folder.resolve()):
        raise ValueError(f"run config key {key!r}: {name!r} leads out of the results folder {folder} (a link)")
    return path


__all__ = ["APP_KEYS", "AppSettings", "RESULTS_ENV", "output_path", "results_folder", "settings_from_run_config"]
