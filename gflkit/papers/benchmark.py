"""Profiles, methods, settings and grids of the benchmark notebook: every image method of the five papers
under one protocol.

Each paper compares its method with a few baselines on its own setting; gflkit runs all of them on one
engine with identical splits and seeds, so one table can answer which method is best, by how much and at
what cost. **The protocol** (one for every method): MNIST pooled (official train + test), 100 clients,
linear MCLR, E = 1 local epoch, batch 32, plain SGD lr 0.01, 200 rounds, evaluation every 5 rounds —
FedSKA's setting, the one with the most methods. **Settings** (:data:`SETTINGS`): label shards
q ∈ {2, 5, 10}, Dirichlet α ∈ {0.1, 0.5}, and a noisy uplink (JGESR's channel, noise scale s = 0.1, on
q = 5 shards).

**Methods** (:data:`METHODS`) take the hyper-parameters the notebook of the paper that publishes them
uses — read from that paper's module, not copied (FedU's λ = 0.1 and IFCA's 3 clusters from FedSKA's,
CFL's first split from JGESR's, SFL* as the SFL authors ran it); the rest are each method's published
defaults (:mod:`gflkit.algorithms`). **Protocols**: every run records both (``server``: the model the
server holds for the client; ``local``: that model after the client's local training). The headline
table scores each method under its own paper's protocol (:data:`PROTOCOL`); a second table scores all
under ``server``. FedCG is left out: its domain residuals need its own network (``model="fedcg"``), not
the common MCLR.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from gflkit import metrics
from gflkit.algorithms import method_communication
from gflkit.atomic import atomic_write_text
from gflkit.executors import stored_grid_records
from gflkit.experiment import Run, build_federation
from gflkit.papers import append_seeds, fedska, jgesr, sfl
from gflkit.papers.comparison import Scoring, best_other_per_group
from gflkit.papers.ranking import average_ranks, friedman, nemenyi_critical_difference, ranks, separated_pairs
from gflkit.profiles import Profile, chosen_sections, known_names, resolve_profile
from gflkit.runtime import Runtime
from gflkit.timing import time_interleaved

#: Family → methods (the ``ci`` profile runs the first three of each family).
FAMILIES: dict[str, tuple[str, ...]] = {
    "global": ("fedavg", "fedprox", "scaffold", "moon"),
    "personalised": ("local", "ditto", "fedper", "lg_fedavg"),
    "clustered": ("ifca", "cfl"),
    "graph": ("sfl", "fedska", "fedu", "pfedgraph", "fedamp", "fedatt", "sfl_star"),
    "robust aggregation": ("pdca", "two_step"),
}
#: Each paper's headline method, compared with the best baseline (:data:`BASELINES`) in every setting.
HEADLINES = {"fedska": "FedSKA", "sfl_star": "SFL", "pdca": "JGESR"}
#: The comparison's baselines — every method that is no paper's own (SFL's given-graph row and JGESR's
#: Two-step ablation are their papers' variants, not baselines).
BASELINES = tuple(m for members in FAMILIES.values() for m in members if m not in (*HEADLINES, "sfl", "two_step"))
#: Row label → (gflkit method, options from the publishing paper's module; completed with the method's defaults).
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "local": ("local", {}), "fedavg": ("fedavg", {}), "fedprox": ("fedprox", {}), "scaffold": ("scaffold", {}),
    "moon": ("moon", {}), "ditto": ("ditto", {}), "fedper": ("fedper", {}), "lg_fedavg": ("lg_fedavg", {}),
    "ifca": ("ifca", {}), "cfl": ("cfl", {}),
    "fedu": ("fedu", dict(fedska.PROFILES["paper1"].method_options["fedu"])),
    "fedska": ("fedska", {}), "pfedgraph": ("pfedgraph", {}), "fedamp": ("fedamp", {}), "fedatt": ("fedatt", {}),
    "sfl": sfl.VARIANTS["sfl"], "sfl_star": sfl.VARIANTS["sfl_star"],
    "pdca": ("pdca", {}), "two_step": ("two_step", {}),
}
#: Which paper's notebook each method's protocol comes from — its own paper's where it is a headline
#: method or one of that paper's baselines, FedSKA's (the common protocol's paper) for the shared baselines.
SOURCE: dict[str, str] = {m: "fedska" for m in fedska.METHODS if m != "sfl"} | {
    m: "jgesr" for m in ("pdca", "two_step", "cfl", "fedamp", "pfedgraph")} | {
    m: "sfl" for m in ("sfl", "sfl_star", "fedatt", "fedper", "lg_fedavg")} | {"scaffold": "its paper", "moon": "its paper"}
#: The protocol each method is scored under in its source's notebook (JGESR's, SFL's and the global-model
#: methods' papers score the model the server holds: ``server``).
PROTOCOL: dict[str, str] = {m: fedska.PROTOCOL[m]["evaluate"] if SOURCE[m] == "fedska" else "server"
                            for m in METHODS}
#: Setting → the RunConfig fields it changes (every setting names its channel; a clean one has no noise).
CLEAN, NOISY = {"noise_scale": 0.0}, {"noise_scale": 0.1}
SETTINGS: dict[str, dict[str, Any]] = {
    "shards q=2": dict(partition="shards", partition_options={"shards_per_client": 2}, channel=CLEAN),
    "shards q=5": dict(partition="shards", partition_options={"shards_per_client": 5}, channel=CLEAN),
    "shards q=10": dict(partition="shards", partition_options={"shards_per_client": 10}, channel=CLEAN),
    "dirichlet α=0.1": dict(partition="dirichlet", partition_options={"alpha": 0.1}, channel=CLEAN),
    "dirichlet α=0.5": dict(partition="dirichlet", partition_options={"alpha": 0.5}, channel=CLEAN),
    "noisy uplink s=0.1, q=5": dict(partition="shards", partition_options={"shards_per_client": 5}, channel=NOISY),
}
#: Setting → the setting it perturbs. A twin shares its partition, seeds and clients with the setting it
#: perturbs (the noisy uplink is q = 5 with a noisy channel), so its ranks are not an independent block:
#: Friedman's test and the Nemenyi difference count it once (:func:`independent_settings`).
TWINS: dict[str, str] = {"noisy uplink s=0.1, q=5": "shards q=5"}
SECTIONS = ("benchmark",)
#: The per-seed, per-client scores at the last round a results folder commits (``clients.csv``, or one file per
#: seed: :data:`SEED_CLIENT_FILE`): what the seeds run later are appended to
#: (:func:`gflkit.papers.append_seeds`) and decided from.
CLIENT_COLUMNS = ["variant", "setting", "seed", "client", "round", "accuracy_own", "accuracy_server", "accuracy_local",
                  "num_samples"]
#: The score columns of ``clients.csv`` and their decimals (a client's accuracy is a count over at most a few
#: hundred test samples: four decimals keep every score distinct and the file small).
SCORE_COLUMNS = ["accuracy_own", "accuracy_server", "accuracy_local"]
SCORE_DECIMALS = 4
#: What identifies a row of ``clients.csv``.
CLIENT_KEYS = ["variant", "setting", "seed", "client"]
#: The per-seed files :func:`append_to_folder` writes the rows of a folder into (one seed of the six settings'
#: 19 methods × 100 clients is about 0.6 MiB: one file for all seeds would outgrow a readable summary), and the
#: pattern that finds them beside a notebook's ``clients.csv``.
SEED_CLIENT_FILE = "clients_seed{seed}.csv"
CLIENT_FILE_PATTERN = "clients*.csv"
BASE = dict(dataset="mnist", num_clients=100, model="mclr", batch_size=32, lr=0.01, local_epochs=1, rounds=200,
            eval_every=5)


def _first(count: int) -> tuple[str, ...]:
    return tuple(m for members in FAMILIES.values() for m in members[:count])


def _method_options(rounds: int, **extra: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-method options a profile adds: CFL's first split scaled with the budget (JGESR's rule)."""
    return {**jgesr.cfl_options(rounds), **extra}


