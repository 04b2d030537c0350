"""SFL's `paper` profile rows (Tables 3 / 4, seed 0) on one lent GPU, stored as gflkit runs.

Each argument is a queue of SFL variants (``gflkit.papers.sfl.VARIANTS``), each optionally with a seed
(``sfl@1``; the profile's first seed otherwise), run in order by its own process;
queues run concurrently on the one GPU. Every finished run goes into a :class:`~gflkit.results.ResultStore`
(stored under device ``cuda``), and after each run the finished runs (checkpoints and locks left out) are
packed into ``$OUT/runs_<queue>.tar.gz``, with one line per run in ``$OUT/summary.csv`` and
``$OUT/log.txt``: whatever finished before the machine's time ran out comes back. A run is not started
that cannot end before ``DEADLINE_S`` (seconds since the script began), judged by the longest run so far.

Unpack the archives into ``results/<folder>/`` and run the SFL notebook over them with
``device="cuda"`` on any machine: stored runs are only read (their artifacts load onto the CPU).

Usage, from the project root on the GPU machine (the MNIST files copied to ``.devdata/mnist``)::

    GFLKIT_DATA=$PWD/.devdata DEADLINE_S=485 python3 benchmarks/sfl_paper_gpu.py sfl,sfl_lg,sfl_per
    GFLKIT_DATA=$PWD/.devdata DEADLINE_S=560 python3 benchmarks/sfl_paper_gpu.py fedatt,sfl@1,sfl_star@1
    SMALL=1 DEVICE=cpu python benchmarks/sfl_paper_gpu.py sfl_star fedavg     # the dry run, on a CPU

Measured (H100, docs/results.md): two queues side by side took 235-250 s a run against 133-138 s for one
run alone, so concurrency gains 6-10 % throughput; plan on one queue.
"""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import tarfile
import time
import traceback

START = float(os.environ.setdefault("START_T", str(time.time())))  # shared with the queue processes
DEADLINE = float(os.environ.get("DEADLINE_S", "520"))
OUT = os.environ.get("OUT", "/tmp/gpu-out")
STORE = os.environ.get("STORE", "/tmp/sfl-store")
SMALL = os.environ.get("SMALL") == "1"
#: The dry run's changes to each config: 10 clients, 3,000 samples, 2 rounds of one local epoch.
SHRINK = {"num_clients": 10, "max_samples": 3000, "rounds": 2, "local_epochs": 1} if SMALL else {}

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a GPU machine has no install

import torch  # noqa: E402  (after the environment above)

from gflkit import metrics  # noqa: E402
from gflkit.experiment import run  # noqa: E402
from gflkit.papers import sfl  # noqa: E402
from gflkit.profiles import Profile, resolve_profile  # noqa: E402
from gflkit.results import MANIFEST, ResultStore  # noqa: E402
from gflkit.runtime import Runtime  # noqa: E402

DEVICE = os.environ.get("DEVICE", "cuda" if torch.cuda.is_available() else "cpu")


def log(*parts: object) -> None:
    """Print a line stamped with the seconds since the start and the process, and append it to the log."""
    line = f"[{time.time() - START:6.1f}s pid {os.getpid()}] " + " ".join(map(str, parts))
    print(line, flush=True)
    with open(os.path.join(OUT, "log.txt"), "a") as handle:
        print(line, file=handle)


def pack(name: str) -> None:
    """Write the store's finished runs (those with a manifest) to ``$OUT/<name>.tar.gz``, atomically."""
    partial = os.path.join(OUT, f".{name}.partial")
    skip = ("checkpoint", "lock")
    with tarfile.open(partial, "w:gz") as tar:
        for key in sorted(os.listdir(STORE)):
            if os.path.exists(os.path.join(STORE, key, MANIFEST)):
                tar.add(os.path.join(STORE, key), arcname=f"runs/{key}",
                        filter=lambda member: None if os.path.basename(member.name).startswith(skip) else member)
    os.replace(partial, os.path.join(OUT, f"{name}.tar.gz"))


def synchronize() -> None:
    """Wait for the GPU's queued work, so that the clock reads the run's real end."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def parse_entry(entry: str, params: Profile) -> tuple[str, int]:
    """A queue entry ``label`` or ``label@seed`` as (label, seed); the profile's first seed by default."""
    label, _, seed = entry.partition("@")
    if seed and not seed.isdigit():
        sys.exit(f"queue entry {entry!r}: the seed after '@' must be a non-negative integer, e.g. sfl@1")
    return label, int(seed) if seed else params.seeds[0]


def run_variant(label: str, seed: int, params: Profile, store: ResultStore) -> float:
    """Run (or read back) one variant, log and record its final mean accuracy; its wall time in seconds."""
    config = sfl.variant_config(params, label, seed, **SHRINK)
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()  # this run's peak, not the queue's
    synchronize()
    began = time.time()
    records = run(config, Runtime(data_root=os.environ.get("GFLKIT_DATA"), device=DEVICE, store=store), progress=False)
    synchronize()
    wall = time.time() - began
    memory = torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else 0.0
    accuracy = metrics.final_summary(records)["mean"].iloc[0]  # mean client accuracy at the last round
    row = dict(variant=label, seed=seed, accuracy=accuracy, rounds=int(records["round"].max()),
               wall_s=round(wall, 1), peak_gpu_gib=round(memory, 1),
               device=torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu",
               local_training=",".join(sorted(set(map(str, records["local_training"])))),
               curve=" ".join(f"{v:.2f}" for v in records.groupby("round")["accuracy"].mean()))
    log(", ".join(f"{k}={v}" for k, v in row.items() if k != "curve"))
    path = os.path.join(OUT, "summary.csv")
    new = not os.path.exists(path)
    with open(path, "a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)
    return wall


def run_queue(entries: list[str]) -> None:
    """Run the queue's ``label[@seed]`` entries in order, skipping those that cannot finish before the deadline."""
    params = resolve_profile(sfl.PROFILES, "paper")
    store, longest, name = ResultStore(STORE), 0.0, "runs_" + "_".join(e.replace("@", "-") for e in entries)
    for entry in entries:
        label, seed = parse_entry(entry, params)
        left = DEADLINE - (time.time() - START)
        if left < 1.1 * longest + 5:
            log(f"skip {entry}: {left:.0f} s left, the longest run so far took {longest:.0f} s")
            continue
        try:
            longest = max(longest, run_variant(label, seed, params, store))
            pack(name)
        except Exception:  # one failed variant must not cost the others their time
            log(f"{entry} failed:\n" + traceback.format_exc())


def main(queues: list[str]) -> None:
    """Check every queue's labels, then run each queue in its own process, logging GPU use meanwhile."""
    if not queues:
        sys.exit(__doc__)
    os.makedirs(OUT, exist_ok=True)
    params = resolve_profile(sfl.PROFILES, "paper")
    labels = {parse_entry(entry, params)[0] for queue in queues for entry in queue.split(",")}
    unknown = sorted(labels - set(sfl.VARIANTS))
    if unknown:
        sys.exit(f"unknown SFL variant(s) {unknown}; choose from {sorted(sfl.VARIANTS)}")
    log("torch", torch.__version__, DEVICE, torch.cuda.get_device_name(0) if DEVICE == "cuda" else "", "queues", queues)
    processes = [subprocess.Popen([sys.executable, __file__, "--queue", queue]) for queue in queues]
    while any(process.poll() is None for process in processes):
        if DEVICE == "cuda":
            use = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()
            log("gpu utilization, memory:", use)
        time.sleep(10)
    log("done")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--queue"]:
        run_queue(sys.argv[2].split(","))
    else:
        main(sys.argv[1:])
