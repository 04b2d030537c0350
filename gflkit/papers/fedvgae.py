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
from typing import Any, Mapping, Sequence

from gflkit.experiment import Run
from gflkit.profiles import Profile, chosen_sections
from gflkit.runtime import Runtime

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
    Small enough to commit, so that seeds computed in different sessions can be decided together."""
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
    the notebook's rows or the committed ``clients.csv`` with seeds of several sessions. ``methods``: the
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
    """:func:`decide` on a folder's committed ``clients.csv`` (every seed it holds, e.g. seeds measured in
    several sessions, whose result stores are gone)."""
    import pandas as pd

    return decide({"clients": pd.read_csv(Path(folder) / "clients.csv")}, profile)


def stored_clients(profile: str, seeds: Sequence[int], runtime: Any, sections: Sequence[str] = tuple(SECTIONS)) -> Any:
    """:func:`reported_clients` of ``sections`` (every table by default) for ``seeds`` of ``profile``, read from
    ``runtime``'s store (runs missing there are computed, on the datasets present under its data root) — the
    rows a later session appends to the committed ``clients.csv`` before :func:`decide_from_clients`. Table 5
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
