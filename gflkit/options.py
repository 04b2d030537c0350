"""Options added after runs were stored: left out of the store key while they reproduce those runs.

A run is stored under a hash of its configuration with every option written out
(:func:`gflkit.results.config_key`), so that the same run written two ways is stored once. Adding an option
would then change the key of every earlier run and compute it again. So a field added later is declared with
:func:`added_field`, naming the value every earlier run had (by default, the field's default), and
:func:`keyed` leaves the field out of a configuration's stored form while it holds that value:

.. math::  \\mathrm{keyed}(c) = \\{(f, c_f) : f \\text{ not added, or } c_f \\neq \\mathrm{earlier}_f\\}

Changing such a field's default away from the earlier value puts it into every key (the value then differs),
so a default that changes the numbers always re-keys; ``tests/test_store_keys.py`` pins today's keys.
"""
from __future__ import annotations

import dataclasses
from typing import Any

#: The field metadata key that holds an added field's earlier value.
EARLIER = "gflkit.earlier_value"
_DEFAULT = object()


def added_field(default: Any, earlier: Any = _DEFAULT) -> Any:
    """A dataclass field added after runs were stored: its ``default`` and the value ``earlier`` runs had
    (``default`` unless given), which :func:`keyed` leaves out of the stored form. ``default`` must be
    immutable (a number, string, bool, tuple or None)."""
    if isinstance(default, (list, dict, set)):
        raise TypeError(f"an added field's default must be immutable, got {default!r}")
    return dataclasses.field(default=default, metadata={EARLIER: default if earlier is _DEFAULT else earlier})


def added_fields(options_type: type) -> dict[str, Any]:
    """The added fields of a dataclass type and the value each had in earlier runs."""
    return {f.name: f.metadata[EARLIER] for f in dataclasses.fields(options_type) if EARLIER in f.metadata}


def keyed(options: Any) -> dict[str, Any]:
    """``dataclasses.asdict(options)`` without the added fields that hold their earlier value."""
    earlier = added_fields(type(options))
    return {name: value for name, value in dataclasses.asdict(options).items()
            if not (name in earlier and value == earlier[name])}


def keyword_defaults(function: Any, skip: int = 0) -> dict[str, Any]:
    """The keyword parameters of ``function`` (a function, or a class: its ``__init__``) that have a default,
    after the first ``skip`` parameters (``self`` excluded), with their defaults."""
    import inspect

    target = function.__init__ if isinstance(function, type) else function
    parameters = list(inspect.signature(target).parameters.values())
    if isinstance(function, type):
        parameters = parameters[1:]
    return {p.name: p.default for p in parameters[skip:]
            if p.default is not inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def keyed_options(given: dict[str, Any], current: dict[str, Any], earlier: dict[str, Any]) -> dict[str, Any]:
    """The stored form of options: those ``given``, plus the ``current`` defaults that shape a run although no
    option names them — those whose value is not the ``earlier`` runs' (a changed default, or an option added
    without declaring its earlier value)."""
    return {**given, **{name: value for name, value in current.items()
                        if name not in given and (name not in earlier or not _same(value, earlier[name]))}}


def _same(value: Any, earlier: Any) -> bool:
    """Equal, as JSON would store them (a tuple and a list with the same items are the same option)."""
    as_list = lambda v: list(v) if isinstance(v, tuple) else v  # noqa: E731
    return as_list(value) == as_list(earlier)
