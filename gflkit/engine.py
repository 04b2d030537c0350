"""The round loop: sample clients, local training, aggregation, evaluation, records, checkpoints.

One round ``t`` (1-based) of :func:`run_rounds`:

1. sample the participating clients ``S_t`` among the training clients (all of them by default;
   held-out test clients never train);
2. for each ``k`` in ``S_t``: ``algorithm.client_update`` (configure → shared local SGD loop);
3. ``algorithm.aggregate(S_t, updates)`` — linear algebra on the ``K × d`` state;
4. every ``eval_every`` rounds (and at the last one): evaluate each client's model on its own test
   split (and validation split, where the federation has one: ``ClientData.evaluation_splits``) under
   both evaluation protocols and append one record per client;
5. every ``checkpoint_every`` rounds: write the complete state atomically.

**Evaluation protocols** (``Schedule.evaluate``) — which model a client is scored with:

* ``"server"``: the model the server holds for the client after aggregation
  (``algorithm.evaluation_models``): the global model (FedAvg, FedProx, MOON), the client's cluster
  model (IFCA, CFL) or its personal row (Local, Ditto, SFL, FedSKA, ...);
* ``"local"``: the model the client holds after its local training of the round
  (``algorithm.trained_model``): e.g. the global or cluster model fine-tuned for one local epoch on the
  client's data. A client that did not take part in the round keeps the score of the model it last
  trained (its model has not changed since); one that never trained is scored with the server's model.

The configured protocol's metrics are the record's plain columns (``accuracy``, ``loss``, ...); the
other protocol's are kept beside them with its name as suffix (``accuracy_local`` or
``accuracy_server``), so a table can show both from one run. Validation metrics carry the split as
prefix (``val_auc``, ``val_auc_server``): what a table reporting the best-validation round selects by
(:func:`gflkit.metrics.final_summary`).

A run resumed from its checkpoint reproduces the uninterrupted run exactly, because every random
stream is derived from ``(seed, round, client)`` rather than from a running generator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from gflkit.algorithms.base import Algorithm
from gflkit.checkpoint import Checkpoint
from gflkit.federation import Federation, LocalResult
from gflkit.progress import progress_bar
from gflkit.seeding import CLIENT_SAMPLING, derive_seed


PROTOCOLS = ("server", "local")


@dataclass(frozen=True)
class Schedule:
    """How many rounds, who participates, how often to evaluate, which model is scored, checkpoints.

    ``evaluate`` is the evaluation protocol, ``"server"`` or ``"local"`` (see the module docstring).
    """

    rounds: int
    clients_per_round: int | None = None
    eval_every: int = 1
    checkpoint_every: int = 0
    evaluate: str = "server"

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be a positive number of communication rounds, got {self.rounds}")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ValueError(f"clients_per_round must be >= 1 (or None for all), got {self.clients_per_round}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0 (0 disables checkpoints), got {self.checkpoint_every}")
        if self.evaluate not in PROTOCOLS:
            raise ValueError(f"unknown evaluation protocol evaluate={self.evaluate!r}; choose one of {list(PROTOCOLS)} "
                             "('server': the model the server holds for the client, 'local': that model after the "
                             "client's local training of the round)")

    @property
    def other_protocol(self) -> str:
        """The protocol whose metrics are kept beside the configured one's (with its name as suffix)."""
        return PROTOCOLS[1 - PROTOCOLS.index(self.evaluate)]

    def evaluates(self, round: int) -> bool:
        """Whether round ``round`` (1-based) ends with an evaluation."""
        return round % self.eval_every == 0 or round == self.rounds


def sample_clients(num_clients: int, clients_per_round: int | None, seed: int, round: int) -> Tensor:
    """The sorted ids of the clients taking part in ``round`` (uniform without replacement)."""
    if clients_per_round is None or clients_per_round >= num_clients:
        return torch.arange(num_clients)
    rng = np.random.default_rng(derive_seed(seed, round, CLIENT_SAMPLING))
    return torch.from_numpy(np.sort(rng.choice(num_clients, clients_per_round, replace=False)))


def training_path(paths: set[str]) -> str:
    """How a round's local training ran: ``"batched"``, ``"sequential"``, ``"mixed"`` or ``"none"``."""
    return next(iter(paths)) if len(paths) == 1 else ("mixed" if paths else "none")


def train_round(fed: Federation, algorithm: Algorithm, clients: Tensor, round: int) -> list[LocalResult]:
    """Steps 2–3 of a round: every client in ``clients`` trains and uploads, then the server aggregates."""
    results = algorithm.round_updates(fed, clients, round)
    received = fed.upload(clients, torch.stack([r.vector for r in results]), round)
    algorithm.aggregate(fed, clients.to(fed.device), received, round)
    return results


