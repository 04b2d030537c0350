"""How long the ``gflkit`` command takes to refuse a mistake, beside the interpreter's own start-up.

Starts ``python -c pass`` and each refusal below (``python -m gflkit.cli ...``, which must exit with
status 2) as fresh processes, alternately, ``--repeats`` times, and prints the median wall time of each
with its ratio to ``python -c pass``. These mistakes are checked before torch is imported
(:mod:`gflkit.notebooks`), so a refusal costs a small multiple of the interpreter's start-up instead of
torch's import (about 7 s of CPU when the profile name was validated by importing the paper module).
Needs no data and writes nothing. The last line is ``refusal_over_python=<the largest ratio>``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REFUSALS = {
    "unknown profile": ["notebook", "quickstart", "--profile", "turbo"],
    "unknown notebook": ["notebook", "nosuch"],
    "bad parameter": ["notebook", "quickstart", "-p", "rounds=1"],
    "precompute, unknown profile": ["precompute", "fedska", "--profile", "turbo"],
}


def wall_time(argv: list[str], expected_status: int) -> float:
    """Seconds from starting ``argv`` to its exit; raises if it exits with another status."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != expected_status:
        raise RuntimeError(f"{argv} exited with {done.returncode}, not {expected_status}: {done.stderr.strip()}")
    return elapsed


def measure(repeats: int, results: Path) -> dict[str, list[float]]:
    """Wall times of ``python -c pass`` and of every refusal, interleaved so that load changes hit all."""
    commands = {"python -c pass": ([sys.executable, "-c", "pass"], 0)}
    commands.update({label: ([sys.executable, "-m", "gflkit.cli", *argv, "--results", str(results)], 2)
                     for label, argv in REFUSALS.items()})
    times: dict[str, list[float]] = {label: [] for label in commands}
    for _ in range(repeats):
        for label, (argv, status) in commands.items():
            times[label].append(wall_time(argv, status))
    return times


def main() -> None:
    """Measure and print the medians and their ratios to ``python -c pass``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "results"
        times = measure(args.repeats, results)
        assert not results.exists(), "a refusal wrote into the results folder"
    medians = {label: statistics.median(values) for label, values in times.items()}
    baseline = medians.pop("python -c pass")
    print(f"{args.repeats} repeats, cpus={os.cpu_count()} load_average_1min={os.getloadavg()[0]:.2f}")
    print(f"{'python -c pass':>28}: median {baseline:.3f} s")
    for label, median in medians.items():
        print(f"{label:>28}: median {median:.3f} s  ({median / baseline:.1f}x python -c pass)")
    print(f"refusal_over_python={max(medians.values()) / baseline:.1f}")


if __name__ == "__main__":
    main()
