"""Wall time of the quickstart notebook's grid computed by the ``serial`` and the ``ray`` executors.

Builds the grid of a quickstart profile exactly as notebooks/quickstart.ipynb does (``ci``: real MNIST,
100 clients, 10 rounds, 3 methods × 3 shard settings × 1 seed = 9 runs), computes it once serially and once
on a local Ray instance with ``--workers`` CPUs (one task per run, one torch thread per worker), each into
a fresh temporary result store, and prints each executor's wall time, the serial time per run, Ray's
start-up (not part of its grid time), whether both stored byte-identical records (they do when the
serial runs also use one thread, e.g. OMP_NUM_THREADS=1) and the load average at the end (other jobs on
the cores skew both times). The last line is ``ray_over_serial=<ratio>``.
Needs MNIST under the data root (GFLKIT_DATA or --data-root) and Ray (``pip install -e .[ray]``).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from gflkit.executors import run_grid
from gflkit.experiment import RunConfig
from gflkit.papers.quickstart import PROFILES
from gflkit.profiles import resolve_profile
from gflkit.results import ResultStore
from gflkit.runtime import Runtime


def quickstart_grid(profile: str) -> list[RunConfig]:
    """The quickstart notebook's grid of ``profile``: shards × methods × seeds."""
    params = resolve_profile(PROFILES, profile)
    return [params.config(method=method, partition_options={"shards_per_client": q}, seed=seed)
            for q in params.sweep["shards"] for method in params.sweep["methods"] for seed in params.seeds]


def timed(action: Callable[[], object]) -> float:
    """Seconds ``action()`` takes."""
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def stored_records(root: Path) -> dict[str, bytes]:
    """Every stored ``records.csv`` under ``root``, by run key."""
    return {path.parent.name: path.read_bytes() for path in sorted(root.glob("*/records.csv"))}


def main() -> None:
    """Time the grid under both executors and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="ci", help="a quickstart profile (default: ci)")
    parser.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance (default: 2)")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()

    import ray

    grid = quickstart_grid(args.profile)
    with tempfile.TemporaryDirectory() as folder:
        stores = {name: ResultStore(Path(folder) / name) for name in ("serial", "ray")}
        runtime = Runtime(data_root=args.data_root, device=args.device)
        serial_s = timed(lambda: run_grid(grid, runtime.replace(store=stores["serial"])))
        start_s = timed(lambda: ray.init(num_cpus=args.workers, include_dashboard=False))
        ray_s = timed(lambda: run_grid(grid, runtime.replace(store=stores["ray"], executor="ray")))
        ray.shutdown()
        same = stored_records(stores["serial"].root) == stored_records(stores["ray"].root)
    print(f"quickstart {args.profile}: {len(grid)} runs on {args.device}")
    print(f"serial_s={serial_s:.1f} serial_per_run_s={serial_s / len(grid):.1f}")
    print(f"ray_workers={args.workers} ray_start_s={start_s:.1f} ray_s={ray_s:.1f}")
    print(f"identical_records={same} cpus={os.cpu_count()} load_average_1min={os.getloadavg()[0]:.2f}")
    print(f"ray_over_serial={ray_s / serial_s:.3f}")


if __name__ == "__main__":
    main()
