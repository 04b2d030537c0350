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
    run reset and filled, local training, aggregation;
(d) the training phase of a round of the deployment path (``--deploy-clients K``; 0 skips it): a
    ``flower-superlink`` and K ``flower-supernode`` processes on 127.0.0.1
    (:class:`gflkit.flower.local.LocalDeployment`), the template app ``flower_app/`` started by ``flwr run``
    with the same config over K clients; each SuperNode starts a fresh ``flwr-clientapp`` process per
    message (flwr 1.42 has no long-lived ClientApp process);
(e) that per-message start-up measured on its own: a fresh Python importing ``gflkit.flower.app``, then
    building the node's copy of the run (loading the dataset, partitioning, keeping one client).

The first round of each is a warm-up (Flower's clients build their copy of the run on the first message)
and is left out; ``--repeats`` rounds are timed and their medians printed. The last lines are
``flower_ratio=<median c / median a>`` and, with (d), ``deployment_ratio=<median d / median a>`` (over
(a) on the deployment's K clients). Needs MNIST under the data root (GFLKIT_DATA or --data-root);
``--dataset digits`` runs the same on scikit-learn's embedded digits (no files) for a quick check.
Flower's runtime polls for messages every 0.1 s, so a round costs Flower at least about that much
whatever the clients do.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

import torch

from common import round_benchmark_parser, use_threads
from gflkit.algorithms import build_algorithm
from gflkit.engine import train_round
from gflkit.experiment import RunConfig, build_federation
from gflkit.flower import run_flower
from gflkit.flower.local import LocalDeployment
from gflkit.flower.run_config import RESULTS_ENV
from gflkit.runtime import Runtime

APP = Path(__file__).resolve().parents[1] / "flower_app"
STARTUP = """
import time
start = time.perf_counter()
import gflkit.flower.app
from gflkit.experiment import RunConfig
from gflkit.flower.replica import node_replica
from gflkit.runtime import Runtime
imported = time.perf_counter()
node_replica(RunConfig(**{config}), {client}, Runtime({data_root!r}, "cpu"))
print(imported - start, time.perf_counter() - imported)
"""


def engine_rounds(config: RunConfig, args, local_training: str) -> list[float]:
    """Seconds of rounds 2 … repeats + 1 of gflkit's engine (round 1: warm-up)."""
    fed = build_federation(config, Runtime(data_root=args.data_root, device=args.device, local_training=local_training))
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
    run = run_flower(config, Runtime(args.data_root, args.device, local_training="sequential"))
    seconds = [run.strategy.train_seconds[round] for round in range(1, config.rounds + 1)]
    return seconds[1:], run.seconds


def deployment_rounds(config: RunConfig, args, clients: int) -> list[float]:
    """Seconds of the training phase of deployment rounds 2 … repeats + 1 over ``clients`` SuperNodes."""
    with tempfile.TemporaryDirectory() as folder, \
            LocalDeployment(clients, env={"GFLKIT_THREADS": "1", RESULTS_ENV: folder}) as deployment:
        timing = Path(folder) / "timing.csv"
        deployment.run(APP, {"dataset": config.dataset, "num-clients": clients, "method": config.method,
                             "partition-options": f'{{"shards_per_client": {args.shards}}}', "max-samples": "none",
                             "batch-size": config.batch_size, "lr": config.lr, "rounds": config.rounds,
                             "eval-every": config.eval_every, "timing": timing.name}, timeout=6 * 3600)
        return pd.read_csv(timing)["train_seconds"].tolist()[1:]


def message_startup(config: RunConfig, args, repeats: int = 3) -> tuple[list[float], list[float]]:
    """Seconds of ``repeats`` fresh processes importing ``gflkit.flower.app``, and of their node copies."""
    fields = {name: getattr(config, name) for name in ("dataset", "num_clients", "partition_options", "batch_size",
                                                       "lr", "rounds")}
    imports, copies = [], []
    for _ in range(repeats):
        code = STARTUP.format(config=fields, client=1, data_root=args.data_root)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "GFLKIT_THREADS": "1"}).stdout.split()
        imports.append(float(out[0]))
        copies.append(float(out[1]))
    return imports, copies


def line(label: str, seconds: list[float]) -> str:
    """One result line: the median and every timed round."""
    return f"{label} median {statistics.median(seconds):.3f} s  (rounds: {', '.join(f'{t:.3f}' for t in seconds)})"


def main() -> None:
    """Time (a), (b) and (c) on the same config and print the medians and their ratio."""
    parser = round_benchmark_parser(__doc__)
    parser.add_argument("--method", default="fedavg", help="a method gflkit.flower runs (default fedavg)")
    parser.add_argument("--dataset", default="mnist", help="mnist (default) or digits for a quick check")
    parser.add_argument("--deploy-clients", type=int, default=0,
                        help="(d): SuperNodes of the deployment round (0: skip it; each starts a process per message)")
    args = parser.parse_args()
    use_threads(args.threads)
    rounds = args.repeats + 1
    config = RunConfig(dataset=args.dataset, num_clients=args.clients, method=args.method,
                       partition_options={"shards_per_client": args.shards}, batch_size=32, lr=0.01,
                       rounds=rounds, eval_every=rounds)  # evaluated once, after the timed rounds
    fed = build_federation(config, Runtime(data_root=args.data_root, device=args.device, local_training="sequential"))
    samples = sum(len(i) for i in fed.data.train_indices)
    print(f"{args.dataset}, {fed.num_clients} clients, {samples} training samples, {args.method}, MCLR (d={fed.dim}), "
          f"batch 32, device {fed.device}, {torch.get_num_threads()} threads, {args.repeats} timed rounds")
    a = engine_rounds(config, args, "sequential")
    b = engine_rounds(config, args, "auto")
    c, total = flower_rounds(config, args)
    print(line("(a) gflkit engine round (sequential):", a))
    print(line("(b) gflkit engine round (auto):      ", b))
    print(line("(c) Flower round (in-process runtime):", c))
    print(f"    whole Flower run: {total:.2f} s for {rounds} rounds, client set-up and the final evaluation included")
    imports, copies = message_startup(config, args)
    print(line("(e) per-message start-up, import:    ", imports))
    print(line("    per-message start-up, node copy: ", copies))
    print(f"flower_ratio={statistics.median(c) / statistics.median(a):.3f}")
    if args.deploy_clients:
        small = config.replace(num_clients=args.deploy_clients)
        a_small, d = engine_rounds(small, args, "sequential"), deployment_rounds(small, args, args.deploy_clients)
        print(line(f"(a) engine round, {args.deploy_clients} clients:        ", a_small))
        print(line(f"(d) deployment round, {args.deploy_clients} SuperNodes:", d))
        print(f"deployment_ratio={statistics.median(d) / statistics.median(a_small):.3f}")


if __name__ == "__main__":
    main()
