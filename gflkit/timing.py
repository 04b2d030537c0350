"""Wall-clock cost of a method's round on this machine: its clients' local training and its server's
aggregation, measured apart (SFL's Table 5, the benchmark notebook's cost columns).

Times depend on the machine and on what else runs on it: compare methods measured side by side in one
process, as ratios, and quote medians (:func:`time_rounds` takes the median over rounds after a warm-up;
:func:`time_interleaved` times several configs in passes over all of them and takes the median over the
passes).
"""
from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from gflkit.runtime import Runtime


def time_each_round(config: Any, runtime: "Runtime | None" = None, rounds: int = 3) -> list[dict[str, float]]:
    """Wall-clock seconds of each round's local training (all clients, one after the other) and of the server's
    aggregation for run ``config`` on ``runtime`` (its data root and device): one dict per round, ``rounds``
    rounds measured here after one warm-up round. On a GPU the clock waits for the device before it reads."""
    import torch

    from gflkit.algorithms import build_algorithm
    from gflkit.experiment import build_federation

    fed = build_federation(config, runtime)
    algorithm = build_algorithm(config.method, **config.method_options)
    algorithm.setup(fed)
    index = torch.arange(fed.num_clients, device=fed.device)

    def clock() -> float:
        if fed.device.type == "cuda":
            torch.cuda.synchronize(fed.device)
        return time.perf_counter()

    measured = []
    for round in range(1, rounds + 2):  # round 1 warms up (and has no SFL regulariser): not counted
        start = clock()
        updates = torch.stack([algorithm.client_update(fed, k, round).vector for k in range(fed.num_clients)])
        middle = clock()
        algorithm.aggregate(fed, index, fed.upload(index, updates, round), round)
        end = clock()
        if round > 1:
            measured.append({"training_s": middle - start, "aggregation_s": end - middle})
    return measured


def time_rounds(config: Any, runtime: "Runtime | None" = None, rounds: int = 3) -> dict[str, float]:
    """:func:`time_each_round`'s seconds of local training and of aggregation, each the median over the rounds."""
    measured = time_each_round(config, runtime, rounds)
    return {key: statistics.median(timed[key] for timed in measured) for key in ("training_s", "aggregation_s")}


def time_interleaved(configs: Sequence[Any], runtime: "Runtime | None" = None, rounds: int = 2,
                     passes: int = 3) -> list[dict[str, float]]:
    """:func:`time_rounds` for every config in ``passes`` passes over all of them, each config's seconds the
    median over its passes (returned in the order of ``configs``). Each pass takes every config once,
    starting one config later than the pass before, so neither a slow spell of the machine nor a place
    in the order falls on the same configs every time: the ratios between configs are what a
    side-by-side comparison needs. Raises ``ValueError`` for ``passes`` or ``rounds`` below 1."""
    for name, value in (("passes", passes), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    configs = list(configs)
    measured: list[list[dict[str, float]]] = [[] for _ in configs]
    for shift in range(passes):
        for index in [(shift + offset) % len(configs) for offset in range(len(configs))]:
            measured[index].append(time_rounds(configs[index], runtime, rounds))
    return [{key: statistics.median(t[key] for t in times) for key in times[0]} for times in measured]
