"""Profiles, method variants, grids and the timing helper of the SFL notebook (Tables 2–5, Figures 3 and 5,
the appendix ablations).

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

Variants (:data:`VARIANTS`): SFL* is SFL with ``graph="learned"``; SFL+LG and SFL+Per are SFL with
``share="head"`` / ``share="encoder"`` (Table 4: the structured aggregation on the federated part only).
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from gflkit.profiles import Profile, chosen_sections

#: Table label → (method, method options).
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "fedavg": ("fedavg", {}),
    "fedatt": ("fedatt", {}),
    "fedper": ("fedper", {}),
    "lg_fedavg": ("lg_fedavg", {}),
    "sfl": ("sfl", {}),
    "sfl_star": ("sfl", {"graph": "learned"}),
    "sfl_lg": ("sfl", {"share": "head"}),
    "sfl_per": ("sfl", {"share": "encoder"}),
}
LABELS = {"fedavg": "FedAvg", "fedatt": "FedAtt", "fedper": "FedPer", "lg_fedavg": "LG-FedAvg", "sfl": "SFL",
          "sfl_star": "SFL*", "sfl_lg": "SFL+LG", "sfl_per": "SFL+Per"}
TABLE3 = ("fedavg", "fedatt", "fedper", "lg_fedavg", "sfl", "sfl_star")
TABLE4 = ("fedavg", "fedatt", "sfl", "sfl_lg", "sfl_per")
TABLE2 = ("fedavg", "fedatt", "sfl", "sfl_star")
SECTIONS = ("table2", "table3", "table4", "learn_steps", "frequency", "local_epochs")
#: The traffic datasets of Table 2 (readings absent offline: the notebook draws their sensor graphs).
TRAFFIC = ("metr_la", "pems_bay", "pemsd4", "pemsd8")
#: Table 2's setting on a traffic dataset: one client per sensor, the "pure RNN" (hidden 64), the paper's
#: SGD lr 0.001 and batch 128; SFL aggregates over the sensor graph, SFL* learns one (its ``"given"``
#: smoothing would mix in the sensor graph, as the code's ``graph_v3``).
TRAFFIC_BASE = dict(model="rnn", task="forecasting", partition="natural", partition_options={}, test_ratio=None)
TRAFFIC_METHOD_OPTIONS = {"sfl": {"graph": "dataset"}, "sfl_star": {}}

BASE = dict(dataset="mnist", num_clients=100, model="mcmahan_cnn", partition="shards",
            partition_options={"shards_per_client": 2}, batch_size=128, lr=0.001, momentum=0.0,
            rounds=20, local_epochs=20, evaluate="server")

PROFILES = {
    # scikit-learn's embedded digits (8 × 8), 20 clients, MCLR, 4 rounds: the whole notebook in about a minute.
    "smoke": Profile(
        "smoke",
        base=dict(BASE, dataset="digits", num_clients=20, model="mclr", batch_size=16, lr=0.05, rounds=4,
                  local_epochs=1),
        method_options={"sfl": {"learn_k": 5}},
        sweep={"traffic": (), "table3": TABLE3, "table4": TABLE4, "timing_layers": (2, 3, 5), "learn_steps": (0, 10),
               "frequency": ((2, 2), (4, 1)), "local_epochs": (1, 2)},
    ),
    # Real MNIST (6,000 pooled samples), 10 clients of 2 shards, the paper's CNN and batch size, 10 rounds of
    # one local epoch at lr 0.01 (the paper's 0.001 barely moves a CNN in this budget): 9 minutes on 2 cores.
    "ci": Profile(
        "ci",
        base=dict(BASE, num_clients=10, max_samples=6_000, rounds=10, local_epochs=1, lr=0.01),
        method_options={"sfl": {"learn_k": 5}},
        sweep={"traffic": (), "table3": TABLE3, "table4": TABLE4, "timing_layers": (2, 3, 5), "learn_steps": (0, 10, 50),
               "frequency": ((5, 2), (10, 1)), "local_epochs": (1, 2)},
    ),
    # The paper's setting (one seed: the paper reports one number per cell).
    "paper": Profile(
        "paper",
        base=BASE,
        sweep={"traffic": TRAFFIC, "table3": TABLE3, "table4": TABLE4, "timing_layers": (2, 3, 5),
               "learn_steps": (0, 5, 10, 20, 50),
               "frequency": ((10, 40), (20, 20), (40, 10)), "local_epochs": (5, 10, 20, 40)},
    ),
}


def _check_labels(labels: Iterable[str], entry: str) -> list[str]:
    labels = list(labels)
    unknown = sorted(set(labels) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown} in sweep entry {entry!r}; choose from {sorted(VARIANTS)}")
    return labels


def variant_config(params: Any, label: str, seed: int, **changes: Any):
    """The profile's run of table variant ``label`` (:data:`VARIANTS`) with ``seed`` and field ``changes``."""
    method, options = VARIANTS[_check_labels([label], "variant")[0]]
    merged = {**options, **changes.pop("method_options", {})}
    return params.config(method=method, method_options=merged, seed=seed, **changes)