PROFILES = {
    # scikit-learn's embedded digits, 20 clients, 4 rounds, three settings: the whole notebook in 1–2 minutes.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="digits", num_clients=20, rounds=4, eval_every=2, batch_size=16, lr=0.05),
        sweep={"variants": tuple(METHODS), "settings": ("shards q=2", "dirichlet α=0.5", "noisy uplink s=0.1, q=5"),
               "timing_methods": ("fedavg", "sfl", "fedska")},
        method_options=_method_options(4, fedska={"k": 5}, sfl={"learn_k": 5}),
    ),
    # Real MNIST (20,000 pooled samples), 20 rounds, the first three methods of every family, four settings.
    "ci": Profile(
        "ci",
        base=dict(BASE, max_samples=20_000, rounds=20),
        sweep={"variants": _first(3), "settings": ("shards q=2", "shards q=10", "dirichlet α=0.1",
                                                  "noisy uplink s=0.1, q=5"),
               "timing_methods": _first(3)},
        method_options=_method_options(20),
    ),
    # The full grid at the protocol's 200 rounds, one seed (estimate first: `make bench`; run in the background).
    "paper1": Profile("paper1", base=BASE, sweep={"variants": tuple(METHODS), "settings": tuple(SETTINGS),
                                                  "timing_methods": tuple(METHODS)},
                      method_options=_method_options(200)),
    # The same with three seeds.
    "paper": Profile("paper", base=BASE, seeds=(0, 1, 2),
                     sweep={"variants": tuple(METHODS), "settings": tuple(SETTINGS), "timing_methods": tuple(METHODS)},
                     method_options=_method_options(200)),
}


