"""Seconds per round: a gflkit method in Flower's simulation runtime against gflkit's own engine.

The same round — FedAvg (``--method``) over 100 MNIST label-shard clients (local epoch 1, batch 32,
lr 0.01, MCLR) — timed side by side in one process:

(a) gflkit's engine, ``gflkit.engine.train_round`` with the sequential local loop (clients one after
    another, as Flower's clients train);
(b) the same with ``local_training="auto"`` (batched where it applies), what ``gflkit.experiment.run``
    uses;
(c) the training phase of a Flower round (``GflkitStrategy.train_seconds``: from ``configure_train`` to
    the end of ``aggregate_train``) with the ServerApp and the ClientApps of ``gflkit.flower`` in Flower's
    simulation runtime in this process (``run_flower``: the SuperLink's in-memory store and Grid, Flower's
    runtime loop, the ClientApp called in-process): messages, (de)serialisation, each client's copy of the
    run reset and filled, local training, aggregation.

The first round of each is a warm-up (Flower's clients build their copy of the run on the first message)
and is left out; ``--repeats`` rounds are timed and their medians printed. The last line is
``flower_ratio=<median c / median a>``. Needs MNIST under the data root (GFLKIT_DATA or --data-root);
``--dataset digits`` runs the same on scikit-learn's embedded digits (no files) for a quick check.
Flower's runtime polls for messages every 0.1 s, so a round costs Flower at least about that much
whatever the clients do.
"""
from __future__ import annotations

import statistics
import time

import torch

from common import round_benchmark_parser, use_threads
from gflkit.algorithms import build_algorithm
from gflkit.engine import train_round
from gflkit.experiment import RunConfig, build_federation
from gflkit.flower import run_flower


def engine_rounds(config: RunConfig, args, local_training: str) -> list[float]:
    """Seconds of rounds 2 … repeats + 1 of gflkit's engine (round 1: warm-up)."""
    fed = build_federation(config, args.data_root, args.device, local_training)
    algorithm = build_algorithm(config.method, **config.method_options)
    algorithm.setup(fed)
    clients = fed.training_clients
    seconds = []
    for round in range(1, config.rounds + 1):
        start = time.perf_counter()
        train_round(fed, algorithm, clients, round)
        seconds.append(time.perf_counter() - start)
    return seconds[1:]


def flower_rounds(config: RunConfig, args) -> tuple[list[float], float]:
    """Seconds of the training phase of Flower rounds 2 … repeats + 1, and of the whole Flower run."""
    run = run_flower(config, args.data_root, args.device, local_training="sequential")
    seconds = [run.strategy.train_seconds[round] for round in range(1, config.rounds + 1)]
    return seconds[1:], run.seconds


def line(label: str, seconds: list[float]) -> str:
    """One result line: the median and every timed round."""
    return f"{label} median {statistics.median(seconds):.3f} s  (rounds: {', '.join(f'{t:.3f}' for t in seconds)})"


def main() -> None:
    """Time (a), (b) and (c) on the same config and print the medians and their ratio."""
    parser = round_benchmark_parser(__doc__)
    parser.add_argument("--method", default="fedavg", help="a method gflkit.flower runs (default fedavg)")
    parser.add_argument("--dataset", default="mnist", help="mnist (default) or digits for a quick check")
    args = parser.parse_args()
    use_threads(args.threads)
    rounds = args.repeats + 1
    config = RunConfig(dataset=args.dataset, num_clients=args.clients, method=args.method,
                       partition_options={"shards_per_client": args.shards}, batch_size=32, lr=0.01,
                       rounds=rounds, eval_every=rounds)  # evaluated once, after the timed rounds
    fed = build_federation(config, args.data_root, args.device, "sequential")
    samples = sum(len(i) for i in fed.train_indices)
    print(f"{args.dataset}, {fed.num_clients} clients, {samples} training samples, {args.method}, MCLR (d={fed.dim}), "
          f"batch 32, device {fed.device}, {torch.get_num_threads()} threads, {args.repeats} timed rounds")
    a = engine_rounds(config, args, "sequential")
    b = engine_rounds(config, args, "auto")
    c, total = flower_rounds(config, args)
    print(line("(a) gflkit engine round (sequential):", a))
    print(line("(b) gflkit engine round (auto):      ", b))
    print(line("(c) Flower round (in-process runtime):", c))
    print(f"    whole Flower run: {total:.2f} s for {rounds} rounds, client set-up and the final evaluation included")
    print(f"flower_ratio={statistics.median(c) / statistics.median(a):.3f}")


if __name__ == "__main__":
    main()
