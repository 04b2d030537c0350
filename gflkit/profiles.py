"""Notebook profiles: ``smoke`` (seconds, embedded data), ``ci`` (minutes on 2 CPU cores, real data),
``paper`` (the paper's settings, meant for a GPU).

A notebook's parameters cell names a profile plus optional ``seeds`` and ``overrides``;
:func:`resolve_profile` turns them into a validated :class:`Profile`, so that any mistake (unknown
profile, dataset or method, a non-positive round count, an unknown override) fails right there with
one clear message instead of halfway through the experiments.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from gflkit.experiment import RunConfig
from gflkit.fields import check_sweep_not_emptied


@dataclass(frozen=True)
class Profile:
    """One notebook profile: the base run configuration, the seeds and the notebook's sweep values.

    Attributes:
        name: ``smoke``, ``ci`` or ``paper``.
        base: keyword arguments of :class:`~gflkit.experiment.RunConfig` shared by every run.
        seeds: the seeds every configuration is run with.
        sweep: the notebook's experiment grid (e.g. ``{"methods": [...], "shards": [2, 5, 10]}``);
            a ``methods`` entry is validated like the base configuration. No entry may be named like a
            :class:`~gflkit.experiment.RunConfig` field (refused), so an override is never ambiguous.
        method_options: per-method hyper-parameters of this profile (e.g. a smaller FedSKA ``k`` for
            a 20-client smoke run), merged under any ``method_options`` passed to :meth:`config`.
        method_config: per-method :class:`~gflkit.experiment.RunConfig` fields that differ from the
            base: the paper's evaluation protocol for that method (``{"ifca": {"evaluate": "local"}}``,
            see :mod:`gflkit.engine`), a baseline's published optimiser (``{"gcfl": {"weight_decay":
            5e-4}}``). A field passed to :meth:`config`, or overridden for the whole profile, wins.
        required: the datasets this profile's core tables need (default: the base dataset); a
            reproduction whose required data are missing fails before it starts
            (:func:`gflkit.notebooks.execute`), while other sections skip with a reason.
    """

    name: str
    base: Mapping[str, Any]
    seeds: tuple[int, ...] = (0,)
    sweep: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    method_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    method_config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    required: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        clashes = sorted(set(self.sweep) & {f.name for f in dataclasses.fields(RunConfig)})
        if clashes:  # an override of such a key could mean either, so a profile may not declare one
            raise ValueError(f"profile {self.name!r}: sweep entr(ies) {clashes} share a RunConfig field's name; "
                             f"rename them (e.g. {clashes[0] + '_counts'!r}) so that overrides stay unambiguous")

    @property
    def required_datasets(self) -> tuple[str, ...]:
        """The datasets the core tables need — ``required``, else the base dataset."""
        return self.required if self.required is not None else (self.base["dataset"],)

    def config(self, **changes: Any) -> RunConfig:
        """A validated run configuration: the base, then the method's own fields, then ``changes``."""
        method = changes.get("method", self.base.get("method", "fedavg"))
        fields = {**self.base, **self.method_config.get(method, {}), **changes}
        fields["method_options"] = {**self.method_options.get(method, {}), **fields.get("method_options", {})}
        return RunConfig(**fields)

    def protocol(self, method: str) -> str:
        """The evaluation protocol this profile scores ``method`` with."""
        return self.config(method=method).evaluate


