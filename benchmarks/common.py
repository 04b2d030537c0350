"""What the benchmarks share: the MNIST round benchmarks' command-line options, timing a call repeatedly."""
from __future__ import annotations

import argparse
import time
from typing import Callable

import torch


def round_benchmark_parser(description: str) -> argparse.ArgumentParser:
    """A parser with the options of a benchmark over one round of MNIST label-shard clients: data root,
    number of clients and shards, repetitions, device and torch threads."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    return parser


def timings(call: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of ``repeats`` calls of ``call``, each timed alone, after one untimed call."""
    call()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        runs.append(time.perf_counter() - start)
    return runs


def use_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` when a count was given."""
    if threads:
        torch.set_num_threads(threads)
