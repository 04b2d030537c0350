"""Paper-budget runs on one lent GPU, brought back as files: SFL's `paper` rows (Tables 3 / 4) as stored
gflkit runs, and cells of the benchmark's `paper` grid as per-client scores.

Each argument is a queue of comma-separated entries, run in order by its own process; queues run
concurrently on the one GPU. An entry is

- ``LABEL[@SEED]`` or ``sfl:LABEL[@SEED]``: SFL variant ``LABEL`` (``gflkit.papers.sfl.VARIANTS``) of the
  `paper` profile. The queue's finished runs (checkpoints and locks left out) are packed after each run into
  ``$OUT/runs_q<N>.tar.gz`` (N: the queue's place among the arguments): unpack it into
  ``results/<folder>/`` and run the SFL notebook over it with ``device="cuda"`` on any machine (stored runs
  are only read; their artifacts load onto the CPU).
- ``benchmark:LABEL:SETTING[@SEED]``: method ``LABEL`` (``gflkit.papers.benchmark.METHODS``) of the
  benchmark's `paper` grid in setting ``SETTING``, one of :data:`SETTING_TAGS` (``q2``, ``a0.1``, ...). After
  each run the queue's per-client scores (``benchmark.CLIENT_COLUMNS``) are rewritten to
  ``$OUT/benchmark_clients_q<N>.csv``: append them with ``benchmark.append_to_folder``.

The seed is the profile's first unless ``@SEED`` names one. Every run is also one line of
``$OUT/summary.csv`` and ``$OUT/log.txt``: whatever finished before the machine's time ran out comes back.
A run is not started that cannot end before ``DEADLINE_S`` (seconds since the script began), judged by the
queue's longest run so far.

Usage, from the project root on the GPU machine (the MNIST files copied to ``.devdata/mnist``)::

    GFLKIT_DATA=$PWD/.devdata DEADLINE_S=485 python3 benchmarks/paper_gpu.py sfl,sfl_lg,sfl_per
    GFLKIT_DATA=$PWD/.devdata DEADLINE_S=560 python3 benchmarks/paper_gpu.py lg_fedavg@1,sfl_lg@1 \\
        benchmark:fedamp:q2@1,benchmark:fedamp:q2@2
    SMALL=1 DEVICE=cpu python benchmarks/paper_gpu.py sfl_star benchmark:local:a0.1@1   # the dry run, on a CPU

Measured (H100, docs/results.md): two SFL queues side by side took 235-250 s a run against 133-138 s for
one run alone, so concurrency gains 6-10 % throughput on SFL's CNN; plan on one SFL queue. Beside one SFL
queue (H200, 2026-11-28), two benchmark queues took 45-129 s a cell (MOON, pFedGraph, FedAvg at q = 2; a CPU
core takes about 5 min) while SFL's LG-FedAvg took 156-163 s instead of 109 s; one SCAFFOLD cell had not
finished after 440 s. The benchmark's MCLR cells are launch-bound: a GPU gains only a few-fold over a core.
"""
from __future__ import annotations

import csv
import dataclasses
import os
import subprocess
import sys
import tarfile
import time
import traceback

START = float(os.environ.setdefault("START_T", str(time.time())))  # shared with the queue processes
DEADLINE = float(os.environ.get("DEADLINE_S", "520"))
OUT = os.environ.get("OUT", "/tmp/gpu-out")
STORE = os.environ.get("STORE", "/tmp/gpu-store")
SMALL = os.environ.get("SMALL") == "1"
#: The dry run's changes to each config: 10 clients, 3,000 samples, 2 rounds of one local epoch, each evaluated.
SHRINK = {"num_clients": 10, "max_samples": 3000, "rounds": 2, "local_epochs": 1, "eval_every": 1} if SMALL else {}

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a GPU machine has no install

import pandas as pd  # noqa: E402
import torch  # noqa: E402  (after the environment above)

from gflkit import metrics  # noqa: E402
from gflkit.atomic import atomic_write_text  # noqa: E402
from gflkit.experiment import run  # noqa: E402
from gflkit.papers import benchmark, sfl  # noqa: E402
from gflkit.profiles import resolve_profile  # noqa: E402
from gflkit.results import MANIFEST, ResultStore  # noqa: E402
from gflkit.runtime import Runtime  # noqa: E402

