"""Profiles of the FedVGAE notebook (Tables 3–8, Figure 3, the partition figure).

Paper settings (Sec. 4, NOTES.md): each graph cut into 10 subgraph clients, 100 rounds of 5 local
iterations, averages over 5 runs; VGAE encoder (shared GCN layer + μ / log σ layers), inner-product
decoder, 2-layer MLP readout for node classification; λ = 0.8, φ = 0.5; "evaluated the model
performance of each client after training completion". Where the paper is silent, the tables' protocol
(:data:`BASE`, :data:`METHOD_CONFIG`) is:

* **which model is scored**: every method's client model after its local training (``evaluate="local"``),
  as FedVGAE's text and FED-PUB's code (which logs each client's accuracy after its local epochs);
* **optimiser**: Adam, lr 0.01, each client keeping its optimiser state across rounds
  (``optimizer_state="persistent"``) — the VGAE reference code's optimiser and rate, and FED-PUB's
  client (Adam, lr 0.01 on Cora, built once per client); the baselines' own weight decay
  (FED-PUB 1e-6, GCFL+ 5e-4, FedSage+ 1e-4, none for the others); full-batch steps on a client's
  subgraph;
* **reconstruction loss**: the whole adjacency matrix, Eq. 7 as in Kipf's code
  (:class:`~gflkit.tasks.LinkPredictionTask`, ``reconstruction="dense"``), KL scaled by 1/n;
* **node-classification readout** from μ (:class:`~gflkit.models.vgae.VGAE`, ``readout_from="mu"``);
* **node features** (:data:`DATA_OPTIONS`): raw for link prediction, as Kipf's VGAE code; row-normalised
  for node classification, as FED-PUB's pipeline and PyG's Planetoid examples. Measured (Cora, 100
  rounds, seed 0): row-normalising costs FedAvg 8 AUC points in link prediction (82.7 → 74.4; Local
  80.4 → 82.8) and gains it 11 accuracy points in node classification (60.8 → 71.7; Local 61.0 → 59.8).
  PolBlogs has no features (one-hot node ids, unchanged by it) and
  is its largest connected component, 1,222 of its 1,490 nodes (the Nettack benchmarks' standard; the
  paper does not say; ``largest_component=False`` in ``data_options`` keeps the whole graph);
* **partition**: Louvain (FedSage's and OpenFGL's default for subgraph FL);
* **GCFL+'s thresholds** ε₁ = 0.4, ε₂ = 0.8 (:data:`METHOD_OPTIONS`): the authors' 0.05 / 0.1 (ratio 2
  kept) scaled by 8. Their values fit their GIN at Adam lr 1e-3; here a cluster's mean update norm
  settles at 0.1–0.26 after round 20 (median over rounds 21–100, eps = 0, every graph and task), above
  0.05, so with the published thresholds no cluster ever splits and GCFL+ equals FedAvg. At ×4 CiteSeer
  still never splits; at ×8 every graph and task splits from round 21 on. The notebook shows the number
  of clusters per round (the ``clusters_per_round`` artifact);
* **FedSage+'s NeighGen rate** 0.01 (the authors' 0.001, ×10): NeighGen learns the missing counts in
  the 20 local steps only (the federated phase trains fGen alone), and at 0.001 dGen's predictions stay
  below 1 on PolBlogs, so no neighbour is generated and FedSage+ equals FedAvg (measured: 0 of 10
  clients generate at 0.001, 8 of 10 at 0.01). The notebook shows the neighbours generated per client
  (the ``generated_neighbours`` artifact);
* **reported round** (:data:`REPORT`): "we implemented early termination" — each run reports the round
  whose mean validation score over its clients (AUC for links, accuracy for nodes; the clients'
  validation edges or nodes) is best, and the test scores of that round
  (:func:`gflkit.metrics.final_summary`, ``report="best_val"``); the round loop itself runs every round;
* **Table 5** (:data:`SHARE_SETTINGS`): FedAvg, FedProx and FedVGAE under each ``share``
  (:mod:`gflkit.algorithms.sharing`), on each ``share_datasets`` graph; for link prediction the
  inner-product decoder has no parameters, so ``"encoder"`` equals ``"all"`` and ``"first_layer"`` is
  the reading that keeps something local;
* **FED-PUB's similarity scale** τ = 3 (``norm_scale`` of the authors' Cora disjoint-clients script, the
  setting closest to ours; their parser's default is 10).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from gflkit.experiment import Run
from gflkit.profiles import Profile, chosen_sections
from gflkit.runtime import Runtime

if TYPE_CHECKING:
    import pandas as pd

METHODS = ("local", "fedavg", "fedprox", "moon", "gcfl", "fedsage", "fedpub", "fedvgae")
BASE = dict(num_clients=10, partition="louvain", model="vgae", task="link_prediction", evaluate="local",
            optimizer="adam", optimizer_state="persistent", lr=0.01)
# The baselines' own weight decay (their official codes' Adam).
METHOD_CONFIG = {"fedpub": {"weight_decay": 1e-6}, "gcfl": {"weight_decay": 5e-4}, "fedsage": {"weight_decay": 1e-4}}
# Input preprocessing per task (module docstring): each task's reference code.
DATA_OPTIONS = {"link_prediction": {"normalize_features": False}, "node_classification": {"normalize_features": True}}
# Method options every profile shares (GCFL+'s calibrated thresholds; module docstring).
# Early termination: each run reports its best-validation round, selected by the task's score.
REPORT = "best_val"
SCORES = {"link_prediction": "auc", "node_classification": "accuracy"}
METHOD_OPTIONS = {"gcfl": {"eps_1": 0.4, "eps_2": 0.8}, "fedpub": {"tau": 3.0}, "fedsage": {"gen_lr": 0.01}}
# Ablations and sweeps of Tables 5–8: FedVGAE's options per setting name.
SHARE_METHODS = ("fedavg", "fedprox", "fedvgae")
SHARE_SETTINGS = {f"{method}_{share}": (method, {"share": share})
                  for method in SHARE_METHODS for share in ("encoder", "first_layer", "all")}
COMPONENTS = {"full": {}, "without_contrastive": {"lam": 0.0}, "without_finetuning": {"finetune": False},
              "without_both": {"lam": 0.0, "finetune": False}}

PROFILES = {
    # Cora (offline copy), 3 rounds: the whole notebook in about two minutes.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="cora", rounds=3, local_epochs=2),
        seeds=(0,),
        method_config=METHOD_CONFIG,
        sweep={"methods": METHODS, "link_datasets": ("cora",), "node_datasets": ("cora",),
               "ablation_dataset": ("cora",), "share_datasets": ("cora",), "lambdas": (0.1, 0.8), "phis": (0.1, 0.5)},
        # NeighGen dominates a 3-round run: 5 local steps and 1 federated one, at a rate high enough that
        # a few clients still generate neighbours (measured on Cora: 2 of 10 clients, 26 s per task).
        method_options={**METHOD_OPTIONS, "fedsage": {"local_gen_epochs": 5, "gen_rounds": 1, "gen_lr": 0.05}},
    ),
    # The three graphs complete offline, 30 rounds of the paper's 5 local iterations, one run.
    "ci": Profile(
        "ci",
        base=dict(BASE, dataset="cora", rounds=30, local_epochs=5),
        seeds=(0,),
        method_config=METHOD_CONFIG,
        sweep={"methods": METHODS, "link_datasets": ("cora", "citeseer", "polblogs"),
               "node_datasets": ("cora", "citeseer"), "ablation_dataset": ("cora",),
               "share_datasets": ("cora", "citeseer"),
               "lambdas": (0.1, 0.8, 5.0), "phis": (0.1, 0.5, 0.9)},
        method_options=METHOD_OPTIONS,
        required=("cora", "citeseer", "polblogs"),
    ),
    # The paper's settings; datasets whose files are absent are skipped with a message.
    "paper": Profile(
        "paper",
        base=dict(BASE, dataset="cora", rounds=100, local_epochs=5),
        seeds=(0, 1, 2, 3, 4),
        method_config=METHOD_CONFIG,
        sweep={"methods": METHODS, "link_datasets": ("cora_full", "cora", "pubmed", "citeseer", "polblogs"),
               "node_datasets": ("cora", "pubmed", "citeseer", "flickr"), "ablation_dataset": ("cora",),
               "share_datasets": ("citeseer", "cora", "pubmed"),
               "lambdas": (0.1, 0.5, 0.8, 1.0, 2.0, 5.0, 10.0), "phis": (0.1, 0.2, 0.3, 0.5, 0.8, 0.9)},
        method_options=METHOD_OPTIONS,
    ),
}


def runs(params: Profile, dataset: str, task: str,
         settings: Mapping[str, tuple[str, Mapping[str, Any]]] | None = None) -> list[Run]:
    """Every seed of every sweep method on ``dataset`` for ``task`` — or, with ``settings``
    (``{name: (method, method_options)}``), of each named option set — as the notebook runs them, labelled
    with the ``dataset`` (and the option set's name as ``setting``)."""
    named = settings is not None
    if settings is None:
        settings = {method: (method, {}) for method in params.sweep["methods"]}
    data_options = {**DATA_OPTIONS[task], **params.base.get("data_options", {})}  # a profile override wins
    return [Run(params.config(dataset=dataset, task=task, data_options=data_options, method=method,
                              method_options=dict(options), seed=seed),
                {"dataset": dataset, **({"setting": name} if named else {})})
            for name, (method, options) in settings.items() for seed in params.seeds]


def lambda_options(params: Profile) -> dict[str, dict[str, float]]:
    """Table 7's FedVGAE option sets, named as the notebook names them (``lambda_0.8``)."""
    return {f"lambda_{float(lam)}": {"lam": float(lam)} for lam in params.sweep["lambdas"]}


def phi_options(params: Profile) -> dict[str, dict[str, float]]:
    """Table 8's FedVGAE option sets (``phi_0.5``)."""
    return {f"phi_{phi}": {"phi": float(phi)} for phi in params.sweep["phis"]}


def _main_table(params: Profile, present: Sequence[str], datasets: str, task: str) -> list[Run]:
    table = [run for name in params.sweep[datasets] if name in present for run in runs(params, name, task)]
    return sorted(table, key=lambda run: run.config.seed)  # seed-major: a first seed of every cell comes first


def share_runs(params: Profile, present: Sequence[str], task: str) -> list[Run]:
    """Table 5's runs for ``task``: every :data:`SHARE_SETTINGS` on every present ``share_datasets`` graph,
    labelled with the ``dataset`` and what is shared (``setting``: ``encoder``, ``first_layer``, ``all``)."""
    return [Run(run.config, {"dataset": name, "setting": options["share"]})
            for name in params.sweep["share_datasets"] if name in present
            for setting, (method, options) in SHARE_SETTINGS.items()
            for run in runs(params, name, task, {setting: (method, options)})]


def _ablation(params: Profile, present: Sequence[str], tasks: Sequence[str],
              options: Mapping[str, Mapping[str, Any]]) -> list[Run]:
    dataset = params.sweep["ablation_dataset"][0]
    if dataset not in present:
        return []
    settings = {name: ("fedvgae", values) for name, values in options.items()}
    return [run for task in tasks for run in runs(params, dataset, task, settings)]


SECTIONS = {
    "table3": lambda params, present: _main_table(params, present, "link_datasets", "link_prediction"),
    "table4": lambda params, present: _main_table(params, present, "node_datasets", "node_classification"),
    "table5": lambda params, present: [run for task in ("link_prediction", "node_classification")
                                       for run in share_runs(params, present, task)],
    "table6": lambda params, present: _ablation(params, present, ("link_prediction",), COMPONENTS),
    "tables7_8": lambda params, present: _ablation(params, present, ("link_prediction",),
                                                   {**lambda_options(params), **phi_options(params)}),
}


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The runs of the notebook's Tables 3–8 (``sections``, all by default) for a resolved profile,
    on the registered datasets whose raw files are present under ``runtime``'s data root (the default one
    without a runtime; the notebook skips the others too)."""
    from gflkit.data import dataset_available, dataset_names

    chosen = chosen_sections(sections, list(SECTIONS))
    names = {*params.sweep["link_datasets"], *params.sweep["node_datasets"], *params.sweep["ablation_dataset"],
             *params.sweep["share_datasets"]}
    data_root = runtime.data_root if runtime is not None else None
    present = [name for name in names if name in dataset_names() and dataset_available(name, data_root)[0]]
    return {name: SECTIONS[name](params, present) for name in chosen}


CLIENT_COLUMNS = ["section", "dataset", "method", "task", "setting", "seed", "client", "round", "auc", "ap", "accuracy"]


def reported_clients(sections: Mapping[str, tuple[Any, str]]) -> Any:
    """The per-seed, per-client scores behind the claims: for each ``section -> (records, task)``, every
    client's row at its run's reported round (the best-validation round by the task's score, :data:`REPORT`),
    in :data:`CLIENT_COLUMNS` (``setting`` is the records' own column where they have one, else the method).
    Small enough to commit, so that seeds computed at different times can be decided together."""
    import pandas as pd

    from gflkit import metrics

    frames = []
    for section, (records, task) in sections.items():
        if records is None:
            continue
        rows = records if "setting" in records else records.assign(setting=records["method"])
        rows = metrics.reported_rows(rows, ["dataset", "method", "setting", "seed"], report=REPORT,
                                     select_by=SCORES[task])
        frames.append(rows.assign(section=section, task=task).reindex(columns=CLIENT_COLUMNS))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=CLIENT_COLUMNS)


def most(parts: Mapping[str, Any]) -> Any:
    """"On most datasets (cells)": the comparisons of more than half of ``parts`` hold."""
    from gflkit.papers.comparison import at_least

    return at_least(len(parts) // 2 + 1, parts)


def claims(clients: Any, methods: Sequence[str], ran: Sequence[str], profile: str) -> list[Any]:
    """FedVGAE's claims, decided by the per-client scores at each run's reported round (:func:`reported_clients`:
    sections ``table3``, ``table4``, ``table5_<task>``, ``table6``, ``tables7_8``), over every seed the rows hold —
    the notebook's rows or the committed ``clients.csv`` with seeds run at different times. ``methods``: the
    profile's methods (FedVGAE is compared with the federated ones on links, with every method on nodes);
    ``ran``: the methods and the sections that ran (a claim needing another is "not run")."""
    from gflkit.papers import check_claim, standing
    from gflkit.papers.comparison import Scoring, best_other_per_group, compare, every, spread_within

    federated = [m for m in methods if m not in ("local", "fedvgae")]
    by_setting = {task: Scoring(value=score, column="setting", report=None) for task, score in SCORES.items()}

    def section(name: str) -> Any:
        return clients[clients["section"] == name]

    def seeds(rows: Any) -> str:
        return f" ({rows['seed'].nunique()} seed(s))"

    def ranking(key: str, statement: str, name: str, others: Sequence[str] | None, rule: Any,
                per_dataset: Any) -> Any:
        # FedVGAE against the best of ``others`` on each dataset of section ``name``, combined by ``rule``
        rows = section(name)
        score = SCORES[rows["task"].iloc[0]] if len(rows) else "auc"
        means = rows.groupby(["dataset", "method"])[score].mean()
        return check_claim(key, statement, [name, *methods], ran,
                           lambda: (rule(best_other_per_group(rows, "dataset", "fedvgae", others,
                                                              Scoring(value=score, report=None))),
                                    "; ".join(per_dataset(d, means[d]) for d in sorted(rows["dataset"].unique()))
                                    + seeds(rows)), profile)

    def encoder_beats_all() -> tuple[Any, str]:
        # per (dataset, method) cell of node classification: encoder-only sharing against sharing everything
        rows, scoring = section("table5_node_classification"), by_setting["node_classification"]
        cells = dict(list(rows.groupby(["dataset", "method"])))
        means = {cell: scoring.means(rows) for cell, rows in cells.items()}
        return most({f"{d}, {m}": compare(cell, "encoder", "all", scoring) for (d, m), cell in cells.items()}), (
            "; ".join(f"{d}, {m}: {mean['encoder']:.2f} vs {mean['all']:.2f}" for (d, m), mean in means.items())
            + seeds(rows))

    def components_matter() -> tuple[Any, str]:
        rows, scoring = section("table6"), by_setting["link_prediction"]
        mean = scoring.means(rows)
        return compare(rows, "full", "without_both", scoring), (
            f"full {mean['full']:.2f}, w/o con {mean['without_contrastive']:.2f}, "
            f"w/o ft {mean['without_finetuning']:.2f}, w/o both {mean['without_both']:.2f}" + seeds(rows))

    def phi_has_no_large_effect() -> tuple[Any, str]:
        # the φ with the highest mean AUC against the one with the lowest, within 5 points on the same clients
        rows, scoring = section("tables7_8"), by_setting["link_prediction"]
        rows = rows[rows["setting"].str.startswith("phi_")]
        means = scoring.means(rows)
        phis = sorted(float(name.split("_")[1]) for name in means.index)
        high, low, difference = spread_within(rows, 5.0, scoring)
        return difference, (f"range {means[high] - means[low]:.2f} points over φ = {phis} ({high} vs {low})"
                             f"{seeds(rows)}")

    return [
        ranking("best_auc_link_prediction",
                "FedVGAE has the best AUC of the federated methods on every link-prediction dataset (Table 3)",
                "table3", federated, every, lambda d, means: f"{d}: fedvgae {means['fedvgae']:.2f}"),
        ranking("best_accuracy_node_classification",
                "FedVGAE has the best node-classification accuracy on most datasets (Table 4)", "table4", None,
                most, lambda d, means: f"{d}: FedVGAE {standing(means, 'fedvgae')}"),
        check_claim("encoder_sharing_beats_all",
                    "sharing only the encoder beats sharing every layer (Table 5; node classification here)",
                    ["table5_node_classification"], ran, encoder_beats_all, profile),
        check_claim("components_matter",
                    "removing both the contrastive term and the fine-tuning lowers the AUC (Table 6)", ["table6"], ran,
                    components_matter, profile),
        check_claim("phi_small_effect",
                    "φ has no large effect: AUC varies by less than 5 points over φ (Table 8)", ["tables7_8"], ran,
                    phi_has_no_large_effect, profile),
    ]


def decide(frames: Mapping[str, Any], profile: str) -> Any:
    """The claims table of :func:`claims` decided on the frames a results folder publishes: ``{"clients": the
    per-client rows of clients.csv}`` — what the notebook writes, and what :func:`decide_from_clients` reads
    back; what ran is the methods and sections the rows hold."""
    from gflkit.papers import claims_table

    clients = frames["clients"]
    ran = [*clients["method"].unique(), *clients["section"].unique()]
    return claims_table(claims(clients, PROFILES[profile].sweep["methods"], ran, profile))


def decide_from_clients(folder: str | Path, profile: str) -> Any:
    """:func:`decide` on a folder's committed ``clients.csv`` (every seed it holds, e.g. seeds measured at
    several times, on machines whose result stores are gone)."""
    import pandas as pd

    return decide({"clients": pd.read_csv(Path(folder) / "clients.csv")}, profile)


def stored_clients(profile: str, seeds: Sequence[int], runtime: Any, sections: Sequence[str] = tuple(SECTIONS)) -> Any:
    """:func:`reported_clients` of ``sections`` (every table by default) for ``seeds`` of ``profile``, read from
    ``runtime``'s store (runs missing there are computed, on the datasets present under its data root) — the
    rows a later run appends to the committed ``clients.csv`` before :func:`decide_from_clients`. Table 5
    is split by task into ``table5_link_prediction`` and ``table5_node_classification``, as the notebook does."""
    from gflkit.executors import run_grid
    from gflkit.profiles import resolve_profile

    params = resolve_profile(PROFILES, profile, seeds=list(seeds))
    parts = {}
    for name, grid in grids(params, list(sections), runtime).items():
        for task in dict.fromkeys(run.config.task for run in grid):
            part = f"{name}_{task}" if name == "table5" else name
            parts[part] = (run_grid([run for run in grid if run.config.task == task], runtime), task)
    return reported_clients(parts)


#: the metrics each task's tables report, in percent
METRICS = {"link_prediction": ["auc", "ap"], "node_classification": ["accuracy"]}
#: the columns on which a sweep of FedVGAE's options (Tables 6–8) meets the paper's table
SWEEP_KEYS = ["dataset", "setting", "method", "metric"]


def measured_table(records: pd.DataFrame, task: str, by: Sequence[str] = ("dataset", "method")) -> pd.DataFrame:
    """The mean over clients at each run's best-validation round (early termination, :data:`REPORT` by the task's
    :data:`SCORES`) of every metric of ``task`` (:data:`METRICS`), one row per ``by`` cell and metric: columns
    ``*by, value, metric``."""
    import pandas as pd

    from gflkit import metrics

    frames = [metrics.final_summary(records, value=metric, by=by, report=REPORT, select_by=SCORES[task])[[*by, "mean"]]
              .assign(metric=metric) for metric in METRICS[task]]
    return pd.concat(frames, ignore_index=True).rename(columns={"mean": "value"})


def with_paper(measured: pd.DataFrame, table: str, on: Sequence[str]) -> pd.DataFrame:
    """``measured`` beside FedVGAE's ``table`` (its fractions ×100, so in percent too), matched on the columns ``on``
    (:func:`gflkit.papers.paper_vs_measured`: ``*on, measured, paper, difference``)."""
    from gflkit.papers import paper_vs_measured, reported

    paper = reported("fedvgae", table).assign(value=lambda frame: 100 * frame["value"])
    return paper_vs_measured(measured, paper, on=on)


def table3(records: pd.DataFrame) -> pd.DataFrame:
    """Table 3 measured beside the paper's: AUC and AP of link prediction per dataset and method."""
    return with_paper(measured_table(records, "link_prediction"), "table3", on=["dataset", "method", "metric"])