def independent_settings(settings: Sequence[str]) -> list[str]:
    """The ``settings`` that are independent blocks for Friedman's test: each setting, less every twin
    (:data:`TWINS`) whose original is among them."""
    return [s for s in settings if TWINS.get(s) not in settings]


@dataclass(frozen=True)
class Entrant:
    """A method of your own placed on the benchmark beside the papers' (:func:`entrant_runs`).

    Attributes:
        label: its row in the tables (not one of :data:`METHODS`' labels).
        method: the registered method it runs (:func:`~gflkit.algorithms.register_method`).
        options: its hyper-parameters (completed with its defaults).
        protocol: the model it is scored with, ``"server"`` or ``"local"`` (both are recorded).
    """

    label: str
    method: str
    options: Mapping[str, Any] = field(default_factory=dict)
    protocol: str = "server"

    def __post_init__(self) -> None:
        if self.label in METHODS:
            raise ValueError(f"entrant label {self.label!r} is a benchmark method's; choose another label")
        if self.protocol not in metrics.PROTOCOLS:
            raise ValueError(f"entrant protocol must be one of {list(metrics.PROTOCOLS)}, got {self.protocol!r}")


def method_config(params: Profile, label: str, setting: str, seed: int, entrant: Entrant | None = None,
                  **changes: Any):
    """The profile's run of method ``label`` (:data:`METHODS`, or the ``entrant`` of that label) in ``setting``
    (:data:`SETTINGS`) with ``seed``.

    Its ``evaluate`` is the method's own protocol (:data:`PROTOCOL`, the entrant's ``protocol``): every run records
    both protocols, so this only names the primary column — and gives a run the key of the same run in its source
    paper's grid (FedSKA's ``paper1`` Table 1 runs, say), whose stored folders can then be copied over as they are.
    """
    if entrant is not None and entrant.label == label:
        method, options, protocol = entrant.method, entrant.options, entrant.protocol
    else:
        method, options = METHODS[known_names([label], METHODS, "method")[0]]
        protocol = PROTOCOL[label]
    fields = {**SETTINGS[known_names([setting], SETTINGS, "setting")[0]], "evaluate": protocol, **changes}
    return params.config(method=method, method_options=dict(options), seed=seed, **fields)


def method_run(params: Profile, label: str, setting: str, seed: int, entrant: Entrant | None = None,
               **changes: Any) -> Run:
    """:func:`method_config` labelled with its row (``variant``) and column (``setting``)."""
    return Run(method_config(params, label, setting, seed, entrant, **changes), {"variant": label, "setting": setting})


def entrant_runs(params: Profile, entrant: Entrant) -> list[Run]:
    """The ``entrant``'s runs in every setting and seed of ``params``, under the protocol of every other method's
    (the profile's base, each setting's fields): run them with :func:`grids`' runs and every table reads it."""
    settings = known_names(params.sweep["settings"], SETTINGS, "setting")
    return [method_run(params, entrant.label, s, seed, entrant) for s in settings for seed in params.seeds]