def variant_of(config: Any) -> dict[str, str]:
    """``{"variant": label}`` of a run config: the table row it belongs to (for ``run_grid(columns=...)``).
    SFL's rows differ by whether the graph is learned and by ``share``; its given graph may be any."""
    options = config.method_options
    for label, (method, marks) in VARIANTS.items():
        if config.method == method and (method != "sfl" or (
                (options.get("graph") == "learned") == (marks.get("graph") == "learned")
                and options.get("share", "all") == marks.get("share", "all"))):
            return {"variant": label}
    raise ValueError(f"run {config.method} {config.method_options} is none of the table variants")


def traffic_config(params: Any, label: str, dataset: str, seed: int):
    """Table 2's run of variant ``label`` on traffic ``dataset`` (:data:`TRAFFIC_BASE`; SFL over the sensor graph)."""
    options = dict(TRAFFIC_METHOD_OPTIONS.get(label, {}))
    if label == "sfl_star":
        options["graph"] = "learned"
    return variant_config(params, label, seed, dataset=dataset, method_options=options, **TRAFFIC_BASE)


def traffic_present(names: Iterable[str], data_root: str | Path | None = None) -> list[str]:
    """The traffic datasets among ``names`` whose readings are present and verified under ``data_root``."""
    from gflkit.notebooks import dataset_available

    return [name for name in names if dataset_available(name, data_root, group="readings")[0]]


def grids(params: Any, sections: Sequence[str] | None = None, data_root: str | Path | None = None) -> dict[str, list]:
    """The run configs of each notebook section (``gflkit precompute sfl``): Table 2 on the traffic datasets
    of the profile whose readings are present under ``data_root``, Tables 3 and 4 and the three appendix
    ablations (SFL*'s structure-learning steps; communication frequency at a fixed total of local epochs;
    local epochs between communications) on MNIST."""
    chosen = chosen_sections(sections, SECTIONS)
    sweep, seeds = params.sweep, params.seeds
    makers = {
        "table2": lambda: [traffic_config(params, v, name, s) for name in traffic_present(sweep["traffic"], data_root)
                           for s in seeds for v in TABLE2],
        "table3": lambda: [variant_config(params, v, s) for s in seeds for v in _check_labels(sweep["table3"], "table3")],
        "table4": lambda: [variant_config(params, v, s) for s in seeds for v in _check_labels(sweep["table4"], "table4")],
        "learn_steps": lambda: [variant_config(params, "sfl_star", s, method_options={"learn_steps": n})
                                for s in seeds for n in sweep["learn_steps"]],
        "frequency": lambda: [variant_config(params, "sfl", s, rounds=r, local_epochs=e)
                              for s in seeds for r, e in sweep["frequency"]],
        "local_epochs": lambda: [variant_config(params, "sfl", s, local_epochs=e)
                                 for s in seeds for e in sweep["local_epochs"]],
    }
    return {section: makers[section]() for section in chosen}


def time_rounds(config: Any, data_root: str | Path | None = None, device: str = "auto", rounds: int = 3,
                layers: int | None = None) -> dict[str, float]:
    """Wall-clock seconds of one round's local training (all clients) and of the server's aggregation for
    ``config``: medians over ``rounds`` rounds measured here after one warm-up round (Table 5; ``layers``
    overrides SFL's hops). On a GPU the clock waits for the device before it reads."""
    import torch

    from gflkit.algorithms import build_algorithm
    from gflkit.experiment import build_federation

    fed = build_federation(config, data_root, device)
    options = dict(config.method_options, **({"layers": layers} if layers is not None else {}))
    algorithm = build_algorithm(config.method, **options)
    algorithm.setup(fed)
    index = torch.arange(fed.num_clients, device=fed.device)

    def clock() -> float:
        if fed.device.type == "cuda":
            torch.cuda.synchronize(fed.device)
        return time.perf_counter()

    training, aggregation = [], []
    for round in range(1, rounds + 2):  # round 1 warms up (and has no SFL regulariser): not counted
        start = clock()
        updates = torch.stack([algorithm.client_update(fed, k, round).vector for k in range(fed.num_clients)])
        middle = clock()
        algorithm.aggregate(fed, index, fed.upload(index, updates, round), round)
        end = clock()
        if round > 1:
            training.append(middle - start)
            aggregation.append(end - middle)
    return {"training_s": statistics.median(training), "aggregation_s": statistics.median(aggregation)}
