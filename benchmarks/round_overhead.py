"""Overhead of one federated round over centralised training on the same samples.

(a) one centralised SGD epoch over the union of the clients' training samples, and
(b) one FedAvg round over 100 MNIST label-shard clients (local epoch 1, each client from the
    global model, then aggregation) — exactly ``gflkit.engine.train_round``,
with the same model (MCLR), batch size and learning rate. Both run through the same local loop
(``gflkit.training.local_sgd``: the round uses the sequential path, ``--local-training sequential``), so
the ratio b/a measures what federation adds: loading rows, per-client optimiser set-up, stacking and
averaging the K×d state. (The batched path is measured by ``vectorised_clients.py``.)

Runs a and b alternately ``--repeats`` times and prints medians; the last line is
``overhead_ratio=<median b / median a>``. Needs MNIST under the data root (GFLKIT_DATA or --data-root).
"""
from __future__ import annotations

import statistics
import time

import torch

from common import round_benchmark_parser, use_threads
from gflkit.algorithms import build_algorithm
from gflkit.engine import train_round
from gflkit.experiment import RunConfig, build_federation
from gflkit.seeding import generator
from gflkit.training import local_sgd, minibatches
from gflkit.runtime import Runtime


def centralised_epoch(fed, repeat: int) -> float:
    """Seconds for one SGD epoch over all clients' training samples pooled."""
    train = torch.cat(fed.data.train_indices)
    fed.flat.load(fed.initial)
    start = time.perf_counter()
    order = generator(0, repeat)
    local_sgd(fed.flat, fed.task.loss, lambda: minibatches(fed.data.x, fed.data.y, train, fed.train_config.batch_size, order),
              fed.train_config)
    return time.perf_counter() - start


def federated_round(fed, repeat: int) -> float:
    """Seconds for one FedAvg round over every client."""
    algorithm = build_algorithm("fedavg")
    algorithm.setup(fed)
    start = time.perf_counter()
    train_round(fed, algorithm, torch.arange(fed.num_clients), repeat + 1)
    return time.perf_counter() - start


def main() -> None:
    parser = round_benchmark_parser(__doc__)
    parser.add_argument("--local-training", default="sequential", choices=["sequential", "batched", "auto"],
                        help="how the federated round trains its clients (default: the sequential reference loop)")
    args = parser.parse_args()
    use_threads(args.threads)
    config = RunConfig(dataset="mnist", num_clients=args.clients, partition_options={"shards_per_client": args.shards},
                       batch_size=32, lr=0.01)
    fed = build_federation(config, Runtime(data_root=args.data_root, device=args.device, local_training=args.local_training))
    samples = sum(len(i) for i in fed.data.train_indices)
    print(f"MNIST, {fed.num_clients} clients, {samples} training samples, MCLR (d={fed.dim}), batch 32, "
          f"device {fed.device}, {torch.get_num_threads()} threads")
    centralised_epoch(fed, 0), federated_round(fed, 0)  # warm-up
    a, b = [], []
    for repeat in range(args.repeats):
        a.append(centralised_epoch(fed, repeat))
        b.append(federated_round(fed, repeat))
    print(f"(a) centralised epoch: median {statistics.median(a):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in a)})")
    print(f"(b) FedAvg round:      median {statistics.median(b):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in b)})")
    print(f"overhead_ratio={statistics.median(b) / statistics.median(a):.3f}")


if __name__ == "__main__":
    main()