def resolve_profile(
    profiles: Mapping[str, Profile],
    name: str,
    seeds: Sequence[int] | int | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Profile:
    """The profile ``name`` with ``seeds`` and ``overrides`` applied, validated.

    ``overrides`` may change any :class:`RunConfig` field (``rounds=50``) or any sweep entry
    (``shards=[2]``); an overridden field holds for every method, e.g. ``evaluate="local"`` scores every
    method with that protocol instead of the profile's per-method ones. ``method_options`` is the
    exception: methods have different hyper-parameters, so it names the method,
    ``{"method_options": {"fedska": {"k": 50}}}``, and is merged into the profile's. Where the runs compute
    (data root, device, executor) is the notebook's :class:`~gflkit.runtime.Runtime`, validated apart.
    Raises ``ValueError`` naming the problem and the valid choices.
    """
    if name not in profiles:
        raise ValueError(f"unknown profile {name!r}; choose one of {sorted(profiles)}")
    profile = profiles[name]
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ValueError(f"overrides must be a dict of RunConfig fields or sweep entries such as "
                         f"{{\"rounds\": 3}} (keys quoted), got {overrides!r}")
    overrides = dict(overrides or {})
    config_fields = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(overrides) - config_fields - set(profile.sweep))
    if unknown:
        raise ValueError(
            f"unknown override(s) {unknown}; valid: RunConfig fields {sorted(config_fields)} "
            f"or sweep entries {sorted(profile.sweep)}"
        )
    method_options = _merged_method_options(profile, overrides.pop("method_options", {}))
    base = {**profile.base, **{k: v for k, v in overrides.items() if k in config_fields}}
    for key in set(overrides) & set(profile.sweep):
        if isinstance(overrides[key], (str, bytes)) or not isinstance(overrides[key], Sequence):
            raise ValueError(f"override {key} is a sweep entry and takes a list, e.g. {{{key!r}: "
                             f"{list(profile.sweep[key])[:1]}}}; got {overrides[key]!r}")
    sweep = {**profile.sweep, **{k: tuple(v) for k, v in overrides.items() if k in profile.sweep}}
    check_sweep_not_emptied(sweep, profile.sweep)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = (seeds,)  # ``-p seeds=1``: one seed
    if seeds is not None and (isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence)):
        raise ValueError(f"seeds must be a non-empty list of non-negative integers such as [0, 1] (or one "
                         f"integer), got {seeds!r}")
    seeds = tuple(profile.seeds if seeds is None else seeds)
    if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of non-negative integers such as [0, 1] (or one "
                         f"integer), got {list(seeds)}")
    per_method = {method: {k: v for k, v in fields.items() if k not in overrides}
                  for method, fields in profile.method_config.items()}  # an override holds for every method
    resolved = dataclasses.replace(profile, base=base, seeds=seeds, sweep=sweep, method_config=per_method,
                                   method_options=method_options)
    resolved.config()  # validates dataset, method, model, rounds, ...
    for method in sweep.get("methods", ()):
        resolved.config(method=method)
    return resolved


def _merged_method_options(profile: Profile, per_method: Any) -> dict[str, dict[str, Any]]:
    """The profile's per-method options with the override ``{method: {option: value}}`` merged in."""
    from gflkit.algorithms import ALGORITHMS

    example = 'overrides={"method_options": {"fedska": {"k": 50}}}'
    if not isinstance(per_method, Mapping) or not all(isinstance(v, Mapping) for v in per_method.values()):
        raise ValueError(f"override method_options must map a method to its options, e.g. {example}; "
                         f"got {per_method!r}")
    unknown = sorted(set(per_method) - set(ALGORITHMS))
    if unknown:
        raise ValueError(f"override method_options names unknown method(s) {unknown} (it maps a method to its "
                         f"options, e.g. {example}); methods: {sorted(ALGORITHMS)}")
    merged = {method: dict(options) for method, options in profile.method_options.items()}
    for method, options in per_method.items():
        merged[method] = {**merged.get(method, {}), **options}
    return merged


def chosen_sections(sections: Sequence[str] | None, known: Sequence[str]) -> list[str]:
    """The notebook sections a ``grids`` call asked for (all of ``known`` when ``sections`` is empty), or a
    ValueError naming the unknown ones and the choice."""
    return known_names(sections or known, known, "section")


def known_names(names: Iterable[str], known: Iterable[str], what: str, where: str = "") -> list[str]:
    """``names`` as a list, or a ValueError naming those not in ``known`` (``"unknown <what>(s) [...]<where>;
    choose from [...]"``, the choice in ``known``'s order)."""
    names, known = list(names), list(known)
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}{where}; choose from {known}")
    return names
