"""Profiles, method variants and grids of the SFL notebook (Tables 2–5, Figures 3 and 5, the appendix ablations).

Paper settings (Sec. 5, NOTES.md): MNIST split into 100 clients of 2 label shards each (McMahan et al.'s
pathological non-IID), McMahan CNN, SGD lr 0.001, batch 128, 20 rounds; Table 2 on the traffic readings
(METR-LA, PEMS-BAY, PEMS-D4, PEMS-D8; a pure RNN, hidden 64), CIFAR-10 / 100 rows with ResNet-18.
The paper gives no number of local epochs: the authors' code trains 20 (``--client_epochs 20``), which
the ``paper`` profile follows.

**Evaluation protocol**: the authors' ``main.py`` scores client ``c`` with ``personalized_model[c]`` on
its own test batches after aggregation — the model the server holds for it (``"server"``): the global
model for FedAvg and FedAtt, the graph-aggregated :math:`u_k` for SFL and SFL*. FedPer and LG-FedAvg keep
part of the model on the client, so their "server" model is the client's own (global shared part, own
personal part). Every table says which protocol ran.

**Test split**: the authors' code gives each client test samples from the official MNIST test set with
the client's own label proportions; here every client's shards are split 80 / 20 into train and test
(the same label distribution; :class:`~gflkit.experiment.RunConfig` ``pool="all"``, as FedSKA's notebook).

Variants (:data:`VARIANTS`): SFL* is SFL with ``graph="learned"``, by default mixed as the authors'
``graph_v3`` (the row the paper reports: their README runs ``--agg graph_v3``); ``sfl_star_v2`` is
their ``graph_v2`` (the learned graph alone, Algorithm 1's literal reading) and ``sfl_star_cross`` our
earlier cross-round smoothing. SFL+LG and SFL+Per are SFL with ``share="head"`` / ``share="encoder"``
(Table 4: the structured aggregation on the federated part only).

**Two readings of the local step** (:data:`READINGS`, :mod:`gflkit.algorithms.sfl`): the paper's
(``start="personal"``, the pulls in the gradient; every table's default) and the authors' code's
(``start="global"``, the pulls detached, i.e. plain local SGD from the global model). The
``graph_mixing`` section runs SFL and the three SFL* mixings under both.

**What the notebook publishes**: each section's tables by file name (:func:`table3_tables`, :func:`table4_tables`,
:func:`timing_tables`, :func:`mixing_tables`, :func:`ablation_tables`, :func:`table2_tables`) and the claims decided
on them (:func:`derive`, whose docstring lists every file), written by :func:`gflkit.outputs.write_outputs`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from gflkit import metrics
from gflkit.atomic import atomic_write_text
from gflkit.experiment import Run
from gflkit.papers import (Claim, Verdict, append_seeds, check_claim, claims_table, committed_csvs, paper_vs_measured,
                           reported, standing)
from gflkit.papers.comparison import (best_other, compare_shared, compare_with_best_other, every, on_shared_seeds,
                                      uneven_seeds)
from gflkit.profiles import Profile, chosen_sections, known_names
from gflkit.runtime import Runtime

#: Table label → (method, method options).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "fedavg": ("fedavg", {}),
    "fedatt": ("fedatt", {}),
    "fedper": ("fedper", {}),
    "lg_fedavg": ("lg_fedavg", {}),
    "sfl": ("sfl", {}),
    "sfl_star": ("sfl", {"graph": "learned"}),
    "sfl_star_v2": ("sfl", {"graph": "learned", "smoothing": "none"}),
    "sfl_star_cross": ("sfl", {"graph": "learned", "smoothing": "previous"}),
    "sfl_lg": ("sfl", {"share": "head"}),
    "sfl_per": ("sfl", {"share": "encoder"}),
}
LABELS = {"fedavg": "FedAvg", "fedatt": "FedAtt", "fedper": "FedPer", "lg_fedavg": "LG-FedAvg", "sfl": "SFL",
          "sfl_star": "SFL*", "sfl_star_v2": "SFL* (graph_v2)", "sfl_star_cross": "SFL* (across rounds)",
          "sfl_lg": "SFL+LG", "sfl_per": "SFL+Per"}
#: The local step's readings — SFL option values of the paper's text and of the authors' code.
READINGS: dict[str, dict[str, str]] = {
    "paper": {"start": "personal", "regulariser": "gradient"},
    "authors_code": {"start": "global", "regulariser": "detached"},
}
#: The ``graph_mixing`` section's rows — the given graph and SFL*'s three ways of mixing the learned one.
MIXINGS = ("sfl", "sfl_star", "sfl_star_v2", "sfl_star_cross")
TABLE3 = ("fedavg", "fedatt", "fedper", "lg_fedavg", "sfl", "sfl_star")
TABLE4 = ("fedavg", "fedatt", "sfl", "sfl_lg", "sfl_per")
TABLE2 = ("fedavg", "fedatt", "sfl", "sfl_star")
SECTIONS = ("table2", "table3", "table4", "graph_mixing", "learn_steps", "frequency", "local_epochs")
#: The traffic datasets of Table 2 (readings absent offline; the notebook draws their sensor graphs).
TRAFFIC = ("metr_la", "pems_bay", "pemsd4", "pemsd8")
#: Table 2's setting on a traffic dataset — one client per sensor, the "pure RNN" (hidden 64), the paper's
#: SGD lr 0.001 and batch 128; SFL aggregates over the sensor graph, SFL* learns one (its ``"given"``
#: smoothing would mix in the sensor graph, as the code's ``graph_v3``).
TRAFFIC_BASE = dict(model="rnn", task="forecasting", partition="natural", partition_options={}, test_ratio=None)
TRAFFIC_METHOD_OPTIONS = {"sfl": {"graph": "dataset"}, "sfl_star": {}}

BASE = dict(dataset="mnist", num_clients=100, model="mcmahan_cnn", partition="shards",
            partition_options={"shards_per_client": 2}, batch_size=128, lr=0.001, momentum=0.0,
            rounds=20, local_epochs=20, evaluate="server")


def authors_schedule(epochs: int) -> list[list[float]]:
    """The SFL authors' per-round learning-rate schedule over ``epochs`` local epochs (``federated.py``:
    ``PiecewiseLinear([0, 5, E], [0, 0.4, 0.001])``), restarted every round. Below 20 epochs the warm-up
    knot moves to ``E / 4`` (ours: their knots need E > 5), so ``authors_schedule(20)`` is theirs."""
    return [[0.0, 0.0], [min(5.0, epochs / 4), 0.4], [float(epochs), 0.001]]


#: The SFL authors' MNIST training (their code, not the paper's text; ``BResidual.py``, ``federated.py``,
#: ``data_util.py``): the ResNet-9-style network with BatchNorm, SGD with Nesterov momentum 0.9 and weight
#: decay 5e-4 under :func:`authors_schedule`, batch 128, raw 0–255 pixels, clients' training shards from the
#: official training set and test samples drawn from the official test set with each client's label mix
#: (100 per client at K = 100), and their local step (:data:`READINGS` ``"authors_code"``). Not reproduced:
#: their ``drop_last`` (a client's last partial batch is trained on here) and their random redraw of each
#: shard's samples from all images of its label.
AUTHORS_CODE_BASE = dict(BASE, model="resnet9", pool="train", test_ratio=None, test_split="matched",
                         data_options={"normalize": False, "raw": True}, momentum=0.9, nesterov=True,
                         weight_decay=5e-4, lr=0.4, lr_schedule=authors_schedule(20))
#: What the ``authors_code`` profiles run — Table 3's FedAvg, SFL and SFL* and the graph mixings, no ablations.
AUTHORS_CODE_SWEEP = {"traffic": (), "table3": ("fedavg", "sfl", "sfl_star"), "table4": (), "readings": ("authors_code",),
                      "timing_layers": (), "learn_steps": (), "frequency": (), "local_epoch_counts": ()}

PROFILES = {
    # scikit-learn's embedded digits (8 × 8), 20 clients, MCLR, 4 rounds: the whole notebook in about a minute.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="digits", num_clients=20, model="mclr", batch_size=16, lr=0.05, rounds=4,
                  local_epochs=1),
        sweep={"traffic": (), "table3": TABLE3, "table4": TABLE4, "readings": tuple(READINGS),
               "timing_layers": (2, 3, 5), "learn_steps": (0, 10),
               "frequency": ((2, 2), (4, 1)), "local_epoch_counts": (1, 2)},
    ),
    # Real MNIST (6,000 pooled samples), 10 clients of 2 shards, the paper's CNN and batch size, 10 rounds of
    # one local epoch at lr 0.01 (the paper's 0.001 barely moves a CNN in this budget): 9 minutes on 2 cores.
    "ci": Profile(
        "ci",
        base=dict(BASE, num_clients=10, max_samples=6_000, rounds=10, local_epochs=1, lr=0.01),
        sweep={"traffic": (), "table3": TABLE3, "table4": TABLE4, "readings": tuple(READINGS),
               "timing_layers": (2, 3, 5), "learn_steps": (0, 10, 50),
               "frequency": ((5, 2), (10, 1)), "local_epoch_counts": (1, 2)},
    ),
    # The authors' code's MNIST training (AUTHORS_CODE_BASE) at the paper's budget: for a GPU (a ResNet-9
    # step on 128 images takes seconds on one CPU core).
    "authors_code": Profile("authors_code", base=AUTHORS_CODE_BASE, method_options={"sfl": READINGS["authors_code"]},
                            sweep=AUTHORS_CODE_SWEEP),
    # The same at a CPU-minutes scale: 10 clients of 60 training images (one batch), 4 local epochs under the
    # schedule compressed to 4 epochs, 2 rounds, 50 matched test images per client.
    "authors_code_ci": Profile(
        "authors_code_ci",
        base=dict(AUTHORS_CODE_BASE, num_clients=10, max_samples=600, rounds=2, local_epochs=4,
                  lr_schedule=authors_schedule(4), partition_options={"shards_per_client": 2, "test_per_client": 50}),
        method_options={"sfl": READINGS["authors_code"]}, sweep=AUTHORS_CODE_SWEEP),
    # The paper's setting (one seed: the paper reports one number per cell).
    "paper": Profile(
        "paper",
        base=BASE,
        sweep={"traffic": TRAFFIC, "table3": TABLE3, "table4": TABLE4, "readings": tuple(READINGS),
               "timing_layers": (2, 3, 5),
               "learn_steps": (0, 5, 10, 20, 50),
               "frequency": ((10, 40), (20, 20), (40, 10)), "local_epoch_counts": (5, 10, 20, 40)},
    ),
}


def _check_labels(labels: Iterable[str], entry: str, known: Iterable[str] = VARIANTS, what: str = "variant") -> list[str]:
    return known_names(labels, sorted(known), what, f" in sweep entry {entry!r}")


def variant_config(params: Any, label: str, seed: int, **changes: Any):
    """The profile's run of table variant ``label`` (:data:`VARIANTS`) with ``seed`` and field ``changes``."""
    method, options = VARIANTS[_check_labels([label], "variant")[0]]
    merged = {**options, **changes.pop("method_options", {})}
    return params.config(method=method, method_options=merged, seed=seed, **changes)


