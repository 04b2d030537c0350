"""Batched (vectorised) vs sequential local training: one FedAvg round over MNIST label-shard clients.

For each model (MCLR and the simple CNN) the same round — every client from the global model, one local
epoch, batch 32 — runs through the sequential loop (``local_training="sequential"``, one client after
the other through ``gflkit.training.local_sgd``) and through the batched one (``"batched"``,
``gflkit.batched``), alternately ``--repeats`` times; the speedup is the ratio of the medians.

The MCLR round is also set against its **arithmetic floor** on this machine: the round's FLOPs (forward
and backward of both linear layers over every trained sample: ``6 · (784·64 + 64·10)`` per sample)
divided by the throughput of one batched matrix product of the same shapes
(``n × 32 × 784`` by ``n × 784 × 64``), measured here — how far the batched round is from the limit.

The last line is ``speedup_mclr=<x> speedup_cnn=<y>``. Needs MNIST under the data root (GFLKIT_DATA or
--data-root).
"""
from __future__ import annotations

import statistics
import time

import torch

from common import round_benchmark_parser, timings, use_threads
from gflkit.algorithms import build_algorithm
from gflkit.engine import train_round
from gflkit.experiment import RunConfig, build_federation
from gflkit.runtime import Runtime


def federated_round(fed, mode: str, repeat: int) -> float:
    """Seconds for one FedAvg round over every client under local training ``mode``."""
    fed.trainer.mode = mode
    algorithm = build_algorithm("fedavg")
    algorithm.setup(fed)
    start = time.perf_counter()
    train_round(fed, algorithm, torch.arange(fed.num_clients), repeat + 1)
    return time.perf_counter() - start


def compare(fed, repeats: int) -> tuple[float, float]:
    """Medians (sequential, batched) of alternating repetitions, after one warm-up of each."""
    federated_round(fed, "sequential", 0), federated_round(fed, "batched", 0)
    times: dict[str, list[float]] = {"sequential": [], "batched": []}
    for repeat in range(repeats):
        for mode in times:
            times[mode].append(federated_round(fed, mode, repeat))
    for mode, runs in times.items():
        print(f"  {mode:10s} median {statistics.median(runs):.3f} s  (runs: {', '.join(f'{t:.3f}' for t in runs)})")
    return statistics.median(times["sequential"]), statistics.median(times["batched"])


def matmul_throughput(clients: int, device: torch.device, repeats: int = 20) -> float:
    """FLOP/s of a batched matrix product shaped like MCLR's first layer on one batch of every client."""
    a = torch.randn(clients, 32, 784, device=device)
    b = torch.randn(clients, 784, 64, device=device)
    return 2 * clients * 32 * 784 * 64 / statistics.median(timings(lambda: torch.bmm(a, b), repeats))


def main() -> None:
    parser = round_benchmark_parser(__doc__)
    parser.add_argument("--models", nargs="+", default=["mclr", "simple_cnn"], choices=["mclr", "simple_cnn"])
    args = parser.parse_args()
    use_threads(args.threads)
    speedups = {}
    for model in args.models:
        config = RunConfig(dataset="mnist", num_clients=args.clients, model=model,
                           partition_options={"shards_per_client": args.shards}, batch_size=32, lr=0.01)
        fed = build_federation(config, Runtime(data_root=args.data_root, device=args.device))
        samples = sum(len(i) for i in fed.data.train_indices)
        print(f"{model}: MNIST, {fed.num_clients} clients, {samples} training samples, d={fed.dim}, batch 32, "
              f"device {fed.device}, {torch.get_num_threads()} threads")
        sequential, batched = compare(fed, args.repeats)
        speedups[model] = sequential / batched
        if model == "mclr":
            flops = 6 * samples * (784 * 64 + 64 * 10)
            floor = flops / matmul_throughput(fed.num_clients, fed.device)
            print(f"  arithmetic floor: {flops / 1e9:.2f} GFLOP at the batched matmul's "
                  f"{flops / floor / 1e9:.1f} GFLOP/s = {floor:.3f} s; batched round = {batched / floor:.1f}× the floor")
    print(" ".join(f"speedup_{'cnn' if model == 'simple_cnn' else model}={speedup:.2f}" for model, speedup in speedups.items()))


if __name__ == "__main__":
    main()
