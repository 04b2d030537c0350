"""What the FedSKA ``paper`` profile's MNIST runs cost on this machine, sequential vs batched clients.

For every method of Table 1's MNIST block (100 clients, MCLR, label shards), ``--rounds`` rounds of the
profile's own run (scoring every 5th round, as the profile does) are timed once with the sequential
local loop and once with ``local_training="auto"`` (batched wherever it applies), alternately. A run's
cost is extrapolated to the profile's 200 rounds; the profile's whole MNIST grid (every section's
distinct runs, ``gflkit.papers.fedska.grids``) is then costed by adding each run's method's estimate.

The last line is ``paper_profile_hours_sequential=<h> paper_profile_hours_auto=<h>`` (one process; on
2 cores two workers halve it). Needs MNIST under the data root (GFLKIT_DATA or --data-root).
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from collections import Counter

import torch

from gflkit.algorithms import build_algorithm
from gflkit.engine import run_rounds
from gflkit.experiment import build_federation
from gflkit.papers import fedska
from gflkit.profiles import resolve_profile
from gflkit.results import config_key
from gflkit.runtime import Runtime


def seconds_per_round(config, mode: str, data_root: str | None) -> float:
    """Mean seconds of one round of ``config`` (its own evaluation schedule) under local training ``mode``."""
    fed = build_federation(config, Runtime(data_root=data_root, device="cpu", local_training=mode))
    algorithm = build_algorithm(config.method, **config.method_options)
    start = time.perf_counter()
    records = run_rounds(fed, algorithm, config.schedule(0), progress=False)
    elapsed = time.perf_counter() - start
    print(f"  {config.method:8s} {mode:10s} {elapsed / config.rounds:6.3f} s/round  "
          f"(paths: {', '.join(sorted(set(records['local_training'])))})", flush=True)
    return elapsed / config.rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--rounds", type=int, default=10, help="rounds timed per method (a multiple of 5)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    params = resolve_profile(fedska.PROFILES, "paper")
    grid = {config_key(run.config.to_dict()): run.config for runs in fedska.grids(params).values() for run in runs}
    runs = Counter(config.method for config in grid.values())
    total_rounds = {config.rounds for config in grid.values()}
    print(f"FedSKA paper profile, MNIST: {len(grid)} distinct runs of {sorted(total_rounds)} rounds "
          f"({dict(runs)}); {torch.get_num_threads()} threads")
    hours = {"sequential": 0.0, "auto": 0.0}
    for method in runs:
        config = dataclasses.replace(fedska.shards_config(params, method, 2, 0), rounds=args.rounds)
        for mode in hours:
            per_run = seconds_per_round(config, mode, args.data_root) * max(total_rounds)
            hours[mode] += runs[method] * per_run / 3600
    print(f"paper_profile_hours_sequential={hours['sequential']:.1f} paper_profile_hours_auto={hours['auto']:.1f}")


if __name__ == "__main__":
    main()