def reading_of(config: Any) -> str:
    """The local-step reading (:data:`READINGS`) of an SFL run, ``"custom"`` for another mix, ``"—"`` for
    the other methods (their local step has one reading)."""
    if config.method != "sfl":
        return "—"
    options = config.method_options
    return next((name for name, values in READINGS.items()
                 if all(options.get(key) == value for key, value in values.items())), "custom")


def labelled(config: Any, label: str) -> Run:
    """``config`` of table variant ``label`` as a :class:`~gflkit.experiment.Run` labelled with its ``variant``,
    its local step's ``reading`` (:func:`reading_of`) and its ``dataset``."""
    return Run(config, {"variant": label, "reading": reading_of(config), "dataset": config.dataset})


def ablation_run(params: Any, label: str, seed: int, **changes: Any) -> Run:
    """An appendix ablation's run (:func:`variant_config`), labelled with the three values the ablations vary:
    SFL*'s ``learn_steps``, ``rounds`` and ``local_epochs``."""
    config = variant_config(params, label, seed, **changes)
    return Run(config, {"learn_steps": config.method_options.get("learn_steps"), "rounds": config.rounds,
                        "local_epochs": config.local_epochs})


def traffic_config(params: Any, label: str, dataset: str, seed: int):
    """Table 2's run of variant ``label`` on traffic ``dataset`` (:data:`TRAFFIC_BASE`; SFL over the sensor graph)."""
    options = dict(TRAFFIC_METHOD_OPTIONS.get(label, {}))
    if label == "sfl_star":
        options["graph"] = "learned"
    return variant_config(params, label, seed, dataset=dataset, method_options=options, **TRAFFIC_BASE)


