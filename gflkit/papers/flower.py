"""Profiles and published tables of the ``flower`` notebook: SFL in Flower's simulation against gflkit's engine.

The setting is the quickstart's (label shards, MCLR), with SFL scored under FedSKA's protocol for it
(``"local"``: each client's personalised model after its local training; the ``"server"`` protocol is
recorded beside it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from gflkit import metrics
from gflkit.profiles import Profile

if TYPE_CHECKING:
    from gflkit.experiment import RunConfig

#: FedSKA's MNIST setting with SFL under the ``local`` protocol (each profile changes the size).
MNIST = dict(dataset="mnist", num_clients=100, model="mclr", partition="shards", partition_options={"shards_per_client": 2},
             rounds=10, batch_size=32, lr=0.01, method="sfl", evaluate="local")
SWEEP = {"methods": ("sfl",)}

PROFILES = {
    # digits ships inside scikit-learn: no files, no network; seconds on a laptop.
    "smoke": Profile("smoke", base=dict(MNIST, dataset="digits", num_clients=20, batch_size=16, lr=0.05), sweep=SWEEP),
    # Real MNIST with FedSKA's 100 clients, 10 rounds: minutes on 2 CPU cores (both runs).
    "ci": Profile("ci", base=MNIST, sweep=SWEEP),
    # FedSKA's MNIST setting, 200 rounds, three seeds.
    "paper": Profile("paper", base=dict(MNIST, rounds=200, eval_every=5), seeds=(0, 1, 2), sweep=SWEEP),
}


def timing_row(config: RunConfig, engine_seconds: float, flower_seconds: float) -> dict[str, Any]:
    """One configuration's seconds per round (evaluation included) on gflkit's engine and in Flower's simulation,
    from the seconds of each whole run: a row of ``timing.csv`` (:func:`timing_table`)."""
    return {"method": config.method, "seed": config.seed, "rounds": config.rounds,
            "gflkit engine s/round": engine_seconds / config.rounds,
            "Flower simulation s/round": flower_seconds / config.rounds}


def timing_table(timings: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows of :func:`timing_row`, one per configuration, with ``ratio``: Flower's seconds per round over the
    engine's."""
    timing = pd.DataFrame(list(timings))
    timing["ratio"] = timing["Flower simulation s/round"] / timing["gflkit engine s/round"]
    return timing


def both_engines(engine_runs: Sequence[pd.DataFrame], flower_runs: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The records of every configuration's run on gflkit's engine and in Flower, one frame: ``engine`` says which
    (``gflkit`` or ``flower``), the engine's rows first."""
    return pd.concat([pd.concat(engine_runs).assign(engine="gflkit"), pd.concat(flower_runs).assign(engine="flower")],
                     ignore_index=True)


def derive(records: pd.DataFrame, timings: Sequence[Mapping[str, Any]]) -> dict[str, pd.DataFrame]:
    """Every table the flower notebook publishes, by file name, from the records of both engines
    (:func:`both_engines`) and each configuration's timing (:func:`timing_row`):

    * ``records.csv``: the records themselves (round logs, one row per evaluated round and client and engine);
    * ``table.csv``: mean, weighted mean, best-5 and worst-5 client accuracy at the last round per method and engine
      (:func:`gflkit.metrics.final_summary`);
    * ``protocols.csv``: the mean under both evaluation protocols per method and engine
      (:func:`gflkit.metrics.protocol_table`);
    * ``timing.csv``: seconds per round on each engine and their ratio (:func:`timing_table`; wall-clock times of
      this machine).
    """
    return {
        "records.csv": records,
        "table.csv": metrics.final_summary(records, value="accuracy", by=("method", "engine")),
        "protocols.csv": metrics.protocol_table(records, value="accuracy", by=("method", "engine")),
        "timing.csv": timing_table(timings),
    }
