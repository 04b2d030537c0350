"""Flower's simulation runtime in this process: no Ray, no subprocesses.

``flwr.simulation.run_simulation`` (and ``flwr run`` on a local federation) execute ClientApps through
Flower's Simulation Runtime, whose only backend in flwr 1.42 is Ray: it starts a Ray cluster (GCS,
raylet, one worker process per actor) before the first message — seconds of start-up and several
processes, too much for CI. :func:`run_inprocess` runs the *same* runtime with the backend swapped:

* the ServerApp runs in a thread against Flower's :class:`~flwr.superlink.grid.InMemoryGrid` over an
  in-memory ``LinkState`` (the SuperLink's message store), exactly as ``run_simulation`` sets it up;
* the SuperNodes are registered in that ``LinkState`` with ``partition-id`` ``0 … K-1`` and their
  ``Context`` objects are kept by Flower's own stores (``DeprecatedRunInfoStore``), which hand each
  ClientApp call the node's context and store it back after the call;
* Flower's runtime loop (``vce_api.run_api``: message queues, worker threads, error replies) drives an
  :class:`InProcessBackend`, which calls the ClientApp in this process where the Ray backend would call
  it in an actor — one message at a time, in the order the runtime pulls them.

These are Flower internals (verified on the flwr versions the ``flower`` extra allows); this module is
the only one of :mod:`gflkit.flower` that uses them, it is imported on first use, and on a flwr without
them it fails in one line pointing to ``flwr run``. The ServerApp and ClientApp are plain Flower apps:
``tests/test_flower_app.py`` runs them with ``flwr run`` on Flower's simulation runtime (Ray) and on a
SuperLink with SuperNodes.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import pandas as pd
from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp

try:  # Flower internals: the in-process runtime only (the apps use Flower's public API alone)
    from flwr.clientapp.client_app import ClientAppException
    from flwr.common.constant import RUN_ID_NUM_BYTES, SUPERLINK_NODE_ID, TASK_ID_NUM_BYTES
    from flwr.proto.task_pb2 import Task  # pylint: disable=no-name-in-module
    from flwr.server.run_serverapp import run as run_serverapp
    from flwr.server.superlink.fleet.vce.backend import Backend
    from flwr.server.superlink.fleet.vce.metrics import VceMetrics
    from flwr.server.superlink.fleet.vce.vce_api import _register_node_info_stores, _register_nodes, run_api
    from flwr.server.superlink.linkstate import LinkStateFactory
    from flwr.server.superlink.linkstate.in_memory_linkstate import RunRecord
    from flwr.server.superlink.linkstate.utils import generate_rand_int_from_bytes
    from flwr.supercore.constant import FLWR_IN_MEMORY_DB_NAME, NOOP_FEDERATION_ID
    from flwr.supercore.object_store import ObjectStoreFactory
    from flwr.supercore.run import Run
    from flwr.supercore.task_identity import TaskIdentity
    from flwr.superlink.federation import NoOpFederationManager
    from flwr.superlink.grid import InMemoryGrid
except ImportError as error:  # pragma: no cover - depends on the installed flwr
    import flwr

    raise ImportError(f"gflkit.flower.simulation (the in-process test helper) needs Flower internals that flwr "
                      f"{flwr.__version__} does not have ({error.name}); run the app with `flwr run` instead "
                      f"(README, \"gflkit in Flower\")") from None
from torch import Tensor

from gflkit.experiment import RunConfig
from gflkit.flower.client import STATE, make_client_app
from gflkit.flower.methods import OWN_ROW
from gflkit.flower.replica import cached_node_replica, clear_replicas, from_record
from gflkit.flower.strategy import GflkitStrategy, make_server_app
from gflkit.runtime import Runtime
from gflkit.threads import limit_threads

ClientAppSource = ClientApp | Callable[[], ClientApp]


class InProcessBackend(Backend):
    """A Simulation Runtime backend that runs the ClientApp in this process (one message at a time).

    ``app`` is the ClientApp or a factory called for every message. With ``fresh_clients`` every message
    also starts from an empty process-level cache of the run (:func:`~gflkit.flower.replica.clear_replicas`):
    what a client keeps then survives only in its ``Context``, as when Flower starts a new ClientApp
    process for each message.
    """

    def __init__(self, app: ClientAppSource, fresh_clients: bool = False):
        super().__init__({})
        self.app = app
        self.fresh_clients = fresh_clients

    def build(self, app_fn: Callable[[], ClientApp]) -> None:
        """Nothing to start: the ClientApp runs in this process."""

    @property
    def num_workers(self) -> int:
        """One worker — messages are processed one after another."""
        return 1

    def is_worker_idle(self) -> bool:
        """Always ready."""
        return True

    def terminate(self) -> None:
        """Nothing to stop."""

    def process_message(self, message: Message, context: Context) -> tuple[Message, Context]:
        """Run the ClientApp on ``message`` with the node's ``context``; returns the reply and the context."""
        if self.fresh_clients:
            clear_replicas()
        app = self.app if isinstance(self.app, ClientApp) else self.app()
        try:
            return app(message=message, context=context), context
        except Exception as error:  # reported to the server as an error reply, as the Ray backend does
            raise ClientAppException(str(error)) from error


