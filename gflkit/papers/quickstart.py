"""Profiles of the quickstart notebook: Local vs FedAvg vs FedProx on label shards.

The paper numbers it is compared with are FedSKA's Table 1 (MNIST, 100 clients, MCLR), whose
Separate/FedAvg/FedProx columns are exactly these three methods; so every profile scores them with
FedSKA's protocol (:data:`gflkit.papers.fedska.PROTOCOL`): FedAvg and FedProx on the global model,
Local on each client's model after its local training.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from gflkit.experiment import Run
from gflkit.papers import Claim
from gflkit.papers.fedska import PROTOCOL
from gflkit.profiles import Profile, chosen_sections
from gflkit.runtime import Runtime

METHODS = ("local", "fedavg", "fedprox")
SHARDS = (2, 5, 10)
SECTIONS = ("shards",)

PROFILES = {
    # digits ships inside scikit-learn: no files, no network, about a minute on a laptop.
    "smoke": Profile(
        "smoke",
        base=dict(dataset="digits", num_clients=20, model="mclr", partition="shards", rounds=15,
                  batch_size=16, lr=0.05, eval_every=1),
        seeds=(0,),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
    # Real MNIST with the paper's 100 clients, fewer rounds and one seed: minutes on 2 CPU cores.
    "ci": Profile(
        "ci",
        base=dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", rounds=10,
                  batch_size=32, lr=0.01, eval_every=1),
        seeds=(0,),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
    # FedSKA's MNIST setting: T=200, E=1, batch 32, lr 0.01, 80/20 per-client split; 3 seeds.
    "paper": Profile(
        "paper",
        base=dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", rounds=200,
                  batch_size=32, lr=0.01, eval_every=5),
        seeds=(0, 1, 2),
        sweep={"methods": METHODS, "shards": SHARDS},
        method_config=PROTOCOL,
    ),
}


def grids(params: Profile, sections: Sequence[str] | None = None, runtime: Runtime | None = None) -> dict[str, list[Run]]:
    """The notebook's runs (``gflkit precompute quickstart``): every method at every shard setting ``q``
    (label ``q``) and seed; the same wherever they compute (``runtime``)."""
    runs = [Run(params.config(method=method, partition_options={"shards_per_client": q}, seed=seed), {"q": q})
            for q in params.sweep["shards"] for method in params.sweep["methods"] for seed in params.seeds]
    return {name: runs for name in chosen_sections(sections, SECTIONS)}


def claims(records: pd.DataFrame, ran: Sequence[str], profile: str) -> list[Claim]:
    """The quickstart's three claims, decided by the per-client scores at each run's last round: ``records``
    has rows with ``method``, ``q``, ``seed``, ``client``, ``round``, ``accuracy`` (and ``num_samples``) —
    every round (the notebook's records) or the last one only (the committed ``table_clients.csv``), any number
    of seeds. ``ran``: the methods that ran (a claim needing another is "not run")."""
    from gflkit import metrics
    from gflkit.papers import check_claim
    from gflkit.papers.comparison import Scoring, compare, compare_with_best_other

    qs = sorted(records["q"].unique())
    q_low, q_high = qs[0], qs[-1]
    mean = metrics.final_summary(records, value="accuracy", by=("q", "method")).set_index(["q", "method"])["mean"]
    at_q = {q: records[records["q"] == q] for q in (q_low, q_high)}

    def means(q: Any, *methods: str) -> str:
        return ", ".join(f"{method} {mean[(q, method)]:.2f}" for method in methods)

    def local_beats_both() -> tuple[Any, str]:  # Local against the better of the two, paired over the clients
        other, difference = compare_with_best_other(at_q[q_low], "local", ["fedavg", "fedprox"])
        return difference, f"q = {q_low}: {means(q_low, 'local', 'fedavg', 'fedprox')}; Local against {other}"

    return [
        check_claim("local_beats_at_low_q",
                    f"with q = {q_low} shards, Local beats FedAvg and FedProx", ["local", "fedavg", "fedprox"], ran,
                    local_beats_both, profile),
        check_claim("fedavg_matches_local_at_high_q",
                    f"with q = {q_high} shards, FedAvg matches or beats Local (no more than 1 point below)",
                    ["local", "fedavg"], ran,
                    lambda: (compare(at_q[q_high], "fedavg", "local").exceeding(-1.0), means(q_high, "fedavg", "local")),
                    profile),
        # two partitions: client k at q_low and client k at q_high hold different data, paired by index only
        check_claim("local_falls_with_q", "Local's accuracy falls as q grows (more classes per client)", ["local"], ran,
                    lambda: (compare(records[records["method"] == "local"], q_low, q_high, Scoring(column="q")),
                             f"local {mean[(q_low, 'local')]:.2f} at q = {q_low} vs {mean[(q_high, 'local')]:.2f} at "
                             f"q = {q_high}"), profile),
    ]


def decide(frames: Mapping[str, pd.DataFrame], profile: str) -> pd.DataFrame:
    """The claims table of :func:`claims` decided on the frames a results folder publishes: ``{"records": the
    per-client rows of table_clients.csv}`` — what the notebook writes, and what :func:`decide_from_clients`
    reads back; the methods that ran are those the rows hold."""
    from gflkit.papers import claims_table

    records = frames["records"]
    return claims_table(claims(records, sorted(records["method"].unique()), profile))


def decide_from_clients(folder: str | Path, profile: str) -> pd.DataFrame:
    """:func:`decide` on a folder's committed ``table_clients.csv``."""
    return decide({"records": pd.read_csv(Path(folder) / "table_clients.csv")}, profile)


#: the columns of ``table_clients.csv``: one row per client of each run at its reported round
CLIENT_COLUMNS = ["method", "seed", "evaluate", "q", "client", "round", "accuracy", "num_samples"]


def derive(records: pd.DataFrame, profile: str) -> dict[str, pd.DataFrame]:
    """Every table the quickstart publishes, by file name, from its grid's ``records`` (every client and round):

    * ``records.csv``: the records themselves (left out of the archive: round logs);
    * ``table_clients.csv``: each client's score at each run's reported round (:data:`CLIENT_COLUMNS`), what
      the claims are decided on and what a later seed is appended to;
    * ``table.csv``: mean, best-5 and worst-5 client accuracy per ``q`` and method, with the spread over seeds;
    * ``protocols.csv``: the same mean under the global-model and the local-model protocols;
    * ``paper_vs_measured.csv``: the measured numbers beside FedSKA's Table 1 (MNIST);
    * ``claims.csv``: :func:`decide` on ``table_clients.csv``.
    """
    from gflkit import metrics
    from gflkit.papers import paper_vs_measured, reported

    clients = metrics.reported_rows(records, ["q", "method", "seed"])[CLIENT_COLUMNS]
    summary = metrics.final_summary(records, value="accuracy", by=("q", "method"))
    measured = summary.melt(id_vars=["q", "method"], value_vars=["mean", "best5", "worst5"], var_name="metric")
    measured["setting"] = "shards_" + measured["q"].astype(str)
    paper = reported("fedska", "table1").query("dataset == 'mnist'")
    return {
        "records.csv": records,
        "table_clients.csv": clients,
        "table.csv": summary,
        "protocols.csv": metrics.protocol_table(records, value="accuracy", by=("q", "method")),
        "paper_vs_measured.csv": paper_vs_measured(measured, paper, on=["setting", "method", "metric"]),
        "claims.csv": decide({"records": clients}, profile),
    }