def method_order(labels: Sequence[str], order: Sequence[str] = tuple(METHODS)) -> list[str]:
    """``labels`` (each once) in the benchmark's ``order`` (:data:`METHODS`' by default), then any entrant's as
    they come."""
    present = list(dict.fromkeys(labels))
    return [m for m in order if m in present] + [m for m in present if m not in order]


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The runs of the notebook (``gflkit precompute benchmark``): every method in every setting and
    seed; the same wherever they compute (``runtime``: every setting runs on the base dataset)."""
    chosen = chosen_sections(sections, SECTIONS)
    methods = known_names(params.sweep["variants"], METHODS, "method")
    settings = known_names(params.sweep["settings"], SETTINGS, "setting")
    runs = [method_run(params, m, s, seed) for s in settings for m in methods for seed in params.seeds]
    return {name: runs for name in chosen}


def rank_readings(scores: pd.DataFrame) -> pd.DataFrame:
    """Friedman's test and Nemenyi's critical difference over a settings × methods table, read twice: with
    every setting as a block and with the independent blocks only (:func:`independent_settings`). One row
    per reading: its settings, N, k, χ², p, CD and the pairs of methods it separates."""
    readings = {"twins counted too": list(scores.index), "independent blocks": independent_settings(list(scores.index))}
    rows = []
    for reading, blocks in readings.items():
        table = scores.loc[blocks]
        test = friedman(table)
        cd = nemenyi_critical_difference(test.k, test.n)
        pairs = separated_pairs(average_ranks(table), cd)
        rows.append({"reading": reading, "settings": len(blocks), "methods": test.k, "chi2": test.statistic,
                     "p": test.pvalue, "critical difference": cd, "pairs separated": len(pairs),
                     "separated": "; ".join(f"{a} vs {b}" for a, b in pairs)})
    return pd.DataFrame(rows)


def seed_scores(clients: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Settings × methods tables of mean own-protocol accuracy (:func:`seed_means`) for the seeds that every
    method × setting cell of ``clients`` holds: one table per seed (``"seed 0"``, …) and, with two or more
    seeds, their cell-wise mean (``"mean over 3 seeds"``), settings and methods in the benchmark's order.

    Seeds are not blocks of Friedman's test: the seeds of one setting share its partition scheme, so their
    ranks are correlated (as a twin's are, :data:`TWINS`). The mean is each cell's estimate; the per-seed
    tables show what a rerun moves. ``ValueError`` when no seed is held by every cell."""
    means = seed_means(clients)
    held = means.groupby(["method", "setting"])["seed"].agg(frozenset)
    common = sorted(frozenset.intersection(*held))
    if not common:
        raise ValueError("no seed is held by every method × setting cell; run one seed of every cell first")
    kept = means[means["seed"].isin(common)]
    settings = [s for s in SETTINGS if s in set(kept["setting"])]
    methods = method_order(kept["method"])

    def table(rows: pd.DataFrame) -> pd.DataFrame:
        return rows.pivot_table(index="setting", columns="method", values="mean").reindex(settings)[methods]

    tables = {f"seed {seed}": table(kept[kept["seed"] == seed]) for seed in common}
    if len(common) > 1:
        tables[f"mean over {len(common)} seeds"] = table(kept)
    return tables


def rankable(clients: pd.DataFrame) -> bool:
    """Whether Friedman's test reads the settings × methods table of ``clients``: every method in every setting,
    at least 3 methods and at least 2 independent settings (:func:`independent_settings`)."""
    settings, methods = clients["setting"].unique(), clients["variant"].unique()
    complete = clients.groupby(["variant", "setting"]).ngroups == len(settings) * len(methods)
    return complete and len(methods) >= 3 and len(independent_settings(list(settings))) >= 2


def seed_rank_readings(clients: pd.DataFrame) -> pd.DataFrame:
    """:func:`rank_readings` of every table of :func:`seed_scores` (column ``scores``). On the rows of the
    mean table, ``separated in every seed`` lists the pairs that the same reading also separates in each seed's
    table: the separations a rerun does not undo."""
    tables = seed_scores(clients)
    readings = pd.concat([rank_readings(table).assign(scores=name) for name, table in tables.items()],
                         ignore_index=True)
    summary = list(tables)[-1]
    per_seed = readings[readings["scores"] != summary]

    def held_in_every_seed(row: pd.Series) -> str:
        if row["scores"] != summary or per_seed.empty:
            return ""
        same_reading = per_seed[per_seed["reading"] == row["reading"]]["separated"]
        seeds = [set(separated.split("; ")) for separated in same_reading]
        return "; ".join(pair for pair in row["separated"].split("; ") if all(pair in held for held in seeds))

    readings["separated in every seed"] = readings.apply(held_in_every_seed, axis=1)
    return readings[["scores", *[c for c in readings.columns if c != "scores"]]]


def seed_average_ranks(clients: pd.DataFrame) -> pd.DataFrame:
    """Each method's average rank over the independent settings (:func:`independent_settings`) in every table
    of :func:`seed_scores`: one column per table, methods from best to worst on the last (the mean's)."""
    blocks = independent_blocks(clients)
    ranked = pd.DataFrame({name: average_ranks(table) for name, table in blocks.items()})
    return ranked.sort_values(list(blocks)[-1], kind="stable").rename_axis("method")


