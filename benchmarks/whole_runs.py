"""Whole runs against their arithmetic floor, and against another version of the code in the same run.

Four runs the verdicts spend their CPU time on, each on one thread:

* ``fedavg_q2`` and ``fedavg_a05``: FedAvg in the benchmark paper's ``shards q=2`` and ``dirichlet α=0.5``
  settings (MNIST, 100 clients, MCLR, one local epoch, batch 32: batched local training);
* ``fedska_a05``: FedSKA in ``dirichlet α=0.5`` (its server's encoder epochs included);
* ``jgesr_pdca``: JGESR's PDCA in the ``paper1`` profile at noise scale s = 0.1 (20 clients, SimpleCNN, five
  local epochs: sequential local training on a CPU).

Each case runs in a fresh process: the profile's own run (its evaluation schedule included) for ``--rounds``
rounds, timed in CPU seconds per round after the data are loaded (and, where rounds are short, after one untimed
round, :data:`WARM_UP`). Its **floor** is the arithmetic of the
round's local training at this machine's matrix-multiply rate: three times the model's forward FLOPs per
sample (forward plus a backward of twice the forward, counted by ``torch.utils.flop_counter`` on one sample)
times the samples the round trains, divided by the FLOP/s of a 1024 × 1024 single-thread ``torch.mm`` measured
in the same process before and after the run (the fastest of 20 products each time; ``× floor`` is the median
of each run's own ratio). Server-side work (aggregation, FedSKA's encoder, PDCA) is not in the floor.

With ``--baseline REV`` every case also runs on the code of git revision ``REV`` (``git archive`` into a
temporary folder, put first on ``PYTHONPATH``), the two versions alternating, so the ratio of their costs is
measured side by side. The table also prints what one whole run of the profile (all its rounds, one seed) costs
at the measured rate, the estimate to plan a grid with. The last line is ``<case>_floor_ratio=<x>`` for every case and, with a baseline,
``<case>_cost_ratio=<this code / baseline>``. Needs MNIST under the data root (GFLKIT_DATA or --data-root).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: case → rounds timed by default (a multiple of the run's evaluation interval where it has one)
CASES = {"fedavg_q2": 10, "fedavg_a05": 10, "fedska_a05": 5, "jgesr_pdca": 2}
#: cases whose rounds are short enough that a process's one-off start (first calls, first allocations), which
#: a whole run spreads over all its rounds, would weigh on a few timed ones: one untimed round runs first
WARM_UP = ("fedavg_q2", "fedavg_a05", "fedska_a05")
#: case → what it runs, for the table
RUNS = {"fedavg_q2": "FedAvg, benchmark shards q=2", "fedavg_a05": "FedAvg, benchmark dirichlet α=0.5",
        "fedska_a05": "FedSKA, benchmark dirichlet α=0.5", "jgesr_pdca": "PDCA, JGESR paper1, s = 0.1"}


def case_config(case: str):
    """The ``RunConfig`` of ``case`` (seed 0), read from the paper modules of the code under test."""
    from gflkit.profiles import resolve_profile
    if case == "jgesr_pdca":
        from gflkit.papers import jgesr
        return jgesr.channel_config(resolve_profile(jgesr.PROFILES, "paper1"), "pdca", 0.1, 0)
    from gflkit.papers import benchmark
    method, setting = {"fedavg_q2": ("fedavg", "shards q=2"), "fedavg_a05": ("fedavg", "dirichlet α=0.5"),
                       "fedska_a05": ("fedska", "dirichlet α=0.5")}[case]
    return benchmark.method_config(resolve_profile(benchmark.PROFILES, "paper1"), method, setting, 0)


def matmul_rate(size: int = 1024, repeats: int = 20) -> float:
    """FLOP/s of one ``size × size`` float32 matrix product on this thread: the fastest of ``repeats``, the
    machine's rate when nothing else slows it."""
    import torch
    from common import timings
    a, b = torch.randn(size, size), torch.randn(size, size)
    return 2 * size**3 / min(timings(lambda: torch.mm(a, b), repeats))


