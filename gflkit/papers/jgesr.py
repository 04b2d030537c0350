"""Profiles of the JGESR notebook (Table 1, Figures 3 and 4, the learned graph, the PDCA objective).

Paper settings (Sec. 5.1, NOTES.md): K = 20 clients, Dirichlet κ = 0.05 label split, 75/25 local split,
simple CNN, R = 30 rounds, E = 5 local epochs, SGD lr 0.01; α = 0.05, μ = β = γ = ρ = 1, ε = 1e-3;
channel noise s ∈ {0.1, 0.2}; Figure 4: PDCA at s = 0.1 with missing rates 0 … 0.1; 10 runs.
The paper gives no batch size (we use 32) and no iteration cap for the solvers (we use 1000).

**Evaluation protocol**: the paper measures "the local test accuracy for each client" without saying
which model; its subject is the quality of aggregation, so every method is scored with the model the
server holds for the client after aggregating the corrupted uploads (``"server"``: the restored
:math:`\\psi_k` for PDCA / Two-step, the global model for FedAvg / FedProx, the cluster model for CFL,
the personalised cloud model for FedAMP / pFedGraph). The ``"local"`` scores (each client's model
after its local training of the round, before it is uploaded) are recorded beside and shown where
they differ by more than a point.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from gflkit.experiment import Run
from gflkit.profiles import Profile, chosen_sections, known_names
from gflkit.runtime import Runtime

if TYPE_CHECKING:
    import pandas as pd

#: the paper's seven methods, then ``pdca_e`` — PDCA with extrapolation and backtracking (pDCAe), our
#: earlier deviation from Algorithm 1, kept as its own row so the two solvers can be compared
PAPER_METHODS = ("pdca", "two_step", "fedavg", "fedprox", "cfl", "fedamp", "pfedgraph")
METHODS = PAPER_METHODS[:1] + ("pdca_e",) + PAPER_METHODS[1:]
NOISE_LEVELS = (0.1, 0.2)
#: The noise level of Figure 4's runs (PDCA at each missing rate).
FIGURE4_NOISE = 0.1
SECTIONS = ("table1", "figure4")
PAPER_ROUNDS = 30
# The paper partitions "the training data" (Sec. 5.1): the official training split, 60,000 images.
BASE = dict(num_clients=20, model="simple_cnn", partition="dirichlet", partition_options={"alpha": 0.05},
            test_ratio=0.25, batch_size=32, lr=0.01, evaluate="server", pool="train")
# CIFAR-10 rows of Table 1: the same setting on the other dataset (absent offline here).
EXTRA_DATASETS = {"cifar10": dict(dataset="cifar10")}


def cfl_options(rounds: int) -> dict[str, dict[str, Any]]:
    """CFL's first possible split scaled with the budget: its authors' ``min_rounds`` = 20 belongs to
    longer runs (our reading for the paper's 30 rounds: rounds 21–30 may split); a reduced profile keeps
    the same two thirds of its rounds before the first split, else CFL would be FedAvg to every digit."""
    return {"cfl": {"min_rounds": min(20, (2 * rounds) // 3)}}


PROFILES = {
    # scikit-learn's embedded digits, 4 rounds: the whole notebook in about a minute.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="digits", pool="all", rounds=4, local_epochs=1, batch_size=16, lr=0.05),
        seeds=(0,),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": (0.0, 0.1), "extra_datasets": ()},
        method_options=cfl_options(4),
    ),
    # Real MNIST (20,000 pooled samples), 15 rounds of 2 local epochs, one seed: about 15 minutes on 2 cores.
    "ci": Profile(
        "ci",
        base=dict(BASE, dataset="mnist", pool="all", max_samples=20_000, rounds=15, local_epochs=2),
        seeds=(0,),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": (0.0, 0.1), "extra_datasets": ()},
        method_options=cfl_options(15),
    ),
    # The paper's budget (30 rounds × 5 local epochs on the 60,000 training images) with one seed and
    # Figure 4 at three missing rates: tens of minutes per run on one CPU core.
    "paper1": Profile(
        "paper1",
        base=dict(BASE, dataset="mnist", rounds=PAPER_ROUNDS, local_epochs=5),
        seeds=(0,),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": (0.0, 0.05, 0.1), "extra_datasets": ()},
        method_options=cfl_options(PAPER_ROUNDS),
    ),
    # The paper's settings; the CIFAR-10 rows run when its files are present.
    "paper": Profile(
        "paper",
        base=dict(BASE, dataset="mnist", rounds=PAPER_ROUNDS, local_epochs=5),
        seeds=tuple(range(10)),
        sweep={"methods": METHODS, "noise": NOISE_LEVELS, "missing": tuple(round(0.01 * i, 2) for i in range(11)),
               "extra_datasets": ("cifar10",)},
        method_options=cfl_options(PAPER_ROUNDS),
    ),
}


def channel_config(params: Profile, method: str, s: float, seed: int, missing: float = 0.0, **changes: Any):
    """The profile's run of ``method`` with uploads at noise scale ``s`` and a ``missing`` rate."""
    return params.config(method=method, channel={"noise_scale": s, "missing_rate": missing}, seed=seed, **changes)


def channel_run(params: Profile, method: str, s: float, seed: int, missing: float = 0.0, **changes: Any) -> Run:
    """:func:`channel_config` labelled with its record columns ``s`` and ``missing``."""
    config = channel_config(params, method, s, seed, missing, **changes)
    return Run(config, {"s": config.channel["noise_scale"], "missing": config.channel["missing_rate"]})


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The runs of each notebook section (``gflkit precompute jgesr``): Table 1 (every method at every
    noise level) and Figure 4 (PDCA at s = 0.1 and each missing rate); the same wherever they compute
    (``runtime``: both sections run on the base dataset)."""
    chosen = chosen_sections(sections, SECTIONS)
    sweep, seeds = params.sweep, params.seeds
    makers = {
        "table1": lambda: [channel_run(params, m, s, seed) for s in sweep["noise"] for m in sweep["methods"]
                           for seed in seeds],
        "figure4": lambda: [channel_run(params, "pdca", FIGURE4_NOISE, seed, missing=r) for r in sweep["missing"]
                            for seed in seeds],
    }
    return {name: makers[name]() for name in chosen}


def extra_runs(params: Profile) -> dict[str, list[Run]]:
    """Table 1 on each of the profile's ``extra_datasets`` (:data:`EXTRA_DATASETS`), which run when present."""
    sweep = params.sweep
    names = known_names(sweep["extra_datasets"], EXTRA_DATASETS, "extra dataset")
    return {name: [channel_run(params, m, s, seed, **EXTRA_DATASETS[name]) for s in sweep["noise"]
                   for m in sweep["methods"] for seed in params.seeds] for name in names}


def non_increasing(objective: Any, tolerance: float = 1e-9) -> bool:
    """Whether a solver's objective trace never rises by more than ``tolerance`` relative to its previous value
    (floating-point noise of a non-increasing sequence)."""
    import numpy as np

    values = np.asarray(objective, dtype=np.float64)
    return bool((values[1:] <= values[:-1] + tolerance * np.abs(values[:-1])).all())


#: The learned-graph check's threshold: Pearson's r between learned edge weights and label similarity above it.
GRAPH_CORRELATION = 0.3


def label_similarity(label_counts: Any) -> Any:
    """The clients' pairwise cosine similarity of their training-label histograms (``label_counts``: K × C),
    with a zero diagonal: the graph of similar clients a learned graph is compared with."""
    import torch

    unit = torch.nn.functional.normalize(label_counts.double(), dim=1)
    similarity = unit @ unit.T
    return similarity.fill_diagonal_(0.0)


def edge_correlation(learned: Any, similarity: Any) -> float:
    """Pearson's r between two K × K graphs' weights over the K(K − 1)/2 client pairs (upper triangle)."""
    import torch

    pairs = torch.triu_indices(len(learned), len(learned), offset=1)
    weights = torch.stack([learned.double()[pairs[0], pairs[1]], similarity.double()[pairs[0], pairs[1]]])
    return torch.corrcoef(weights)[0, 1].item()


def graph_checks(params: Profile, runtime: Any, s: float | None = None) -> tuple[Any, Any]:
    """What the objective and learned-graph claims read, from each of ``params.seeds``' stored PDCA run at noise
    ``s`` (default: the profile's highest): the objective over the iterations of the last round's solve (rows
    ``seed, iteration, objective``) and Pearson's r of the learned graph against the label similarity
    (:func:`edge_correlation`; rows ``seed, pairs, pearson_r``). Seeds whose run the store lacks are left out
    (nothing is computed); ``ValueError`` when it holds none."""
    import pandas as pd

    from gflkit.executors import stored_runs
    from gflkit.experiment import build_federation, stored_artifacts

    s = max(params.sweep["noise"]) if s is None else s
    runs = stored_runs([channel_run(params, "pdca", s, seed) for seed in params.seeds], runtime)
    if not runs:
        raise ValueError(f"no PDCA run at s = {s} of seeds {list(params.seeds)} is stored under {runtime.store.root}")
    objectives, correlations = [], []
    for run in runs:
        artifacts = stored_artifacts(run.config, runtime)
        trace = artifacts["objective"].double().numpy()
        objectives.append(pd.DataFrame({"seed": run.config.seed, "iteration": range(len(trace)), "objective": trace}))
        counts = build_federation(run.config, runtime.replace(device="cpu")).train_label_counts()
        learned = artifacts["adjacency"].cpu()
        correlations.append({"seed": run.config.seed, "pairs": len(learned) * (len(learned) - 1) // 2,
                             "pearson_r": edge_correlation(learned, label_similarity(counts))})
    return pd.concat(objectives, ignore_index=True), pd.DataFrame(correlations)


def claims(records: Any, ran: Sequence[str], profile: str, *, missing: Any = None, objective: Any = None,
           correlation: Any = None) -> list[Any]:
    """JGESR's claims. Per-client scores at the last round decide Table 1's (``records``: rows with ``method``,
    ``s``, ``seed``, ``client``, ``round``, ``accuracy``) and Figure 4's (``missing``: PDCA's rows with ``missing``,
    the rate of missing entries) — every round (the notebook's records) or the last only (the committed
    ``*_clients.csv``), and any number of seeds: the noise model follows them (:mod:`gflkit.papers.comparison`).
    ``objective`` and ``correlation``: :func:`graph_checks`' rows, one or more seeds — PDCA's objective over
    the iterations of the last round's solve (it must not rise on any seed), and Pearson's r between the learned
    graph's edge weights and the clients' label similarity (from two seeds on, decided against 0.3 by Student's
    t over the seeds' r: a rerun changes the graph). A claim whose input is absent is "not run"; so is one
    needing a method outside ``ran``."""
    import pandas as pd

    from gflkit import metrics
    from gflkit.papers import check_claim
    from gflkit.papers.comparison import (Scoring, best_other_per_group, compare_per_group, compare_shared, every,
                                         on_shared_seeds, seed_difference, uneven_seeds)

    levels = sorted(records["s"].unique())
    measured = [*ran, *(name for name, value in (("the missing-entry runs", missing), ("the PDCA objective", objective),
                                                  ("the learned graph", correlation)) if value is not None)]

    def shared(methods: Sequence[str]) -> Any:
        # at each noise level, the seeds every one of ``methods`` ran there (a later seed may be incomplete)
        return pd.concat([on_shared_seeds(group, methods) for _, group in records.groupby("s", sort=True)])

    def evidence(rows: Any, text: Callable[[Any, float], str]) -> str:
        mean = metrics.final_summary(rows, value="accuracy", by=("s", "method")).set_index(["s", "method"])["mean"]
        return "; ".join(f"s={s}: {text(mean, s)}" for s in levels) + f" ({seed_counts(rows)})"

    def seed_counts(rows: Any) -> str:
        uneven = {s: uneven_seeds(part) for s, part in rows.groupby("s", sort=True)}
        if any(uneven.values()):  # a ranking claim: each method was compared with PDCA on the seeds both ran
            return "each method with PDCA on the seeds both ran; " + "; ".join(f"s={s}: {u}" for s, u in uneven.items())
        counts = rows.groupby("s")["seed"].nunique()
        if counts.nunique() == 1:
            return f"{counts.iloc[0]} seed(s)"
        return ", ".join(f"s={s}: {n} seed(s)" for s, n in counts.items())

    def best() -> tuple[Any, str]:
        # each candidate against PDCA on the seeds the two ran at that level (compare_with_best_other)
        rows = records[records["method"].isin(PAPER_METHODS)]
        return (every(best_other_per_group(rows, "s", "pdca")),
                evidence(rows, lambda mean, s: f"pdca {mean[(s, 'pdca')]:.2f}"))

    def beats_two_step() -> tuple[Any, str]:
        # each noise level's grid: the two compared on the seeds both ran, the spread floored by the grid's
        rows = shared(["pdca", "two_step"])
        return (every(compare_per_group(records, "s", "pdca", "two_step")),
                evidence(rows, lambda mean, s: f"{mean[(s, 'pdca')]:.2f} vs {mean[(s, 'two_step')]:.2f}"))

    def small_drop() -> tuple[Any, str]:
        # PDCA at each missing rate up to 0.1 against PDCA without missing entries, paired over the same clients:
        # reproduced when the difference (lossy − complete) certainly stays above −10 points
        by_rate = metrics.final_summary(missing, value="accuracy", by=("missing",)).set_index("missing")["mean"]
        lossy = missing[missing["missing"] <= 0.1]
        rates = sorted(set(lossy["missing"]) - {0.0})
        if not rates:
            return None, "no missing rate above 0 ran"
        parts = {f"missing={rate}": compare_shared(lossy, rate, 0.0, Scoring(column="missing")).exceeding(-10.0)
                 for rate in rates}
        drop = by_rate[0.0] - by_rate[by_rate.index <= 0.1]
        return every(parts), f"largest drop {drop.max():.2f} points over missing rates {list(by_rate.index)}"

    def descends() -> tuple[Any, str]:
        by_seed = objective.groupby("seed", sort=True)["objective"]
        iterations, holds = by_seed.agg(lambda trace: len(trace) - 1), by_seed.agg(non_increasing)
        if len(holds) == 1:
            return bool(holds.iloc[0]), f"last round: {iterations.iloc[0]} iterations"
        return (bool(holds.all()), f"last round of seeds {list(holds.index)}: {list(iterations)} iterations; "
                                   f"non-increasing on {int(holds.sum())} of {len(holds)} seeds")

    def follows_labels() -> tuple[Any, str]:
        r = correlation.set_index("seed")["pearson_r"].sort_index()
        if len(r) == 1:
            return bool(r.iloc[0] > GRAPH_CORRELATION), f"Pearson r = {r.iloc[0]:.3f}"
        per_seed = ", ".join(f"seed {seed}: {value:.3f}" for seed, value in r.items())
        return (seed_difference(r.to_numpy(), [GRAPH_CORRELATION] * len(r), "learned graph's Pearson r"),
                f"Pearson r − {GRAPH_CORRELATION}; {per_seed} (mean {r.mean():.3f})")

    return [
        check_claim("pdca_best",
                    "PDCA has the best mean accuracy at every noise level (Table 1)", PAPER_METHODS, ran, best,
                    profile),
        check_claim("pdca_beats_two_step",
                    "PDCA beats the Two-step solution of the same problem (Table 1)", ["pdca", "two_step"], ran,
                    beats_two_step, profile),
        check_claim("missing_drop_small",
                    "PDCA loses less than 10 points of accuracy up to a missing rate of 0.1 (Figure 4)",
                    ["pdca", "the missing-entry runs"], measured, small_drop, profile),
        check_claim("objective_non_increasing",
                    "the PDCA objective is non-increasing over the iterations (Algorithm 1, our check)",
                    ["pdca", "the PDCA objective"], measured, descends, profile),
        check_claim("graph_follows_labels",
                    "the learned graph follows the clients' label similarity (our check: correlation > 0.3)",
                    ["pdca", "the learned graph"], measured, follows_labels, profile),
    ]


#: The columns of the committed ``table1_clients.csv`` (the notebook writes the same).
CLIENT_COLUMNS = ["method", "seed", "evaluate", "s", "missing", "client", "round", "accuracy", "num_samples"]


def stored_clients(profile: str, seeds: Sequence[int], runtime: Any) -> Any:
    """Table 1's per-client rows at each run's reported round (:data:`CLIENT_COLUMNS`) for ``seeds`` of
    ``profile``, from the runs ``runtime``'s store holds (:func:`~gflkit.executors.stored_runs`; nothing is
    computed, so a grid still running is read as far as it got) — the rows a later run appends to the
    committed ``table1_clients.csv`` before :func:`decide_from_clients`."""
    from gflkit import metrics
    from gflkit.executors import stored_grid_records
    from gflkit.profiles import resolve_profile

    params = resolve_profile(PROFILES, profile, seeds=list(seeds))
    records = stored_grid_records(grids(params, ["table1"])["table1"], runtime, f"Table 1 run of seeds {list(seeds)}")
    return metrics.reported_rows(records, ["s", "method", "seed"])[CLIENT_COLUMNS]


#: The columns of the committed ``figure4_clients.csv`` (the notebook writes the same).
MISSING_COLUMNS = ["method", "seed", "evaluate", "missing", "client", "round", "accuracy", "num_samples"]


def stored_missing_clients(profile: str, seeds: Sequence[int], runtime: Any, table1: Any) -> Any:
    """Figure 4's per-client rows at each run's reported round (:data:`MISSING_COLUMNS`) for the ``seeds`` of
    ``profile`` that have at least one lossy run stored: the lossy runs (missing > 0) that ``runtime``'s store
    holds (nothing is computed; a rate a grid has not reached yet is absent), and the complete one
    (missing = 0) from ``table1`` — Table 1's committed rows, since PDCA at s = 0.1 without missing entries *is*
    Table 1's run (the same configuration and key), so a later run need not recompute it. The claim then
    compares each rate with the complete run on the seeds both have. ``ValueError`` when no lossy run is
    stored."""
    import pandas as pd

    from gflkit import metrics
    from gflkit.executors import stored_grid_records, stored_runs
    from gflkit.profiles import resolve_profile

    params = resolve_profile(PROFILES, profile, seeds=list(seeds))
    lossy = [run for run in grids(params, ["figure4"])["figure4"] if run.config.channel["missing_rate"] > 0]
    held = stored_runs(lossy, runtime)
    if not held:
        raise ValueError(f"no Figure 4 run of seeds {list(seeds)} with missing entries is stored under "
                         f"{runtime.store.root}")
    stored = metrics.reported_rows(stored_grid_records(held, runtime, f"Figure 4 run of seeds {list(seeds)}"),
                                   ["missing", "seed"])
    complete = table1[(table1["method"] == "pdca") & (table1["s"] == FIGURE4_NOISE) & (table1["missing"] == 0.0)
                      & table1["seed"].isin(set(stored["seed"]))]
    if complete.empty:
        raise ValueError(f"`table1` holds no complete PDCA run at s = {FIGURE4_NOISE} of the seeds "
                         f"{sorted(set(stored['seed']))} whose lossy runs are stored: Figure 4 compares with it")
    stored = stored[stored["seed"].isin(set(complete["seed"]))]
    rows = pd.concat([complete, stored], ignore_index=True)[MISSING_COLUMNS]
    return rows.sort_values(["seed", "missing", "client"], ignore_index=True)


#: The CSVs of a results folder that :func:`decide_from_clients` reads: Table 1's is required, the others
#: optional (a claim is "not run" without its file).
CLAIM_FILES = {"records": "table1_clients.csv", "missing": "figure4_clients.csv", "objective": "pdca_objective.csv",
               "correlation": "learned_graph_correlation.csv"}


def decide(frames: Mapping[str, Any], profile: str) -> Any:
    """The claims table of :func:`claims` decided on the frames a results folder publishes, named as
    :data:`CLAIM_FILES` (None for an absent optional one, whose claims are then "not run") — what the notebook
    writes, and what :func:`decide_from_clients` reads back; the methods that ran are those Table 1's rows hold."""
    from gflkit.papers import claims_table

    records = frames["records"]
    return claims_table(claims(records, sorted(records["method"].unique()), profile, missing=frames.get("missing"),
                               objective=frames.get("objective"), correlation=frames.get("correlation")))


def decide_from_clients(folder: Any, profile: str) -> Any:
    """:func:`decide` on a folder's committed CSVs (:data:`CLAIM_FILES`; every seed they hold, e.g. seeds measured
    at several times, on machines whose result stores are gone)."""
    from gflkit.papers import committed_csvs

    return decide(committed_csvs(folder, CLAIM_FILES, ["records"], "jgesr"), profile)


#: The solvers :func:`solvers_same_matrix` runs on one received matrix: row label → (solver of
#: :func:`gflkit.graphs.jgesr.restore`, options added to the profile's PDCA options).
SAME_MATRIX_SOLVERS = {"two_step": ("two_step", {}), "pdca (printed)": ("pdca", {}),
                       "pdca_e (pDCAe)": ("pdca", {"extrapolate": True})}


def table1_tables(records: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Table 1's files, by name, from its grid's ``records`` (every client and round of every method, noise
    level ``s`` and seed):

    * ``table1_records.csv``: the records themselves;
    * ``table1_clients.csv``: each client's score at each run's reported round (:data:`CLIENT_COLUMNS`), what
      the Table 1 claims are decided on and what a later seed is appended to;
    * ``table1.csv``: mean, best-5 and worst-5 client accuracy per ``s`` and method, with the spread over seeds;
    * ``table1_paper_vs_measured.csv``: the measured mean beside the paper's Table 1 (MNIST);
    * ``table1_protocols.csv``: the mean under the server and the local protocols, and whether they differ.
    """
    from gflkit import metrics

    summary = metrics.final_summary(records, value="accuracy", by=("s", "method"))
    measured = metrics.long_summary(summary, ["s", "method"], columns=("mean",))  # with the spread over seeds
    return {
        "table1_records.csv": records,
        "table1_clients.csv": metrics.reported_rows(records, ["s", "method", "seed"])[CLIENT_COLUMNS],
        "table1.csv": summary,
        "table1_paper_vs_measured.csv": _beside_paper(measured, "mnist"),
        "table1_protocols.csv": metrics.protocol_table(records, value="accuracy", by=("s", "method")),
    }


def _beside_paper(measured: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """``measured`` (long form: ``s``, ``method``, ``metric``, ...) beside the paper's Table 1 on ``dataset``."""
    from gflkit.papers import paper_vs_measured, reported

    measured["setting"] = "s_" + measured["s"].astype(str)
    paper = reported("jgesr", "table1").query("dataset == @dataset")
    return paper_vs_measured(measured, paper, on=["setting", "method", "metric"])


def extra_comparison(name: str, records: pd.DataFrame) -> pd.DataFrame:
    """Table 1 on the extra dataset ``name`` (:data:`EXTRA_DATASETS`) from its grid's ``records``: the measured
    mean client accuracy per ``s`` and method beside the paper's numbers for that dataset."""
    from gflkit import metrics

    extra = metrics.final_summary(records, by=("s", "method"))
    return _beside_paper(extra.melt(id_vars=["s", "method"], value_vars=["mean"], var_name="metric"), name)


def figure4_summary(missing_records: pd.DataFrame) -> pd.DataFrame:
    """Figure 4 from its grid's ``missing_records`` (PDCA at s = 0.1, every missing rate): the summary of
    :func:`gflkit.metrics.final_summary` per missing rate, and ``drop``, the mean's distance below the mean
    without missing entries."""
    from gflkit import metrics

    figure4 = metrics.final_summary(missing_records, value="accuracy", by=("missing",))
    figure4["drop"] = figure4.loc[figure4["missing"] == 0, "mean"].iloc[0] - figure4["mean"]
    return figure4


def solvers_same_matrix(params: Profile, server: Mapping[str, Any]) -> pd.DataFrame:
    """Each of :data:`SAME_MATRIX_SOLVERS` on one run's last received matrix (``server``: the stored artifacts
    of a PDCA run, :func:`gflkit.experiment.stored_artifacts`) with the profile's PDCA options: per solver, the
    final objective ``F``, the iterations, whether ε was met, the graph's duality gap at the stop, the steps
    whose ρ the safeguard doubled and the final ρ."""
    import pandas as pd

    from gflkit.graphs.jgesr import JGESRParams, restore

    pdca_options = dict(params.method_options.get("pdca", {}))
    rows = []
    for label, (solver, options) in SAME_MATRIX_SOLVERS.items():
        solved = restore(server["received"].double(), server["weights"], server["mask"],
                         JGESRParams(**pdca_options, **options), solver)
        rows.append({"solver": label, "F": solved.objective[-1], "iterations": solved.iterations,
                     "met ε": solved.converged, "graph gap at stop": solved.graph_gap,
                     "safeguard steps": solved.safeguard_steps, "final ρ": solved.rho})
    return pd.DataFrame(rows)


def derive(records: pd.DataFrame, missing_records: pd.DataFrame, objective: pd.DataFrame,
           correlation: pd.DataFrame, same_matrix: pd.DataFrame, profile: str,
           extra: Mapping[str, pd.DataFrame] | None = None) -> dict[str, pd.DataFrame]:
    """Every table the JGESR notebook publishes, by file name, from what its sections ran: Table 1's
    ``records``, Figure 4's ``missing_records``, :func:`graph_checks`' ``objective`` and ``correlation`` rows,
    the ``same_matrix`` table of :func:`solvers_same_matrix` and the records of each ``extra`` dataset that ran:

    * the files of :func:`table1_tables`: ``table1_records.csv``, ``table1_clients.csv``, ``table1.csv``,
      ``table1_paper_vs_measured.csv``, ``table1_protocols.csv``;
    * ``table1_{name}_paper_vs_measured.csv`` per extra dataset ``name`` (:func:`extra_comparison`);
    * ``figure4_missing.csv``: Figure 4 per missing rate (:func:`figure4_summary`);
    * ``solvers_same_matrix.csv``: ``same_matrix``;
    * ``figure4_clients.csv``: Figure 4's per-client rows at each run's reported round (:data:`MISSING_COLUMNS`);
    * ``pdca_objective.csv`` and ``learned_graph_correlation.csv``: ``objective`` and ``correlation``;
    * ``claims.csv``: :func:`decide` on the frames of :data:`CLAIM_FILES` (``table1_clients.csv`` and the three
      above), the function that also decides a committed results folder (:func:`decide_from_clients`).
    """
    from gflkit import metrics

    tables = table1_tables(records)
    for name, extra_records in (extra or {}).items():
        tables[f"table1_{name}_paper_vs_measured.csv"] = extra_comparison(name, extra_records)
    tables["figure4_missing.csv"] = figure4_summary(missing_records)
    tables["solvers_same_matrix.csv"] = same_matrix
    published = {"records": tables[CLAIM_FILES["records"]],
                 "missing": metrics.reported_rows(missing_records, ["missing", "seed"])[MISSING_COLUMNS],
                 "objective": objective, "correlation": correlation}
    tables |= {CLAIM_FILES[name]: published[name] for name in ("missing", "objective", "correlation")}
    tables["claims.csv"] = decide(published, profile)
    return tables