DEVICE = os.environ.get("DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
#: A short tag per benchmark setting, for queue entries (a setting's name holds spaces and commas).
SETTING_TAGS = {"q2": "shards q=2", "q5": "shards q=5", "q10": "shards q=10", "a0.1": "dirichlet α=0.1",
                "a0.5": "dirichlet α=0.5", "noisy": "noisy uplink s=0.1, q=5"}
PROFILES = {"sfl": resolve_profile(sfl.PROFILES, "paper"), "benchmark": resolve_profile(benchmark.PROFILES, "paper")}


@dataclasses.dataclass(frozen=True)
class Entry:
    """One queue entry: a paper (``sfl`` or ``benchmark``), its row label, the benchmark setting, the seed."""

    paper: str
    label: str
    setting: str | None
    seed: int

    def config(self):
        """The entry's run configuration (shrunk for the dry run)."""
        if self.paper == "sfl":
            return sfl.variant_config(PROFILES["sfl"], self.label, self.seed, **SHRINK)
        return benchmark.method_config(PROFILES["benchmark"], self.label, self.setting, self.seed, **SHRINK)


def parse_entry(text: str) -> Entry:
    """An entry ``[sfl:]LABEL[@SEED]`` or ``benchmark:LABEL:TAG[@SEED]``; exits naming what is wrong."""
    spec, _, seed = text.partition("@")
    if seed and not seed.isdigit():
        sys.exit(f"queue entry {text!r}: the seed after '@' must be a non-negative integer, e.g. sfl:sfl@1")
    parts = spec.split(":")
    if len(parts) == 1:
        parts = ["sfl", *parts]
    paper, label, tag = parts[0], parts[1], parts[2] if len(parts) > 2 else None
    known = {"sfl": sfl.VARIANTS, "benchmark": benchmark.METHODS}
    if paper not in known or len(parts) != (3 if paper == "benchmark" else 2):
        sys.exit(f"queue entry {text!r}: write LABEL[@SEED] or sfl:LABEL[@SEED] for an SFL variant, "
                 f"benchmark:LABEL:SETTING[@SEED] for a benchmark cell")
    if label not in known[paper]:
        sys.exit(f"queue entry {text!r}: unknown {paper} label {label!r}; choose from {sorted(known[paper])}")
    if paper == "benchmark" and tag not in SETTING_TAGS:
        sys.exit(f"queue entry {text!r}: unknown setting {tag!r}; choose from {sorted(SETTING_TAGS)}")
    return Entry(paper, label, SETTING_TAGS.get(tag), int(seed) if seed else PROFILES[paper].seeds[0])


def log(*parts: object) -> None:
    """Print a line stamped with the seconds since the start and the process, and append it to the log."""
    line = f"[{time.time() - START:6.1f}s pid {os.getpid()}] " + " ".join(map(str, parts))
    print(line, flush=True)
    with open(os.path.join(OUT, "log.txt"), "a") as handle:
        print(line, file=handle)


def pack(store: str, name: str) -> None:
    """Write ``store``'s finished runs (those with a manifest) to ``$OUT/<name>.tar.gz``, atomically."""
    partial = os.path.join(OUT, f".{name}.partial")
    skip = ("checkpoint", "lock")
    with tarfile.open(partial, "w:gz") as tar:
        for key in sorted(os.listdir(store)):
            if os.path.exists(os.path.join(store, key, MANIFEST)):
                tar.add(os.path.join(store, key), arcname=f"runs/{key}",
                        filter=lambda member: None if os.path.basename(member.name).startswith(skip) else member)
    os.replace(partial, os.path.join(OUT, f"{name}.tar.gz"))


def synchronize() -> None:
    """Wait for the GPU's queued work, so that the clock reads the run's real end."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def run_entry(entry: Entry, store: ResultStore) -> tuple[pd.DataFrame, float]:
    """Run (or read back) one entry, log it and add its line to ``summary.csv``: its records and wall time."""
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()  # this run's peak, not the queue's
    synchronize()
    began = time.time()
    records = run(entry.config(), Runtime(data_root=os.environ.get("GFLKIT_DATA"), device=DEVICE, store=store),
                  progress=False)
    synchronize()
    wall = time.time() - began
    memory = torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else 0.0
    accuracy = metrics.final_summary(records)["mean"].iloc[0]  # mean client accuracy at the last round
    row = dict(paper=entry.paper, variant=entry.label, setting=entry.setting or "", seed=entry.seed,
               accuracy=accuracy, rounds=int(records["round"].max()), wall_s=round(wall, 1),
               peak_gpu_gib=round(memory, 1), device=torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu",
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
    return records, wall


def benchmark_clients(entry: Entry, records: pd.DataFrame) -> pd.DataFrame:
    """A benchmark run's per-client scores at its last round (:func:`gflkit.papers.benchmark.client_scores`)."""
    labelled = records.assign(variant=entry.label, setting=entry.setting)
    return benchmark.client_scores(benchmark.own_protocol_records(labelled))


def run_queue(index: int, entries: list[Entry]) -> None:
    """Run the queue's entries in order, skipping those that cannot finish before the deadline, and write
    what it has after each run (see the module docstring)."""
    store_path = os.path.join(STORE, f"q{index}")
    store, longest, clients = ResultStore(store_path), 0.0, []
    for entry in entries:
        left = DEADLINE - (time.time() - START)
        if left < 1.1 * longest + 5:
            log(f"skip {entry}: {left:.0f} s left, the longest run so far took {longest:.0f} s")
            continue
        try:
            records, wall = run_entry(entry, store)
            longest = max(longest, wall)
            if entry.paper == "sfl":
                pack(store_path, f"runs_q{index}")
            else:
                clients.append(benchmark_clients(entry, records))
                atomic_write_text(os.path.join(OUT, f"benchmark_clients_q{index}.csv"),
                                  pd.concat(clients).to_csv(index=False))
        except Exception:  # one failed run must not cost the others their time
            log(f"{entry} failed:\n" + traceback.format_exc())


def main(queues: list[str]) -> None:
    """Check every queue's entries, then run each queue in its own process, logging GPU use meanwhile."""
    if not queues:
        sys.exit(__doc__)
    os.makedirs(OUT, exist_ok=True)
    entries = [parse_entry(text) for queue in queues for text in queue.split(",")]  # exits on a bad one
    log("torch", torch.__version__, DEVICE, torch.cuda.get_device_name(0) if DEVICE == "cuda" else "",
        "queues", len(queues), "entries", len(entries))
    processes = [subprocess.Popen([sys.executable, __file__, "--queue", str(index), queue])
                 for index, queue in enumerate(queues)]
    while any(process.poll() is None for process in processes):
        if DEVICE == "cuda":
            use = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip()
            log("gpu utilization, memory:", use)
        time.sleep(10)
    log("done")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--queue"]:
        run_queue(int(sys.argv[2]), [parse_entry(text) for text in sys.argv[3].split(",")])
    else:
        main(sys.argv[1:])
