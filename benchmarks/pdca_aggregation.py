"""Server time of one JGESR aggregation: K = 20 clients, d = 10^5 parameters, on CPU (target < 1 s).

The received rows are a realistic federated state: four groups of clients whose models differ by a few
units in norm (the scale of trained simple-CNN models), uploaded through a channel at noise scale
s = 0.2. Timed side by side in one run, alternately, ``--repeats`` times after a warm-up:

* ``fedavg``: the weighted mean of the rows (the cost floor of any aggregation);
* ``pdca``: :func:`gflkit.graphs.jgesr.restore` with PDCA (Algorithm 1, the paper's defaults);
* ``two_step``: the same problem by alternating graph learning and graph filtering;
* ``pdca_missing``: PDCA with 5 % of the entries lost (``--missing``), solved on the full ``K × d`` matrix
  (minutes on a CPU: timed once, after the others, and also reported per iteration).

Prints the median seconds, iterations and whether ε was met for each, then ratios to FedAvg; the last
line is ``pdca_seconds=<median>``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from gflkit.graphs.jgesr import JGESRParams, Restoration, restore


def federated_rows(num_clients: int, dim: int, noise: float, seed: int = 0) -> torch.Tensor:
    """Rows around four group centres, plus channel noise of scale ``noise`` times the mean |entry|."""
    gen = torch.Generator().manual_seed(seed)
    initial = 0.05 * torch.randn(dim, generator=gen)
    centres = initial + 0.01 * torch.randn(4, dim, generator=gen)
    rows = centres[torch.arange(num_clients) % 4] + 0.002 * torch.randn(num_clients, dim, generator=gen)
    return rows + noise * float(initial.abs().mean()) * torch.randn(num_clients, dim, generator=gen)


def timed(solve: Callable[[], Restoration | torch.Tensor]) -> tuple[float, Restoration | torch.Tensor]:
    """Seconds taken by ``solve()`` and its result."""
    start = time.perf_counter()
    result = solve()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--dim", type=int, default=100_000)
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--missing", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    received = federated_rows(args.clients, args.dim, args.noise)
    weights = torch.ones(args.clients)
    mask = torch.rand(received.shape, generator=torch.Generator().manual_seed(1)) >= args.missing
    params = JGESRParams()
    solvers = {
        "fedavg": lambda: (weights / weights.sum()) @ received,
        "pdca": lambda: restore(received, weights, None, params, "pdca"),
        "two_step": lambda: restore(received, weights, None, params, "two_step"),
    }
    for solve in solvers.values():  # warm-up
        solve()
    seconds: dict[str, list[float]] = {name: [] for name in solvers}
    outcome: dict[str, Restoration | torch.Tensor] = {}
    for _ in range(args.repeats):
        for name, solve in solvers.items():
            elapsed, outcome[name] = timed(solve)
            seconds[name].append(elapsed)
    if args.missing > 0:
        elapsed, outcome["pdca_missing"] = timed(lambda: restore(received * mask, weights, mask, params, "pdca"))
        seconds["pdca_missing"] = [elapsed]

    print(f"K = {args.clients}, d = {args.dim}, s = {args.noise}, {args.repeats} repeats, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        result = outcome[name]
        detail = ("" if isinstance(result, torch.Tensor)
                  else f"  iterations={result.iterations} converged={result.converged}")
        print(f"{name:>13}: median {median:.4f} s{detail}")
    for name in [name for name in medians if name != "fedavg"]:
        print(f"{name}/fedavg = {medians[name] / medians['fedavg']:.1f}")
    if "pdca_missing" in outcome:
        per_iteration = medians["pdca_missing"] / max(1, outcome["pdca_missing"].iterations)
        print(f"pdca_missing: {1000 * per_iteration:.1f} ms per iteration on the full K × d matrix")
    print(f"pdca_seconds={medians['pdca']:.4f}")


if __name__ == "__main__":
    main()