def table4(records: pd.DataFrame) -> pd.DataFrame:
    """Table 4 measured beside the paper's: node-classification accuracy per dataset and method."""
    return with_paper(measured_table(records, "node_classification"), "table4", on=["dataset", "method", "metric"])


def table5(share_records: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Table 5 measured beside the paper's, from ``{task: records of its share_runs}``: every metric per ``task``,
    dataset, method and what is shared (``setting``)."""
    import pandas as pd

    measured = [measured_table(records, task, by=("dataset", "method", "setting")).assign(task=task)
                for task, records in share_records.items()]
    table = with_paper(pd.concat(measured, ignore_index=True), "table5", on=["dataset", "setting", "method", "metric"])
    table.insert(0, "task", table["metric"].map({m: t for t, ms in METRICS.items() for m in ms}))
    return table


def sweep_table(records: pd.DataFrame, table: str) -> pd.DataFrame:
    """FedVGAE's mean client AUC per named option set (``setting``) of link-prediction ``records`` on one dataset
    (the ablation dataset they are labelled with), beside the paper's ``table`` (``table6``, ``table7``, ``table8``)."""
    measured = measured_table(records, "link_prediction", by=("setting",)).query("metric == 'auc'")
    measured = measured.assign(dataset=records["dataset"].iloc[0], method="fedvgae")
    return with_paper(measured, table, on=SWEEP_KEYS)


def table6(records: pd.DataFrame) -> pd.DataFrame:
    """Table 6 (:data:`COMPONENTS`) measured beside the paper's, with each setting's AUC ``delta`` to the full
    method."""
    table = sweep_table(records, "table6")
    table["delta"] = table["measured"] - table.loc[table["setting"] == "full", "measured"].item()
    return table


def degeneracy_checks(params: Profile, present: Sequence[str], runtime: Runtime) -> pd.DataFrame:
    """Whether GCFL+ and FedSage+ did what they claim, per run of Tables 3 and 4 on the ``present`` datasets, read
    from the runs' stored artifacts: GCFL+'s clusters at the end and the round of its first split
    (``clusters_per_round``), FedSage+'s neighbours generated and how many clients generated any
    (``generated_neighbours``). Empty when neither method ran."""
    import pandas as pd

    rows = []
    for task, datasets in (("link_prediction", "link_datasets"), ("node_classification", "node_datasets")):
        for name in (n for n in params.sweep[datasets] if n in present):
            rows += [_degeneracy_row(run.config, task, name, runtime) for run in runs(params, name, task)
                     if run.config.method in ("gcfl", "fedsage")]
    return pd.DataFrame(rows)


def _degeneracy_row(config: Any, task: str, dataset: str, runtime: Runtime) -> dict[str, Any]:
    """One row of :func:`degeneracy_checks`: a GCFL+ or FedSage+ run of ``task`` on ``dataset`` and what its
    artifacts show."""
    import torch

    from gflkit.experiment import stored_artifacts

    found = stored_artifacts(config, runtime)
    row = dict(task=task, dataset=dataset, seed=config.seed, method=config.method)
    if config.method == "gcfl":
        per_round = found["clusters_per_round"].tolist()
        row.update(clusters_at_end=per_round[-1],
                   first_split_round=next((r + 1 for r, c in enumerate(per_round) if c > 1), None))
    else:
        generated = found.get("generated_neighbours", torch.zeros(0, dtype=torch.long))
        row.update(neighbours_generated=int(generated.sum()), clients_generating=int((generated > 0).sum()))
    return row


def derive(profile: str, *, link: pd.DataFrame | None = None, node: pd.DataFrame | None = None,
           share: Mapping[str, pd.DataFrame] | None = None, components: pd.DataFrame | None = None,
           lambdas: pd.DataFrame | None = None, phis: pd.DataFrame | None = None,
           checks: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Every table the FedVGAE notebook publishes, by file name, from the records of each section that ran (``link``:
    Table 3's, ``node``: Table 4's, ``share``: ``{task: Table 5's}``, ``components``: Table 6's, ``lambdas`` and
    ``phis``: Tables 7 and 8's; a section that did not run is ``None`` or empty and its files are left out) and
    the :func:`degeneracy_checks` of Tables 3–4:

    * ``table3_records.csv``, ``table4_records.csv``: the records of Tables 3 and 4 (every client and round);
    * ``table3_paper_vs_measured.csv``, ``table4_paper_vs_measured.csv``: :func:`table3`, :func:`table4`;
    * ``degeneracy_checks.csv``: the ``checks`` (only when they have rows);
    * ``table5_share.csv``: :func:`table5`;
    * ``table6_components.csv``: :func:`table6`;
    * ``table7_lambda.csv``, ``table8_phi.csv``: :func:`sweep_table` of ``lambdas`` and of ``phis``;
    * ``clients.csv``: :func:`reported_clients` of every section (Table 5 split by task), what the claims are
      decided on and what the rows of later seeds are appended to;
    * ``claims.csv``: :func:`decide` on ``clients.csv``.
    """
    tables, sections = {}, {}
    if link is not None:
        tables |= {"table3_records.csv": link, "table3_paper_vs_measured.csv": table3(link)}
        sections["table3"] = (link, "link_prediction")
    if node is not None:
        tables |= {"table4_records.csv": node, "table4_paper_vs_measured.csv": table4(node)}
        sections["table4"] = (node, "node_classification")
    if checks is not None and len(checks):
        tables["degeneracy_checks.csv"] = checks
    if share:
        tables["table5_share.csv"] = table5(share)
        sections |= {f"table5_{task}": (records, task) for task, records in share.items()}
    if components is not None:
        tables["table6_components.csv"] = table6(components)
        sections["table6"] = (components, "link_prediction")
    sweeps = {name: records for name, records in (("table7_lambda.csv", lambdas), ("table8_phi.csv", phis))
              if records is not None}
    tables |= {name: sweep_table(records, name.split("_")[0]) for name, records in sweeps.items()}
    if sweeps:
        import pandas as pd

        sections["tables7_8"] = (pd.concat(list(sweeps.values()), ignore_index=True), "link_prediction")
    clients = reported_clients(sections)
    return tables | {"clients.csv": clients, "claims.csv": decide({"clients": clients}, profile)}