def merge_splits(by_split: dict[str, dict[str, float]]) -> dict[str, float]:
    """One record's metrics from per-split metrics: the test split's as they are, every other split's
    prefixed with its name (``val_auc``) and without its ``num_samples``."""
    merged = dict(by_split["test"])
    for split, metrics in by_split.items():
        if split != "test":
            merged.update({f"{split}_{name}": value for name, value in metrics.items() if name != "num_samples"})
    return merged


def score_trained_models(fed: Federation, algorithm: Algorithm, clients: Tensor, results: list[LocalResult],
                         scores: dict[int, dict[str, float]]) -> None:
    """The ``"local"`` protocol: score each client's freshly trained model on its evaluation splits, into ``scores``."""
    for client, result in zip(clients.tolist(), results):
        model = algorithm.trained_model(fed, client, result)
        scores[client] = merge_splits({split: fed.client_metrics(client, model, split)
                                       for split in fed.data.evaluation_splits})


def server_metrics(fed: Federation, algorithm: Algorithm) -> list[dict[str, float]]:
    """The ``"server"`` protocol: every client's metrics with the model the server holds for it."""
    models = algorithm.evaluation_models(fed)
    by_split = {split: fed.evaluate(models, split) for split in fed.data.evaluation_splits}
    return [merge_splits({split: by_split[split][client] for split in by_split}) for client in range(fed.num_clients)]


def protocol_records(server: list[dict[str, float]], local_scores: dict[int, dict[str, float]],
                     schedule: Schedule) -> list[dict[str, float]]:
    """Per client: the configured protocol's metrics, plus the other's with its name as suffix."""
    rows = []
    for client, server_metrics in enumerate(server):
        by_protocol = {"server": server_metrics, "local": local_scores.get(client, server_metrics)}
        other = by_protocol[schedule.other_protocol]
        rows.append({**by_protocol[schedule.evaluate],
                     **{f"{name}_{schedule.other_protocol}": value for name, value in other.items()
                        if name != "num_samples"}})
    return rows


def run_rounds(
    fed: Federation,
    algorithm: Algorithm,
    schedule: Schedule,
    checkpoint: Checkpoint | None = None,
    progress: bool = True,
    description: str | None = None,
) -> pd.DataFrame:
    """Run the federation for ``schedule.rounds`` rounds and return the tidy evaluation records.

    Records have one row per (evaluated round, client): ``round``, ``client``, the task's metrics under
    ``schedule.evaluate`` (e.g. ``accuracy``, ``loss``), the same under the other protocol with its name
    as suffix (``accuracy_local`` / ``accuracy_server``), ``num_samples`` (the client's test samples),
    ``train_loss`` (mean local loss of that round; NaN when the client did not take part) and, when the
    federation holds out clients, ``held_out`` (whether the row is an unseen test client);
    ``local_training``: how that round's local training ran (:func:`training_path`: ``batched`` /
    ``sequential`` / ``mixed``, see :class:`~gflkit.local_training.LocalTraining`).
    """
    algorithm.setup(fed)
    first_round, records, local_scores = 1, [], {}
    if checkpoint is not None and checkpoint.exists():
        done, records, local_scores = checkpoint.load(fed, algorithm, schedule.rounds, schedule.evaluates)
        first_round = done + 1
    pool = fed.training_clients
    partial = schedule.clients_per_round is not None and schedule.clients_per_round < len(pool)
    held_out = fed.held_out.tolist() if bool(fed.held_out.any()) else None
    bar = progress_bar(range(first_round, schedule.rounds + 1), desc=description or algorithm.name,
                       enabled=progress, initial=first_round - 1, total=schedule.rounds)
    for round in bar:
        clients = pool[sample_clients(len(pool), schedule.clients_per_round, fed.seed, round)]
        fed.trainer.paths.clear()
        results = train_round(fed, algorithm, clients, round)
        if schedule.evaluates(round) or partial:  # a non-participant keeps its last trained model's score
            score_trained_models(fed, algorithm, clients, results, local_scores)
        if schedule.evaluates(round):
            train_loss = dict(zip(clients.tolist(), (r.loss for r in results)))
            path = training_path(fed.trainer.paths)
            metrics = protocol_records(server_metrics(fed, algorithm), local_scores, schedule)
            records.extend(
                {"round": round, "client": k, **m, "train_loss": train_loss.get(k, math.nan),
                 "local_training": path, **({"held_out": held_out[k]} if held_out else {})}
                for k, m in enumerate(metrics)
            )
            headline = next(iter(metrics[0]))  # the task's first metric, e.g. accuracy or mae
            shown = [m for k, m in enumerate(metrics) if held_out[k]] if held_out else metrics  # unseen clients
            bar.set_postfix({headline: f"{np.mean([m[headline] for m in shown]):.3g}"})
        if checkpoint is not None and schedule.checkpoint_every and round % schedule.checkpoint_every == 0:
            checkpoint.save(round, fed, algorithm, records, local_scores)
    return pd.DataFrame.from_records(records)
