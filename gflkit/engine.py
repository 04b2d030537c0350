"""The round loop: sample clients, local training, aggregation, evaluation, records, checkpoints.

One round ``t`` (1-based) of :func:`run_rounds`:

1. sample the participating clients ``S_t`` (all of them by default);
2. for each ``k`` in ``S_t``: ``algorithm.client_update`` (configure → shared local SGD loop);
3. ``algorithm.aggregate(S_t, updates)`` — linear algebra on the ``K × d`` state;
4. every ``eval_every`` rounds (and at the last one): evaluate each client's model
   (``algorithm.evaluation_models``) on its own test split and append one record per client;
5. every ``checkpoint_every`` rounds: write the complete state atomically.

A run resumed from its checkpoint reproduces the uninterrupted run exactly, because every random
stream is derived from ``(seed, round, client)`` rather than from a running generator.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from tqdm.auto import tqdm

from gflkit.algorithms.base import Algorithm
from gflkit.federation import Federation, LocalResult
from gflkit.seeding import CLIENT_SAMPLING, derive_seed


@dataclass(frozen=True)
class Schedule:
    """How many rounds, who participates, how often to evaluate and checkpoint."""

    rounds: int
    clients_per_round: int | None = None
    eval_every: int = 1
    checkpoint_every: int = 0

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError(f"rounds must be a positive number of communication rounds, got {self.rounds}")
        if self.clients_per_round is not None and self.clients_per_round < 1:
            raise ValueError(f"clients_per_round must be >= 1 (or None for all), got {self.clients_per_round}")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.checkpoint_every < 0:
            raise ValueError(f"checkpoint_every must be >= 0 (0 disables checkpoints), got {self.checkpoint_every}")

    def evaluates(self, round: int) -> bool:
        """Whether round ``round`` (1-based) ends with an evaluation."""
        return round % self.eval_every == 0 or round == self.rounds


def sample_clients(num_clients: int, clients_per_round: int | None, seed: int, round: int) -> Tensor:
    """The sorted ids of the clients taking part in ``round`` (uniform without replacement)."""
    if clients_per_round is None or clients_per_round >= num_clients:
        return torch.arange(num_clients)
    rng = np.random.default_rng(derive_seed(seed, round, CLIENT_SAMPLING))
    return torch.from_numpy(np.sort(rng.choice(num_clients, clients_per_round, replace=False)))


class Checkpoint:
    """Atomic save / load of a run's complete state at the end of a round."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def save(self, round: int, fed: Federation, algorithm: Algorithm, records: list[dict[str, Any]]) -> None:
        """Write the state after ``round`` (temp file + rename, so a kill never leaves half a file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        state = {
            "round": round,
            "models": fed.models,
            "global_model": fed.global_model,
            "algorithm": algorithm.state_dict(),
            "records": records,
        }
        torch.save(state, tmp)
        os.replace(tmp, self.path)

    def load(self, fed: Federation, algorithm: Algorithm) -> tuple[int, list[dict[str, Any]]]:
        """Restore the state into ``fed`` and ``algorithm``; returns (last finished round, records)."""
        state = torch.load(self.path, map_location=fed.device, weights_only=False)
        fed.models = state["models"]
        fed.global_model = state["global_model"]
        algorithm.load_state_dict(state["algorithm"])
        return state["round"], state["records"]

    def exists(self) -> bool:
        """Whether a checkpoint file is present."""
        return self.path.exists()


def train_round(fed: Federation, algorithm: Algorithm, clients: Tensor, round: int) -> list[LocalResult]:
    """Steps 2–3 of a round: every client in ``clients`` trains and uploads, then the server aggregates."""
    results = [algorithm.client_update(fed, int(k), round) for k in clients]
    received = fed.upload(clients, torch.stack([r.vector for r in results]), round)
    algorithm.aggregate(fed, clients.to(fed.device), received, round)
    return results


def run_rounds(
    fed: Federation,
    algorithm: Algorithm,
    schedule: Schedule,
    checkpoint: Checkpoint | None = None,
    progress: bool = True,
    description: str | None = None,
) -> pd.DataFrame:
    """Run the federation for ``schedule.rounds`` rounds and return the tidy evaluation records.

    Records have one row per (evaluated round, client): ``round``, ``client``, ``accuracy``, ``loss``,
    ``num_samples`` (the client's test samples), ``train_loss`` (mean local loss of that round; NaN
    when the client did not take part).
    """
    algorithm.setup(fed)
    first_round, records = 1, []
    if checkpoint is not None and checkpoint.exists():
        done, records = checkpoint.load(fed, algorithm)
        first_round = done + 1
    bar = tqdm(
        range(first_round, schedule.rounds + 1),
        desc=description or algorithm.name,
        disable=not progress,
        leave=False,
    )
    for round in bar:
        clients = sample_clients(fed.num_clients, schedule.clients_per_round, fed.seed, round)
        results = train_round(fed, algorithm, clients, round)
        if schedule.evaluates(round):
            train_loss = dict(zip(clients.tolist(), (r.loss for r in results)))
            metrics = fed.evaluate(algorithm.evaluation_models(fed))
            records.extend(
                {"round": round, "client": k, **m, "train_loss": train_loss.get(k, math.nan)}
                for k, m in enumerate(metrics)
            )
            headline = next(iter(metrics[0]))  # the task's first metric, e.g. accuracy or mae
            bar.set_postfix({headline: f"{np.mean([m[headline] for m in metrics]):.3g}"})
        if checkpoint is not None and schedule.checkpoint_every and round % schedule.checkpoint_every == 0:
            checkpoint.save(round, fed, algorithm, records)
    return pd.DataFrame.from_records(records)