def independent_blocks(clients: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every table of :func:`seed_scores` restricted to the independent settings (:func:`independent_settings`):
    what the average ranks over seeds are taken on."""
    return {name: table.loc[independent_settings(list(table.index))] for name, table in seed_scores(clients).items()}


def headline_comparisons(records: pd.DataFrame, variants: Sequence[str],
                         scoring: Scoring = Scoring(value="accuracy_own", column="variant"),
                         headlines: Mapping[str, str] = HEADLINES,
                         baselines: Sequence[str] = BASELINES) -> pd.DataFrame:
    """Each headline method (``headlines``: method → whose it is; by default each paper's, :data:`HEADLINES`)
    against every baseline (``baselines``, :data:`BASELINES`; the method itself aside) that ran, in every setting
    of ``records`` (per-client rows with ``variant``, ``setting``, ``seed``, ``client``,
    ``round`` and the score): the deciding baseline, the difference, its interval, the verdict of "beats
    every baseline" and the noise model (:func:`gflkit.papers.comparison.compare_with_best_other`)."""
    rows = []
    for method, paper in headlines.items():
        if method not in variants:
            continue
        others = [m for m in baselines if m in variants and m != method]
        for group, difference in best_other_per_group(records, "setting", method, others, scoring).items():
            setting, other = group.removeprefix("setting=").rsplit(" vs ", 1)
            rows.append({"paper": paper, "method": method, "setting": setting, "deciding baseline": other,
                         "difference": difference.estimate_text, "interval": difference.interval_text,
                         "verdict (beats every baseline)": difference.verdict.value, "noise model": difference.model})
    return pd.DataFrame(rows)


def own_protocol_records(records: pd.DataFrame) -> pd.DataFrame:
    """A grid's records (:func:`grids`, run with ``run_grid``) with both protocols' scores
    (:func:`gflkit.metrics.with_both_protocols`), ``method`` (the row label) and ``accuracy_own``: the score
    under the method's own paper's protocol (:data:`PROTOCOL`, an entrant's own; each run's ``evaluate``)."""
    records = metrics.with_both_protocols(records).assign(method=lambda r: r["variant"])
    protocol = records["evaluate"]
    records["accuracy_own"] = records["accuracy_server"].where(protocol == "server", records["accuracy_local"])
    return records


def client_scores(records: pd.DataFrame) -> pd.DataFrame:
    """The per-client rows (:data:`CLIENT_COLUMNS`) at each run's last round of :func:`own_protocol_records`,
    scores to :data:`SCORE_DECIMALS` decimals."""
    rows = metrics.reported_rows(records, ["variant", "setting", "seed"])[CLIENT_COLUMNS]
    return rows.round({column: SCORE_DECIMALS for column in SCORE_COLUMNS})


def stored_clients(profile: str, seeds: Sequence[int], runtime: Any, variants: Sequence[str] | None = None,
                   settings: Sequence[str] | None = None) -> pd.DataFrame:
    """:func:`client_scores` of the runs of ``profile``'s grid for ``seeds`` (optionally only ``variants``
    and ``settings``) that ``runtime``'s store holds (:func:`~gflkit.executors.stored_grid_records`: nothing is
    computed): the rows a later run appends to the committed ``clients.csv``.
    Raises ``ValueError`` when none is stored."""
    overrides = {key: list(chosen) for key, chosen in (("variants", variants), ("settings", settings)) if chosen}
    params = resolve_profile(PROFILES, profile, seeds=list(seeds), overrides=overrides)
    records = stored_grid_records(grids(params)["benchmark"], runtime, f"{profile} run of seeds {list(seeds)}")
    return client_scores(own_protocol_records(records))


def seed_table(clients: pd.DataFrame) -> pd.DataFrame:
    """Mean own-protocol accuracy over the clients, as mean ± standard deviation over seeds with their number
    (:func:`gflkit.metrics.mean_and_spread`): one row per method, one column per setting, from per-client rows
    (:data:`CLIENT_COLUMNS`)."""
    summary = metrics.final_summary(clients, value="accuracy_own", by=("variant", "setting"))
    summary["text"] = [metrics.mean_and_spread(row.mean, row.mean_std, row.num_seeds) for row in summary.itertuples()]
    table = summary.pivot(index="variant", columns="setting", values="text")
    return table.reindex(index=method_order(table.index), columns=[s for s in SETTINGS if s in table.columns]).fillna("—")


def folder_clients(folder: Any) -> pd.DataFrame:
    """One results folder's per-client rows: its ``clients.csv`` (what the notebook writes) and its per-seed
    files ``clients_seed<N>.csv`` (what :func:`append_to_folder` writes), each row once (a row two files hold
    must agree: :func:`gflkit.papers.append_seeds`). ``FileNotFoundError`` when it holds none."""
    files = sorted(Path(folder).glob(CLIENT_FILE_PATTERN), key=lambda path: (len(path.name), path.name))
    if not files:
        raise FileNotFoundError(f"{folder} lacks clients.csv (or {SEED_CLIENT_FILE.format(seed='<N>')}), which "
                                "the benchmark notebook writes and benchmark.append_to_folder extends")
    clients = pd.read_csv(files[0])
    for file in files[1:]:
        clients = append_seeds(clients, pd.read_csv(file), CLIENT_KEYS)
    return clients


def committed_clients(folders: Sequence[Any]) -> pd.DataFrame:
    """The committed per-client rows (:func:`folder_clients`) of ``folders``, in order: one folder, or a one-seed
    folder followed by the folders of its later seeds (each row once; :func:`gflkit.papers.append_seeds` checks
    that no two folders hold a row, or that they agree on it)."""
    if not folders:
        raise ValueError("committed_clients needs at least one results folder")
    frames = [folder_clients(folder) for folder in folders]
    clients = frames[0]
    for later in frames[1:]:
        clients = append_seeds(clients, later, CLIENT_KEYS)
    return clients


def exact_accuracy(clients: pd.DataFrame, column: str = "accuracy_own") -> pd.Series:
    r"""A client's accuracy as the exact fraction it is, :math:`100\,c / n` with :math:`c` correct answers of its
    :math:`n` = ``num_samples`` test samples, recovered from the :data:`SCORE_DECIMALS`-decimal score (the
    rounding moves :math:`c` by at most :math:`n / 2 \cdot 10^{-6}`, far below half a sample). Means of the
    rounded scores differ from the exact ones in the sixth decimal, which would break real ties (Local and
    LG-FedAvg at q = 2 have the same mean) when methods are ranked. ``ValueError`` when a score is not a count."""
    counts = clients[column] * clients["num_samples"] / 100
    if ((counts - counts.round()).abs() > 0.01).any():
        raise ValueError(f"{column} holds a score that is not a count of correct test samples over num_samples")
    return counts.round() * 100 / clients["num_samples"]


def seed_means(clients: pd.DataFrame) -> pd.DataFrame:
    """Each run's mean own-protocol accuracy over its clients (columns ``method``, ``setting``, ``seed``,
    ``mean``; :func:`exact_accuracy`) from per-client rows (:data:`CLIENT_COLUMNS`): what
    :func:`gflkit.plots.seed_means` draws, one dot per seed, and what :func:`seed_scores` ranks."""
    exact = clients.assign(accuracy_own=exact_accuracy(clients))
    means = exact.groupby(["variant", "setting", "seed"], as_index=False)["accuracy_own"].mean()
    return means.rename(columns={"variant": "method", "accuracy_own": "mean"})


def seed_rank_panels(clients: pd.DataFrame) -> dict[str, tuple[pd.Series, float]]:
    """For every table of :func:`seed_scores` (each seed's and their mean's), the methods' average ranks over
    the independent settings and Nemenyi's critical difference: what
    :func:`gflkit.plots.critical_difference_panels` draws, so the bars a rerun moves are seen."""
    return {f"{name}, independent settings": (average_ranks(table), nemenyi_critical_difference(*table.shape[::-1]))
            for name, table in independent_blocks(clients).items()}


def decide_from_clients(folder: Any, earlier: Sequence[Any] = ()) -> pd.DataFrame:
    """:func:`headline_comparisons` read from a results folder's committed ``clients.csv`` and those of the
    ``earlier`` folders its seeds continue (e.g. ``benchmark_paper`` holds seeds 1–2 of the runs whose seed 0
    ``benchmark_paper1`` holds): every seed, measured on machines whose result stores are gone."""
    clients = committed_clients([*earlier, folder])
    return headline_comparisons(clients, list(clients["variant"].unique()))


#: What :func:`append_to_folder` writes beside the per-client rows, each derived from the clients of the folder and
#: the earlier folders it continues.
DERIVED_FILES = {"seeds": "accuracy_own_protocol_seeds.csv", "headline": "headline_vs_best_baseline.csv",
                 "rank_readings": "rank_readings_seeds.csv", "average_ranks": "average_ranks_seeds.csv"}


def append_to_folder(folder: Any, later: pd.DataFrame, earlier: Sequence[Any] = ()) -> pd.DataFrame:
    """Later seeds' per-client rows (:func:`stored_clients`) appended to a results folder's rows
    (:func:`gflkit.papers.append_seeds`: a row both hold must agree; rows the ``earlier`` folders hold are
    checked against them and not written twice), and the tables derived from all of them rewritten
    (:data:`DERIVED_FILES`: :func:`seed_table`, :func:`decide_from_clients`, and where they are
    :func:`rankable`, :func:`seed_rank_readings` and :func:`seed_average_ranks`). The folder's rows are written one
    file per seed (:data:`SEED_CLIENT_FILE`); a ``clients.csv`` they replace is removed last, so a kill in
    between leaves rows that agree in two files, which :func:`folder_clients` reads once. Every table is
    computed before anything is written, and each file is replaced atomically
    (:func:`gflkit.atomic.atomic_write_text`). Returns the headline table."""
    folder = Path(folder)
    clients = append_seeds(committed_clients([*earlier, folder]), later, CLIENT_KEYS)
    if earlier:
        held = committed_clients(earlier).set_index(CLIENT_KEYS).index
        own = clients[~clients.set_index(CLIENT_KEYS).index.isin(held)]
    else:
        own = clients
    headline = headline_comparisons(clients, list(clients["variant"].unique()))
    tables = {SEED_CLIENT_FILE.format(seed=seed): rows.to_csv(index=False) for seed, rows in own.groupby("seed")}
    tables |= {DERIVED_FILES["seeds"]: seed_table(clients).to_csv(),
               DERIVED_FILES["headline"]: headline.to_csv(index=False)}
    if rankable(clients):
        tables |= {DERIVED_FILES["rank_readings"]: seed_rank_readings(clients).to_csv(index=False),
                   DERIVED_FILES["average_ranks"]: seed_average_ranks(clients).to_csv()}
    for name, text in tables.items():
        atomic_write_text(folder / name, text)
    (folder / "clients.csv").unlink(missing_ok=True)
    return headline


#: How each method's round is timed for ``cost.csv`` (:func:`measure_cost`): rounds per timing, interleaved passes.
TIMING_ROUNDS, TIMING_PASSES = 2, 3


def methods_table(params: Profile) -> pd.DataFrame:
    """One row per method of ``params``' sweep (index ``method``): its family, gflkit method, the options it runs
    with beyond its defaults (:data:`METHODS` completed with the profile's), the paper its setting comes from
    (:data:`SOURCE`) and its own protocol (:data:`PROTOCOL`)."""
    family_of = {m: family for family, members in FAMILIES.items() for m in members}
    rows = [{"method": label, "family": family_of[label], "gflkit method": METHODS[label][0],
             "options beyond the defaults": {**METHODS[label][1],
                                             **params.method_options.get(METHODS[label][0], {})} or "—",
             "setting from": SOURCE[label], "own protocol": PROTOCOL[label]}
            for label in params.sweep["variants"]]
    return pd.DataFrame(rows).set_index("method")


def accuracy_table(records: pd.DataFrame, value: str, params: Profile, column: str = "mean") -> pd.DataFrame:
    """Methods × settings (in ``params``' sweep order, any entrant after) of one statistic (``column`` of
    :func:`gflkit.metrics.final_summary`: ``mean``, ``worst5``, …) of ``value`` at the last round."""
    summary = metrics.final_summary(records, value=value, by=("method", "setting"))
    table = summary.pivot(index="method", columns="setting", values=column)
    return table.reindex(index=method_order(table.index, params.sweep["variants"]),
                         columns=list(params.sweep["settings"]))


def rank_tables(own: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The rank files, by file name, of a methods × settings table of own-protocol means (:func:`accuracy_table`):

    * ``ranks.csv``: each method's rank in each setting (one row per setting, first column ``setting``);
    * ``average_ranks.csv``: each method's average rank over the independent settings
      (:func:`independent_settings`) and over every setting, best first (first column ``method``);
    * ``rank_readings.csv`` (with at least two independent settings and three methods): :func:`rank_readings`.
    """
    scores = own.T  # settings × methods
    blocks = independent_settings(list(scores.index))  # a perturbed twin of another setting is shown, not counted
    mean_ranks = average_ranks(scores.loc[blocks])
    summary = pd.concat({"average rank": mean_ranks,
                         "average rank, twins counted too": average_ranks(scores)}, axis=1).loc[mean_ranks.index]
    tables = {"ranks.csv": ranks(scores).reset_index(), "average_ranks.csv": summary.reset_index()}
    if len(blocks) >= 2 and len(mean_ranks) >= 3:
        tables["rank_readings.csv"] = rank_readings(scores)
    return tables


def measure_cost(params: Profile, runtime: Runtime) -> pd.DataFrame:
    """What one round of each timed method (the sweep's ``timing_methods`` and FedAvg) costs in the sweep's first
    setting, index ``method``: the MB each participating client sends up and receives (float32,
    :func:`gflkit.algorithms.method_communication`) and the seconds of its local training and aggregation
    (:func:`gflkit.timing.time_interleaved`: :data:`TIMING_PASSES` interleaved passes of :data:`TIMING_ROUNDS`
    rounds, the median over the passes)."""
    setting = params.sweep["settings"][0]
    labels = [m for m in params.sweep["variants"] if m in params.sweep["timing_methods"] or m == "fedavg"]
    configs = [method_config(params, label, setting, params.seeds[0]) for label in labels]
    seconds = time_interleaved(configs, runtime, rounds=TIMING_ROUNDS, passes=TIMING_PASSES)
    rows = []
    for label, config, timed in zip(labels, configs, seconds):
        sent = method_communication(build_federation(config, runtime.replace(device="cpu")), config.method,
                                    **config.method_options)
        rows.append({"method": label, "MB up / client / round": sent.bytes_up / 1e6,
                     "MB down / client / round": sent.bytes_down / 1e6, **timed})
    return pd.DataFrame(rows).set_index("method")


def cost_table(measured: pd.DataFrame) -> pd.DataFrame:
    """:func:`measure_cost`'s table with each method's round time and server (aggregation) time as ratios to
    FedAvg's, and the server's share of the round (%)."""
    cost = measured.copy()
    reference = cost.loc["fedavg"]
    round_time = cost["training_s"] + cost["aggregation_s"]
    cost["round time vs FedAvg"] = round_time / (reference["training_s"] + reference["aggregation_s"])
    cost["server time vs FedAvg"] = cost["aggregation_s"] / reference["aggregation_s"]
    cost["server share of the round (%)"] = 100 * cost["aggregation_s"] / round_time
    return cost


def pareto_table(own: pd.DataFrame, cost: pd.DataFrame) -> pd.DataFrame:
    """Each timed method's mean own-protocol accuracy over the settings against its round time relative to FedAvg
    (:func:`cost_table`), cheapest first (index ``method``), and ``on_front``: whether it is on the Pareto front
    (no cheaper method is more accurate)."""
    pareto = pd.DataFrame({"accuracy": own.mean(axis=1), "round time vs FedAvg": cost["round time vs FedAvg"]}).dropna()
    pareto = pareto.sort_values("round time vs FedAvg")
    return pareto.assign(on_front=pareto["accuracy"] >= pareto["accuracy"].cummax())


def derive(records: pd.DataFrame, params: Profile, measured: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every table the benchmark notebook publishes, by file name, from its grid's records
    (:func:`own_protocol_records`), its profile and the measured cost of a round (:func:`measure_cost`); a table
    shown with an index (methods or settings) has it as its first column:

    * ``methods.csv``: the methods, their options, the paper of their setting and their own protocol
      (:func:`methods_table`);
    * ``records.csv``: the records themselves (round logs);
    * ``clients.csv``: the per-seed, per-client scores at the last round (:func:`client_scores`), what later
      seeds are appended to and decided from (:func:`decide_from_clients`);
    * ``accuracy_own_protocol.csv``, ``worst5_own_protocol.csv``: mean and worst-5 % client accuracy, methods ×
      settings, each method under its own paper's protocol (:func:`accuracy_table`);
    * ``accuracy_server_protocol.csv``: the mean with every method scored under ``server``;
    * ``ranks.csv``, ``average_ranks.csv`` and, where Friedman's test reads the table, ``rank_readings.csv``
      (:func:`rank_tables`);
    * ``headline_vs_best_baseline.csv``: each paper's headline method against every baseline
      (:func:`headline_comparisons`);
    * ``cost.csv``: MB per client and round, seconds and their ratios to FedAvg (:func:`cost_table`; wall-clock
      times of this machine);
    * ``pareto.csv``: accuracy against round time and the Pareto front (:func:`pareto_table`).
    """
    own = accuracy_table(records, "accuracy_own", params)
    cost = cost_table(measured)
    return {
        "methods.csv": methods_table(params).reset_index(),
        "records.csv": records,
        "clients.csv": client_scores(records),
        "accuracy_own_protocol.csv": own.reset_index(),
        "worst5_own_protocol.csv": accuracy_table(records, "accuracy_own", params, "worst5").reset_index(),
        "accuracy_server_protocol.csv": accuracy_table(records, "accuracy_server", params).reset_index(),
        **rank_tables(own),
        "headline_vs_best_baseline.csv": headline_comparisons(records, list(params.sweep["variants"])),
        "cost.csv": cost.reset_index(),
        "pareto.csv": pareto_table(own, cost).reset_index(),
    }
