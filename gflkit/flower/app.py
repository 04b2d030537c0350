"""The Flower app ``flwr run`` starts: a ServerApp and a ClientApp that read the run from Flower's context.

The template app project ``flower_app/`` points its ``[tool.flwr.app.components]`` here::

    serverapp = "gflkit.flower.app:server_app"
    clientapp = "gflkit.flower.app:client_app"

* :data:`server_app` builds a :class:`~gflkit.flower.strategy.GflkitStrategy` inside its main from
  ``context.run_config`` (:func:`~gflkit.flower.run_config.settings_from_run_config`: the
  :class:`~gflkit.experiment.RunConfig` fields, the app's ``device``, ``round-timeout``,
  ``connect-timeout``, ``records`` and ``timing``), runs it, logs each evaluated round's means and writes
  the run's records (the engine's format, one row per round and client) to the file ``records`` names,
  and each round's training seconds to the file ``timing`` names, both inside the app's results folder
  (:func:`~gflkit.flower.run_config.results_folder`);
* :data:`client_app` is :func:`~gflkit.flower.client.make_client_app` without a fixed config: each node
  reads the run from its context and its client from ``node_config`` (``partition-id``,
  ``num-partitions``, ``data-root``).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from gflkit.atomic import atomic_write
from gflkit.flower.client import make_client_app
from gflkit.flower.run_config import output_path, results_folder, settings_from_run_config
from gflkit.flower.strategy import LOG, GflkitStrategy, run_strategy

server_app = ServerApp()
client_app = make_client_app()


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """The run of ``context.run_config`` as a :class:`~gflkit.flower.strategy.GflkitStrategy`."""
    settings = settings_from_run_config(context.run_config)
    strategy = GflkitStrategy(settings.config, settings.device, timeout=settings.round_timeout,
                              connect_timeout=settings.connect_timeout)
    run_strategy(strategy, grid)
    folder = results_folder()
    if settings.records:
        write_csv(strategy.records(), output_path("records", settings.records, folder))
    if settings.timing:
        write_csv(pd.DataFrame({"round": list(strategy.train_seconds),
                                "train_seconds": list(strategy.train_seconds.values())}),
                  output_path("timing", settings.timing, folder))


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """``frame`` as a CSV at ``path`` (written whole or not at all); says where in the server's log."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path, "w") as file:
        frame.to_csv(file, index=False)
    LOG.info("gflkit wrote %s", path)


__all__ = ["client_app", "server_app", "write_csv"]