def run_inprocess(server_app: ServerApp, client_app: ClientAppSource, num_supernodes: int,
                  fresh_clients: bool = False, pull_interval: float = 0.01) -> dict[int, Context]:
    """Run ``server_app`` against ``num_supernodes`` nodes executing ``client_app`` with Flower's
    Simulation Runtime in this process (module docstring); returns each node's final ``Context`` by
    partition id. ``client_app`` may be a factory called for every message; ``fresh_clients`` as
    :class:`InProcessBackend`. An exception of the ServerApp is raised here."""
    state_factory = LinkStateFactory(FLWR_IN_MEMORY_DB_NAME, NoOpFederationManager(), ObjectStoreFactory())
    run = Run.create_empty(run_id=generate_rand_int_from_bytes(RUN_ID_NUM_BYTES))
    run.primary_task_id = generate_rand_int_from_bytes(TASK_ID_NUM_BYTES)
    run.federation_id = NOOP_FEDERATION_ID
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, run.run_id, SUPERLINK_NODE_ID
    state = state_factory.state()
    state.run_ids[run.run_id] = RunRecord(run=run)
    state.task_store[run.primary_task_id] = Task(task_id=run.primary_task_id, run_id=run.run_id)

    nodes = _register_nodes(num_supernodes, state_factory)  # node id → partition id
    stores = _register_node_info_stores(nodes, run)
    grid = InMemoryGrid(state_factory=state_factory, pull_interval=pull_interval)
    grid.set_run(run)
    stop = threading.Event()
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            context = Context(run_id=run.run_id, node_id=0, node_config={}, state=RecordDict(), run_config={})
            run_serverapp(grid=grid, context=context, server_app_dir="", loaded_server_app=server_app)
        except BaseException as error:  # re-raised in the caller's thread
            errors.append(error)
        finally:
            stop.set()

    runtime_errors: list[BaseException] = []

    def drive() -> None:  # Flower's runtime loop; it returns within a second of ``stop``
        try:
            run_api(lambda: client_app if isinstance(client_app, ClientApp) else client_app(),
                    lambda: InProcessBackend(client_app, fresh_clients), nodes, state_factory, stores, stop,
                    VceMetrics())
        except BaseException as error:
            runtime_errors.append(error)
        finally:
            stop.set()

    runtime = threading.Thread(target=drive, name="gflkit-flower-runtime", daemon=True)
    server = threading.Thread(target=serve, name="gflkit-flower-serverapp", daemon=True)
    runtime.start()
    server.start()
    while server.is_alive():
        server.join(0.02)
        if server.is_alive() and not runtime.is_alive():
            raise RuntimeError("gflkit.flower: Flower's simulation runtime stopped before the ServerApp finished"
                               ) from (runtime_errors[0] if runtime_errors else None)
    stop.set()
    # Every reply was sent after its node's context was stored back, so the contexts are final now; the
    # runtime's threads leave on their own (their queue polls time out within a second).
    if errors:
        raise errors[0]
    return {partition: stores[node].retrieve_context(run.run_id) for node, partition in nodes.items()}