def traffic_present(names: Iterable[str], data_root: str | Path | None = None) -> list[str]:
    """The traffic datasets among ``names`` whose readings are present and verified under ``data_root``."""
    from gflkit.data import dataset_available

    return [name for name in names if dataset_available(name, data_root, group="readings")[0]]


def grids(params: Any, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The runs of each notebook section (``gflkit precompute sfl``): Table 2 on the traffic datasets
    of the profile whose readings are present under ``runtime``'s data root (the default one without a runtime), Tables 3 and 4 and the three appendix
    ablations (SFL*'s structure-learning steps; communication frequency at a fixed total of local epochs;
    local epochs between communications) on MNIST, and SFL / SFL*'s mixings under both local-step readings
    (``graph_mixing``)."""
    chosen = chosen_sections(sections, SECTIONS)
    sweep, seeds = params.sweep, params.seeds
    data_root = runtime.data_root if runtime is not None else None
    makers = {
        "table2": lambda: [labelled(traffic_config(params, v, name, s), v)
                           for name in traffic_present(sweep["traffic"], data_root) for s in seeds for v in TABLE2],
        "table3": lambda: [labelled(variant_config(params, v, s), v) for s in seeds
                           for v in _check_labels(sweep["table3"], "table3")],
        "table4": lambda: [labelled(variant_config(params, v, s), v) for s in seeds
                           for v in _check_labels(sweep["table4"], "table4")],
        "graph_mixing": lambda: [labelled(variant_config(params, v, s, method_options=READINGS[r]), v) for s in seeds
                                 for r in _check_labels(sweep["readings"], "readings", READINGS, "reading") for v in MIXINGS],
        "learn_steps": lambda: [ablation_run(params, "sfl_star", s, method_options={"learn_steps": n})
                                for s in seeds for n in sweep["learn_steps"]],
        "frequency": lambda: [ablation_run(params, "sfl", s, rounds=r, local_epochs=e)
                              for s in seeds for r, e in sweep["frequency"]],
        "local_epochs": lambda: [ablation_run(params, "sfl", s, local_epochs=e)
                                 for s in seeds for e in sweep["local_epoch_counts"]],
    }
    return {section: makers[section]() for section in chosen}


#: Table 5's claim is about SFL at the authors' default of 3 propagation hops (their ``--layers 3``).
TIMING_HOPS = 3
#: The columns of the per-client CSVs the notebook writes (``table3_clients.csv``, ``table4_clients.csv``;
#: ``graph_mixing_clients.csv`` adds ``reading``).
CLIENT_COLUMNS = ["method", "seed", "evaluate", "variant", "dataset", "client", "round", "accuracy", "num_samples"]


def mnist_vs_paper(records: pd.DataFrame, table: str, variants: Sequence[str]) -> pd.DataFrame:
    """Table 3 or 4's (``table``) MNIST rows beside the paper's, one per variant of ``variants`` that ran, indexed
    by its :data:`LABELS` name: ``metric``, ``measured`` (the mean client accuracy at each run's last round,
    averaged over seeds), ``measured_std`` (its standard deviation over seeds, NaN for one), ``seeds``, ``paper``
    and ``difference``. ``records``: per-client rows of any seeds (the notebook's, or ``table3_clients.csv``)."""
    summary = metrics.final_summary(records, value="accuracy", by=("method",))
    measured = metrics.long_summary(summary, ["method"], ["mean"]).assign(metric="accuracy")
    paper = reported("sfl", table).query("dataset == 'mnist'")
    versus = paper_vs_measured(measured, paper, on=["method", "metric"]).set_index("method")
    versus = versus.reindex([v for v in variants if v in versus.index])
    versus.index = [LABELS[v] for v in versus.index]
    return versus


def claims(table3: pd.DataFrame, table4: pd.DataFrame, mixing: pd.DataFrame, timing: pd.DataFrame, profile: str,
           table3_methods: Sequence[str] = TABLE3) -> list[Claim]:
    """SFL's claims, decided by per-client scores at each run's last round.

    ``table3`` / ``table4``: rows with ``method`` (the table variant of :data:`VARIANTS`), ``seed``, ``client``,
    ``round``, ``accuracy`` — every round (the notebook's records) or the last one only (the committed
    ``table3_clients.csv``), any number of seeds; ``table4`` may be empty (a profile without Table 4).
    ``mixing``: the ``graph_mixing`` rows, with ``reading`` (:data:`READINGS`). ``timing``: Table 5's rows
    (``method``, ``layers``, and the smallest and largest share of aggregation in a timed round,
    ``aggregation_share_min_%`` / ``aggregation_share_max_%``), empty when nothing was timed: the claim is
    reproduced when every timed round is under 5 %, not reproduced when none is, inconclusive otherwise.
    ``table3_methods``: the profile's Table 3 variants, every one of which "SFL* is the best" needs (an override
    that ran a subset leaves it "not run").
    """
    ran3, ran4 = (list(dict.fromkeys(records["method"])) for records in (table3, table4))
    code_step = mixing[mixing["reading"] == "authors_code"] if len(mixing) else mixing
    mixing_ran = [f"{m} under the {r} reading" for m, r in dict.fromkeys(zip(mixing["method"], mixing["reading"]))]
    sfl_timing = timing[(timing["method"] == "sfl") & (timing["layers"] == TIMING_HOPS)]

    def final_means(records: pd.DataFrame) -> pd.Series:
        return metrics.final_summary(records, value="accuracy", by=("method",)).set_index("method")["mean"]

    def means(records: pd.DataFrame, *methods: str) -> str:
        accuracy = final_means(records)
        return ", ".join(f"{LABELS[m]} {accuracy[m]:.2f}" for m in methods)

    def beats(records: pd.DataFrame, better: str, worse: str) -> tuple[Any, str]:
        shared = on_shared_seeds(records, [better, worse])  # a later seed may hold only some variants
        return compare_shared(records, better, worse), means(shared, better, worse)

    def sfl_star_is_best() -> tuple[Any, str]:
        # each candidate against SFL* on the seeds the two ran (compare_with_best_other)
        rows = table3[table3["method"].isin(list(table3_methods))]
        other, difference = compare_with_best_other(rows, "sfl_star")
        accuracy, uneven = final_means(rows), uneven_seeds(rows)
        best = best_other(accuracy, "sfl_star")
        # the interval is SFL* against the candidate compared over the most seeds among those that decide
        candidate, _, undecided = other.partition("; undecided: ")  # candidates that lack seeds are named apart
        deciding = "" if candidate in best else f"; the interval is SFL* vs {LABELS.get(candidate, candidate)}"
        if undecided:
            deciding += "; undecided for want of seeds: " + ", ".join(LABELS[m] for m in undecided.split(", "))
        return difference, (f"SFL* {standing(accuracy, 'sfl_star')}; best other: {means(rows, *best)}"
                            + (f" (means over each method's seeds; {uneven})" if uneven else "") + deciding)

    def fedatt_below_fedavg() -> tuple[Any, str]:
        shared = on_shared_seeds(table3, ["fedatt", "fedavg"])
        return compare_shared(table3, "fedavg", "fedatt"), means(shared, "fedatt", "fedavg")

    def both_beat_sfl() -> tuple[Any, str]:
        shared = on_shared_seeds(table4, ["sfl", "sfl_lg", "sfl_per"])
        return (every({"SFL+LG": compare_shared(table4, "sfl_lg", "sfl"),
                       "SFL+Per": compare_shared(table4, "sfl_per", "sfl")}),
                means(shared, "sfl_lg", "sfl_per", "sfl"))

    def code_step_star_beats_sfl() -> tuple[Any, str]:
        return beats(code_step, "sfl_star", "sfl")

    def small_aggregation() -> tuple[Any, str]:
        # every timed round under 5 %: reproduced; every one at or above: not; rounds on both sides: the machine's
        # noise decides, so inconclusive
        low, high = (float(sfl_timing[f"aggregation_share_{end}_%"].iloc[0]) for end in ("min", "max"))
        outcome = True if high < 5.0 else False if low >= 5.0 else Verdict.INCONCLUSIVE
        return outcome, (f"aggregation {low:.2f}–{high:.2f} % of a round over the timed rounds, one local epoch at "
                         f"{TIMING_HOPS} hops")

    return [
        check_claim("sfl_beats_fedavg", "SFL beats FedAvg on MNIST (Table 3)", ["sfl", "fedavg"], ran3,
                    lambda: beats(table3, "sfl", "fedavg"), profile),
        check_claim("sfl_star_beats_sfl",
                    "SFL* (learned graph) beats SFL (given graph) on MNIST (Table 3)", ["sfl", "sfl_star"], ran3,
                    lambda: beats(table3, "sfl_star", "sfl"), profile),
        check_claim("sfl_star_beats_sfl_authors_step",
                    "SFL* beats SFL under the authors' code's local step (start from the global model, detached pulls)",
                    [f"{m} under the authors_code reading" for m in ("sfl", "sfl_star")], mixing_ran,
                    code_step_star_beats_sfl, profile),
        check_claim("sfl_star_best",
                    "SFL* has the best accuracy of Table 3's methods on MNIST", list(table3_methods), ran3,
                    sfl_star_is_best, profile),
        check_claim("fedatt_below_fedavg",
                    "FedAtt is below FedAvg under the pathological non-IID split (Table 3)", ["fedatt", "fedavg"], ran3,
                    fedatt_below_fedavg, profile),
        check_claim("lg_per_beat_sfl", "SFL+LG and SFL+Per both beat SFL (Table 4)", ["sfl", "sfl_lg", "sfl_per"], ran4,
                    both_beat_sfl, profile),
        check_claim("aggregation_small",
                    f"SFL's aggregation is a small part of a round (Table 5, {TIMING_HOPS} hops: under 5 % of the "
                    "round's time; the paper's is 3.9 %)", ["sfl"], ran3 if len(sfl_timing) else [],
                    small_aggregation, profile),
    ]


#: The CSVs of a results folder that :func:`decide_from_clients` reads: Table 3's is required, the others optional.
CLAIM_FILES = {"table3": "table3_clients.csv", "table4": "table4_clients.csv", "mixing": "graph_mixing_clients.csv",
               "timing": "table5_timing.csv"}


def decide_from_clients(folder: str | Path, profile: str, table3_methods: Sequence[str] = TABLE3) -> pd.DataFrame:
    """The claims table of :func:`claims` read from a folder's committed CSVs: ``table3_clients.csv`` and, where
    present, ``table4_clients.csv``, ``graph_mixing_clients.csv`` and ``table5_timing.csv`` (a missing one
    leaves its claims "not run")."""
    return decide(committed_csvs(folder, CLAIM_FILES, ["table3"], "sfl"), profile, table3_methods)


def decide(frames: Mapping[str, pd.DataFrame | None], profile: str,
           table3_methods: Sequence[str] = TABLE3) -> pd.DataFrame:
    """The claims table of :func:`claims` decided on the frames a results folder publishes, named as
    :data:`CLAIM_FILES` (None or absent for a missing optional one, whose claims are then "not run") — what the
    notebook writes, and what :func:`decide_from_clients` reads back."""
    frames = {name: frames.get(name) for name in CLAIM_FILES}
    empty = {"table4": CLIENT_COLUMNS, "mixing": [*CLIENT_COLUMNS, "reading"],
             "timing": ["method", "layers", "aggregation_share_min_%", "aggregation_share_max_%"]}
    table4, mixing, timing = (pd.DataFrame(columns=columns) if frames[name] is None else frames[name]
                              for name, columns in empty.items())
    return claims_table(claims(frames["table3"], table4, mixing, timing, profile, table3_methods))


#: What identifies a row of ``table3_clients.csv`` / ``table4_clients.csv``.
CLIENT_KEYS = ["method", "seed", "client"]


def append_to_folder(folder: str | Path, records: pd.DataFrame, profile: str,
                     tables: dict[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Later runs' records of Tables 3 / 4 (every round, labelled as :func:`grids` labels them: ``variant``,
    ``dataset``) appended to a results folder's committed per-client CSVs (:data:`CLAIM_FILES`): each run's
    last-round rows go to every table whose variants hold it (``tables``: table → variants, default
    :data:`TABLE3` and :data:`TABLE4`), through :func:`gflkit.papers.append_seeds` (a row both hold must
    agree). The paper-vs-measured tables (:func:`mnist_vs_paper`) and the claims (:func:`decide_from_clients`)
    are then rewritten from the merged rows. Everything is computed before anything is written; each file is
    replaced atomically.
    Returns the claims table."""
    folder = Path(folder)
    tables = tables or {"table3": TABLE3, "table4": TABLE4}
    later = metrics.reported_rows(records, ["variant", "seed"])[CLIENT_COLUMNS]
    frames = committed_csvs(folder, CLAIM_FILES, list(tables), "sfl")
    files = {}
    for table, variants in tables.items():
        frames[table] = append_seeds(frames[table], later[later["method"].isin(list(variants))], CLIENT_KEYS)
        files[CLAIM_FILES[table]] = frames[table].to_csv(index=False)
        files[f"{table}_paper_vs_measured.csv"] = mnist_vs_paper(frames[table], table, variants).to_csv()
    verdicts = decide(frames, profile)
    files["claims.csv"] = verdicts.to_csv(index=False)
    for name, text in files.items():
        atomic_write_text(folder / name, text)
    return verdicts


def index_column(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its (unnamed) index as a first column with an empty name: written without the index, it is
    the CSV ``frame.to_csv()`` writes with it (the row labels under an empty header)."""
    return frame.reset_index(names="")


def by_label(frame: pd.DataFrame) -> pd.DataFrame:
    """A table of :func:`index_column` (or read back from its CSV) with its first, unnamed column as the index
    again: the rows named by their labels, as the notebook shows them."""
    return frame.set_index("").rename_axis(None)


def client_rows(records: pd.DataFrame, by: Sequence[str] = ("variant", "seed"),
                columns: Sequence[str] = CLIENT_COLUMNS) -> pd.DataFrame:
    """Each client's ``columns`` at the last round of each run of ``records`` (a run: one value of ``by``) — the
    per-seed, per-client scores the claims are decided on (:data:`CLAIM_FILES`)."""
    return metrics.reported_rows(records, list(by))[list(columns)]


def table3_tables(records: pd.DataFrame, variants: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Table 3's files from its runs' ``records`` (every client and round, ``method`` the variant), rows ordered
    as ``variants`` (the sweep's ``table3``): ``table3_records.csv`` (the records), ``table3_clients.csv``
    (:func:`client_rows`) and ``table3_paper_vs_measured.csv`` (:func:`mnist_vs_paper`, the labels first)."""
    return {"table3_records.csv": records, CLAIM_FILES["table3"]: client_rows(records),
            "table3_paper_vs_measured.csv": index_column(mnist_vs_paper(records, "table3", variants))}


def table4_tables(records: pd.DataFrame, variants: Sequence[str]) -> dict[str, pd.DataFrame]:
    """Table 4's files from its runs' ``records``: ``table4_clients.csv`` (:func:`client_rows`) and
    ``table4_paper_vs_measured.csv`` (:func:`mnist_vs_paper`, rows ordered as ``variants``, the labels first)."""
    return {CLAIM_FILES["table4"]: client_rows(records),
            "table4_paper_vs_measured.csv": index_column(mnist_vs_paper(records, "table4", variants))}


def timing_tables(timed: Sequence[tuple[str, int | None, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """Table 5's file ``table5_timing.csv`` from the timed rounds of each run, ``(label, hops, rounds)`` with
    ``rounds`` one row per round (``training_s``, ``aggregation_s``; :func:`gflkit.timing.time_each_round`),
    FedAvg's among them: one row per run with its ``method``, ``layers`` (hops), median seconds, the smallest
    and largest share of aggregation in a round (``aggregation_share_min_%`` / ``_max_%``), the times as ratios
    to FedAvg's and the share of the median times (``aggregation_share_%``)."""
    rows = []
    for label, layers, rounds in timed:
        shares = 100 * rounds["aggregation_s"] / (rounds["training_s"] + rounds["aggregation_s"])
        rows.append({"method": label, "layers": layers, **rounds.median().to_dict(),
                     "aggregation_share_min_%": shares.min(), "aggregation_share_max_%": shares.max()})
    timing = pd.DataFrame(rows)
    fedavg_time = timing.set_index("method").loc["fedavg"]
    timing["training_vs_fedavg"] = timing["training_s"] / fedavg_time["training_s"]
    timing["aggregation_vs_fedavg"] = timing["aggregation_s"] / fedavg_time["aggregation_s"]
    timing["aggregation_share_%"] = 100 * timing["aggregation_s"] / (timing["training_s"] + timing["aggregation_s"])
    return {CLAIM_FILES["timing"]: timing}


def mixing_tables(records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The ``graph_mixing`` section's files from its runs' ``records`` (with ``reading``):
    ``graph_mixing_records.csv`` (the records), ``graph_mixing_clients.csv`` (:func:`client_rows` with the
    ``reading``) and ``graph_mixing.csv`` (the mean client accuracy, one row per variant of :data:`MIXINGS`
    that ran, first column its :data:`LABELS` name, one column per reading of :data:`READINGS`)."""
    clients = client_rows(records, ("variant", "reading", "seed"), [*CLIENT_COLUMNS[:4], "reading", *CLIENT_COLUMNS[4:]])
    mixing = metrics.final_summary(records, value="accuracy", by=("method", "reading"))
    table = mixing.pivot(index="method", columns="reading", values="mean")
    table = table.reindex(index=[m for m in MIXINGS if m in table.index],
                          columns=[r for r in READINGS if r in table.columns])
    table.index = [LABELS[m] for m in table.index]
    return {"graph_mixing_records.csv": records, CLAIM_FILES["mixing"]: clients, "graph_mixing.csv": index_column(table)}


#: What each appendix ablation's summary is grouped by (``frequency``: the rounds at a fixed total of local epochs).
ABLATION_BY = {"learn_steps": ("learn_steps",), "frequency": ("rounds", "local_epochs"), "local_epochs": ("local_epochs",)}


def ablation_tables(name: str, records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Appendix ablation ``name``'s file ``ablation_{name}.csv`` from its runs' ``records``: the mean client
    accuracy at the last round (with its spread over seeds) per value of :data:`ABLATION_BY` ``[name]``."""
    return {f"ablation_{name}.csv": metrics.final_summary(records, value="accuracy", by=ABLATION_BY[name])}


def table2_tables(records: pd.DataFrame | None) -> dict[str, pd.DataFrame]:
    """Table 2's file: ``table2_paper_vs_measured.csv`` (MAE, MAPE and RMSE per dataset and method beside the
    paper's) from the traffic runs' ``records``, or, when none ran (``None``: no readings present),
    ``table2_paper.csv``, the paper's numbers alone."""
    paper = reported("sfl", "table2")
    if records is None:
        return {"table2_paper.csv": paper}
    measured = pd.concat([metrics.final_summary(records, value=metric, by=("dataset", "method")).assign(metric=metric)
                          for metric in ("mae", "mape", "rmse")])
    versus = paper_vs_measured(measured.rename(columns={"mean": "value"}), paper, on=["dataset", "method", "metric"])
    return {"table2_paper_vs_measured.csv": versus}


def derive(tables: Mapping[str, pd.DataFrame], profile: str) -> dict[str, pd.DataFrame]:
    """Every table the SFL notebook publishes, by file name: the sections' tables (``tables``, those of the
    sections that ran) and the claims decided on them. A section left out of the run has no files.

    * ``table3_records.csv``, ``table3_clients.csv``, ``table3_paper_vs_measured.csv``: Table 3's records,
      per-client scores at each run's last round and comparison with the paper (:func:`table3_tables`);
    * ``table4_clients.csv``, ``table4_paper_vs_measured.csv``: the same for Table 4 (:func:`table4_tables`);
    * ``table5_timing.csv``: Table 5's timed rounds (:func:`timing_tables`);
    * ``graph_mixing_records.csv``, ``graph_mixing_clients.csv``, ``graph_mixing.csv``: SFL and SFL*'s mixings
      under both local-step readings (:func:`mixing_tables`);
    * ``ablation_learn_steps.csv``, ``ablation_frequency.csv``, ``ablation_local_epochs.csv``: the appendix
      ablations (:func:`ablation_tables`);
    * ``table2_paper_vs_measured.csv``, or ``table2_paper.csv`` when no traffic readings ran (:func:`table2_tables`);
    * ``claims.csv``: :func:`decide` on the frames of :data:`CLAIM_FILES` among ``tables`` — what
      :func:`decide_from_clients` reads back from the written folder — for ``profile``'s Table 3 variants.
    """
    frames = {name: tables.get(file) for name, file in CLAIM_FILES.items()}
    return {**tables, "claims.csv": decide(frames, profile, PROFILES[profile].sweep["table3"])}