def training_flops(fed, config) -> float:
    """The floor's FLOPs of one round: 3 × forward FLOPs per sample × the samples the round's clients train."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        fed.flat.module(fed.data.x[:1])
    per_round = config.clients_per_round or fed.num_clients
    samples = sum(len(indices) for indices in fed.data.train_indices) * per_round / fed.num_clients
    return 3 * counter.get_total_flops() * samples * config.local_epochs


def measure_case(case: str, rounds: int, data_root: str | None) -> dict[str, float]:
    """Run ``case`` for ``rounds`` rounds in this process: CPU seconds per round, the floor, the matmul rate."""
    import torch
    torch.set_num_threads(1)
    from gflkit.algorithms import build_algorithm
    from gflkit.engine import run_rounds
    from gflkit.experiment import build_federation
    from gflkit.runtime import Runtime
    profile_run = case_config(case)
    runtime = Runtime(data_root=data_root, device="cpu")
    if case in WARM_UP:
        warm_up = dataclasses.replace(profile_run, rounds=1)
        run_rounds(build_federation(warm_up, runtime), build_algorithm(warm_up.method, **warm_up.method_options),
                   warm_up.schedule(0), progress=False)
    config = dataclasses.replace(profile_run, rounds=rounds)
    fed = build_federation(config, runtime)
    algorithm = build_algorithm(config.method, **config.method_options)
    before = matmul_rate()
    start = time.process_time()
    run_rounds(fed, algorithm, config.schedule(0), progress=False)
    seconds = (time.process_time() - start) / rounds
    rate = max(before, matmul_rate())
    return {"seconds_per_round": seconds, "floor": training_flops(fed, config) / rate, "gflops": rate / 1e9,
            "profile_rounds": profile_run.rounds}


def code_at(revision: str, into: Path) -> Path:
    """The tracked files of git ``revision`` extracted under ``into`` (what goes first on ``PYTHONPATH``)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def run_case(case: str, rounds: int, code: Path, data_root: str | None) -> dict[str, float]:
    """:func:`measure_case` in a fresh interpreter importing gflkit from ``code``."""
    env = {**os.environ, "PYTHONPATH": str(code), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, __file__, "--case", case, "--rounds", str(rounds)]
    if data_root:
        command += ["--data-root", data_root]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=code)
    if result.returncode:
        raise SystemExit(f"{case} failed on {code}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--rounds", type=int, default=None, help="rounds timed per case (default: per case)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating repetitions; medians are reported")
    parser.add_argument("--baseline", default=None, help="a git revision to time side by side (e.g. HEAD~3)")
    parser.add_argument("--csv", default=None, help="also write the table to this CSV file")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one measurement, in a child process
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure_case(args.case, args.rounds or CASES[args.case], args.data_root)))
        return
    with tempfile.TemporaryDirectory() as folder:
        versions = {"this code": ROOT}
        if args.baseline:
            versions[args.baseline] = code_at(args.baseline, Path(folder))
        costs = {(case, version): [] for case in args.cases for version in versions}
        floor_ratios = {(case, version): [] for case in args.cases for version in versions}
        profile_rounds: dict[str, int] = {}
        rates: list[float] = []
        for _ in range(args.repeats):
            for case in args.cases:
                for version, code in versions.items():
                    measured = run_case(case, args.rounds or CASES[case], code, args.data_root)
                    costs[case, version].append(measured["seconds_per_round"])
                    floor_ratios[case, version].append(measured["seconds_per_round"] / measured["floor"])
                    rates.append(measured["gflops"])
                    profile_rounds[case] = measured["profile_rounds"]
                    print(f"  {case:11s} {version:12s} {measured['seconds_per_round']:7.3f} CPU-s/round, floor "
                          f"{measured['floor']:.3f} s at {measured['gflops']:.0f} GFLOP/s", flush=True)
    summary, rows = [], []
    print(f"\n{'case':11s} " + " ".join(f"{v[:12]:>12s} {'× floor':>8s}" for v in versions)
          + ("  this/baseline" if args.baseline else "") + "  one whole run (this code)")
    for case in args.cases:
        cost = {version: statistics.median(costs[case, version]) for version in versions}
        ratio_to_floor = {version: statistics.median(floor_ratios[case, version]) for version in versions}
        print(f"{case:11s} " + " ".join(f"{cost[v]:12.3f} {ratio_to_floor[v]:8.2f}" for v in versions)
              + (f"  {cost['this code'] / cost[args.baseline]:13.2f}" if args.baseline else "")
              + f"  {cost['this code'] * profile_rounds[case] / 60:6.1f} CPU-min ({profile_rounds[case]} rounds)")
        summary.append(f"{case}_floor_ratio={ratio_to_floor['this code']:.2f}")
        rows.append({"case": case, "run": RUNS[case], "cpu_s_per_round": cost["this code"],
                     "times_floor": ratio_to_floor["this code"],
                     "whole_run_cpu_min": cost["this code"] * profile_rounds[case] / 60, "rounds": profile_rounds[case]})
        if args.baseline:
            rows[-1].update({"baseline": args.baseline, "baseline_cpu_s_per_round": cost[args.baseline],
                             "baseline_times_floor": ratio_to_floor[args.baseline],
                             "cost_ratio": cost["this code"] / cost[args.baseline]})
        if args.baseline:
            summary.append(f"{case}_cost_ratio={cost['this code'] / cost[args.baseline]:.2f}")
    print(f"single-thread matmul: {statistics.median(rates):.0f} GFLOP/s (median over the runs)")
    if args.csv:
        write_table(rows, statistics.median(rates), args.csv)
    print(" ".join(summary))


def write_table(rows: list[dict], gflops: float, path: str) -> None:
    """The summary rows as a CSV (numbers rounded as printed), with the machine's matmul rate on every row."""
    import pandas as pd
    from gflkit.atomic import atomic_write_text
    frame = pd.DataFrame(rows).assign(matmul_gflops=gflops)
    frame = frame.round({"cpu_s_per_round": 3, "baseline_cpu_s_per_round": 3, "times_floor": 2,
                         "baseline_times_floor": 2, "cost_ratio": 2, "whole_run_cpu_min": 1, "matmul_gflops": 0})
    atomic_write_text(path, frame.to_csv(index=False))


if __name__ == "__main__":
    main()