@contextmanager
def quiet_flower(verbose: bool = False) -> Iterator[None]:
    """Flower's INFO logs (per-round strategy logs) off for the block, unless ``verbose``."""
    logger = logging.getLogger("flwr")
    level = logger.level
    if not verbose:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass
class FlowerRun:
    """A finished Flower run of a gflkit config: the strategy (server state), every client's final
    ``Context`` by client id, and the wall-clock seconds of the Flower run."""

    strategy: GflkitStrategy
    contexts: dict[int, Context] = field(default_factory=dict)
    seconds: float = 0.0

    def records(self) -> pd.DataFrame:
        """The evaluation records, in the engine's format (:meth:`GflkitStrategy.records`)."""
        return self.strategy.records()

    def client_state(self, client: int) -> dict[str, Tensor]:
        """What client ``client`` keeps in its ``Context.state`` (kept slots, optimiser states, its last
        trained model under ``"trained"``), as tensors."""
        state = self.contexts[client].state
        return from_record(state[STATE]) if STATE in state else {}

    def models(self) -> Tensor:
        """Every client's model as the engine holds it after the run (``algorithm.evaluation_models``,
        ``K × d``): the server's copy, with the rows of ``fed.models`` that live on the clients (Ditto's
        personal models, models under partial sharing) read from their ``Context.state``."""
        fed, algorithm = self.strategy.fed, self.strategy.algorithm
        server_rows = fed.models
        try:
            if OWN_ROW in self.strategy.split.kept:
                fed.models = fed.models.clone()
                for client in range(fed.num_clients):
                    state = self.client_state(client)
                    if OWN_ROW.key in state:
                        fed.models[client] = state[OWN_ROW.key].to(fed.device)
            models = algorithm.evaluation_models(fed)
        finally:
            fed.models = server_rows
        return models.expand(fed.num_clients, -1).clone() if models.dim() == 1 else models.clone()


def run_flower(config: RunConfig, runtime: Runtime | None = None, fresh_clients: bool = False, mods: Sequence = (),
               verbose: bool = False) -> FlowerRun:
    """Run ``config`` as a Flower app — :class:`GflkitStrategy` in a ServerApp, :func:`make_client_app` on
    one node per client — in Flower's Simulation Runtime in this process (:func:`run_inprocess`).

    ``runtime``: the data root, device and local training of the server and every node (None: the defaults,
    :class:`~gflkit.runtime.Runtime`). ``fresh_clients``: a new ClientApp and an empty run cache for every
    message (state survives in the clients' ``Context`` only). ``mods``: Flower client mods around every
    message. ``verbose``: Flower's INFO logs. Raises :class:`~gflkit.flower.methods.UnsupportedMethod` (one
    line) for a method this adapter does not run.
    """
    limit_threads()  # GFLKIT_THREADS, as gflkit.experiment.run
    runtime = runtime or Runtime()
    strategy = GflkitStrategy(config, runtime.device)
    num_clients = cached_node_replica(config, 0, runtime)[1].num_clients

    def client_app() -> ClientApp:
        return make_client_app(config, runtime, mods)

    with quiet_flower(verbose):
        start = time.perf_counter()
        contexts = run_inprocess(make_server_app(strategy), client_app if fresh_clients else client_app(),
                                 num_clients, fresh_clients)
        seconds = time.perf_counter() - start
    return FlowerRun(strategy, contexts, seconds)


__all__ = ["FlowerRun", "InProcessBackend", "quiet_flower", "run_flower", "run_inprocess"]
