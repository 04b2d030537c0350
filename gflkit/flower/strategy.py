"""A Flower ``Strategy`` (Message API) whose rounds are a gflkit method's rounds.

Flower ↔ gflkit on the server (one round ``t`` of :func:`gflkit.engine.run_rounds`):

* **handshake** (:meth:`GflkitStrategy.connect`, once, before the first round): a ``query`` message to
  every node returns its :class:`~gflkit.flower.replica.ClientProfile` (its ``partition-id`` — gflkit's
  client id — its sample counts and what the server's copy needs); the run needs exactly one node per
  client ``0 … K-1``. From the profiles the server builds its copy of the run, which holds no client
  data (:func:`~gflkit.flower.replica.server_replica`);
* ``configure_train`` = step 1 of a round: the participating clients are
  :func:`gflkit.engine.sample_clients` (the same seeded draw as the engine), and client ``k``'s message
  carries the server state its step reads (:class:`~gflkit.flower.methods.Split` ``down``: the model
  ``algorithm.configure`` starts it from and the tensors ``algorithm.local_context`` / the loss term
  read — the global model, *row k* of the ``K × d`` state, or IFCA's cluster models);
* the ClientApp runs the method's client step (:mod:`gflkit.flower.client`);
* ``aggregate_train`` = steps 2–3: the replies, in client order, write what the step changed in server
  state (``Split.up``), their vectors are stacked and pass the run's uplink channel (``fed.upload``,
  perfect by default) and the algorithm's own ``aggregate(fed, clients, updates, t)`` updates the state —
  no aggregation rule is rewritten for Flower;
* ``configure_evaluate`` / ``aggregate_evaluate`` = step 4 on the rounds the schedule evaluates: every
  client scores the model the server holds for it and its last trained model on its own splits; the
  replies become the engine's records (:meth:`GflkitStrategy.records`), one row per (round, client).

Flower's ``arrays`` argument (a single global ``ArrayRecord``) is not the method's state — the state is
``fed`` / ``algorithm`` here — but ``aggregate_train`` returns the global model (when the method has one)
so that Flower's :class:`~flwr.serverapp.strategy.Result` holds it.
"""
from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import Strategy

from gflkit.engine import sample_clients
from gflkit.experiment import RunConfig
from gflkit.flower.client import CONFIG, DOWN, METRICS, UP
from gflkit.algorithms.base import Algorithm
from gflkit.federation import Federation
from gflkit.flower.replica import ClientProfile, Replica, check_config, from_record, server_replica, to_record


LOG = logging.getLogger("flwr")  # Flower's own logger, so that the summary sits among its round logs


class GflkitStrategy(Strategy):
    """The rounds of ``config``'s method as a Flower strategy (module docstring).

    Args:
        config: the run (dataset, partition, method and its options, schedule, local training, seed).
        device: where the server's state lives (``"auto"``: a CUDA GPU when present).
        timeout: seconds to wait for the replies of one round (Flower's ``timeout``); a client that has not
            replied by then stops the run with one line naming it.
        connect_timeout: seconds to wait for one node per client.

    Attributes:
        fed, algorithm, split: the server's copy of the run (after :meth:`connect`); after the run
            ``algorithm.evaluation_models(fed)`` holds what gflkit's engine would hold (models kept on clients —
            Ditto's personal ones — stay on the clients and are read from their ``Context.state``).
        nodes: client id → Flower node id, after the handshake.
        train_seconds: per round, the wall seconds of its training phase, from ``configure_train`` to the
            end of ``aggregate_train`` (messages, the clients' training, aggregation).
        result: Flower's :class:`~flwr.serverapp.strategy.Result` once :func:`make_server_app`'s app ran.

    Raises:
        ~gflkit.flower.methods.UnsupportedMethod: (one line) the method, or an option of it, does not run in Flower.
    """

    def __init__(self, config: RunConfig, device: str | torch.device = "auto", timeout: float = 3600.0,
                 connect_timeout: float = 60.0):
        self.split = check_config(config)
        self.config = config
        self.device = device
        self.schedule = config.schedule()
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.server: Replica | None = None
        self.nodes: dict[int, int] | None = None
        self._records: list[dict] = []
        self._sampled: list[int] = []
        self._train_loss: dict[int, float] = {}
        self._round_start = 0.0
        self.train_seconds: dict[int, float] = {}
        self.started = False
        self.result = None

    @property
    def fed(self) -> Federation:
        """The server's federation (counts and state, no client data); built by :meth:`connect`."""
        return self._connected().fed

    @property
    def algorithm(self) -> Algorithm:
        """The server's algorithm; built by :meth:`connect`."""
        return self._connected().algorithm

    def _connected(self) -> Replica:
        if self.server is None:
            raise RuntimeError("gflkit.flower: the server's copy of the run exists once the nodes connected "
                               "(GflkitStrategy.connect)")
        return self.server

    # --- Flower's Strategy interface -----------------------------------------------------------------
    def summary(self) -> None:
        """Log the run this strategy drives."""
        c = self.config
        clients = self.fed.num_clients if self.server is not None else c.num_clients
        LOG.info("\t├──> gflkit method %s %s", c.method, c.method_options)
        LOG.info("\t└──> %s, %d clients (%s), %d rounds, clients per round %s, evaluation protocol %s",
            c.dataset, clients, c.partition, c.rounds, c.clients_per_round or "all", c.evaluate)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Messages to the round's sampled clients, each with the server state its client step reads."""
        self.connect(grid)
        self._round_start = time.perf_counter()
        pool = self.fed.training_clients
        clients = pool[sample_clients(len(pool), self.schedule.clients_per_round, self.fed.seed, server_round)]
        self._sampled = clients.tolist()
        return [self._message(k, server_round, self.split.down, MessageType.TRAIN) for k in self._sampled]

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Write the replies into the server state and run the algorithm's own aggregation."""
        by_client = self._by_client(replies, server_round, "train")
        missing = sorted(set(self._sampled) - set(by_client))
        if missing:
            raise RuntimeError(f"gflkit.flower: no train reply from partition-id {_listed(missing)} in round "
                               f"{server_round} within {self.timeout:g} s (its SuperNode stopped or is too slow)")
        fed, algorithm = self.fed, self.algorithm
        clients = sorted(by_client)
        vectors = []
        for k in clients:
            up = from_record(by_client[k].content[UP])
            for slot in self.split.up:
                slot.set(fed, algorithm, k, up[slot.key])
            vectors.append(up["vector"].to(fed.device))
        self._train_loss = {k: float(by_client[k].content[METRICS]["train_loss"]) for k in clients}
        ids = torch.tensor(clients, dtype=torch.long)
        received = fed.upload(ids, torch.stack(vectors), server_round)
        algorithm.aggregate(fed, ids.to(fed.device), received, server_round)
        arrays = None if fed.global_model is None else to_record({"global_model": fed.global_model})
        self.train_seconds[server_round] = time.perf_counter() - self._round_start
        return arrays, MetricRecord({"train_loss": float(np.mean(list(self._train_loss.values())))})

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """On the rounds the schedule evaluates: a message to every client with what it needs to rebuild
        the model the server holds for it."""
        if not self.schedule.evaluates(server_round):
            return []
        self.connect(grid)
        return [self._message(k, server_round, self.split.evaluation_slots, MessageType.EVALUATE)
                for k in range(self.fed.num_clients)]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """The clients' scores as the engine's records; returns the configured protocol's means."""
        by_client = self._by_client(replies, server_round, "evaluate")
        if not by_client:
            return None
        evaluate, other = self.schedule.evaluate, self.schedule.other_protocol
        held_out = self.fed.held_out.tolist() if bool(self.fed.held_out.any()) else None
        rows = []
        for k in sorted(by_client):
            metrics = dict(by_client[k].content[METRICS])
            protocols = {p: {name.split(".", 1)[1]: value for name, value in metrics.items() if name.startswith(p + ".")}
                         for p in ("server", "local")}
            rows.append({"round": server_round, "client": k, **protocols[evaluate],
                         **{f"{name}_{other}": value for name, value in protocols[other].items() if name != "num_samples"},
                         "train_loss": self._train_loss.get(k, math.nan),
                         **({"held_out": held_out[k]} if held_out else {})})
        self._records.extend(rows)
        names = [name for name in rows[0] if name in protocols[evaluate] and name != "num_samples"]
        return MetricRecord({name: float(np.mean([row[name] for row in rows])) for name in names})

    # --- gflkit side -----------------------------------------------------------------------------------
    def connect(self, grid: Grid) -> dict[int, int]:
        """The handshake: wait for one node per client, learn each one's profile, build the server's copy."""
        if self.nodes is not None:
            return self.nodes
        deadline = time.monotonic() + self.connect_timeout
        asked: set[int] = set()
        profiles: dict[int, tuple[int, ClientProfile]] = {}  # client → (node id, profile)
        expected = self.config.num_clients
        while sorted(profiles) != list(range(expected)):
            new = [node for node in grid.get_node_ids() if node not in asked]
            if new:
                asked.update(new)
                profiles.update(self._profiles(grid, new, profiles))
                expected = next(iter(profiles.values()))[1].num_clients  # a natural partition has its own K
            elif time.monotonic() > deadline:
                missing = sorted(set(range(expected)) - set(profiles))
                raise TimeoutError(f"gflkit.flower: {len(profiles)} of the run's {expected} clients connected within "
                                   f"{self.connect_timeout:g} s; no node for partition-id {_listed(missing)}")
            else:
                time.sleep(0.05)
        self.server = server_replica(self.config, {k: profile for k, (_, profile) in profiles.items()}, self.device)
        self.nodes = {k: node for k, (node, _) in profiles.items()}
        return self.nodes

    def _profiles(self, grid: Grid, nodes: list[int], known: dict[int, tuple[int, ClientProfile]]
                  ) -> dict[int, tuple[int, ClientProfile]]:
        """The profiles of ``nodes`` (one query each); one line for a node that failed or repeats a client."""
        query = [Message(RecordDict({CONFIG: ConfigRecord({"gflkit": "profile"})}), dst_node_id=node,
                         message_type=MessageType.QUERY) for node in nodes]
        found: dict[int, tuple[int, ClientProfile]] = {}
        for reply in grid.send_and_receive(query, timeout=self.connect_timeout):
            if reply.has_error():
                raise RuntimeError(f"gflkit.flower: node {reply.metadata.src_node_id} could not join the run: "
                                   f"{_reason(reply)}")
            profile = ClientProfile.from_record(reply.content)
            if profile.partition in known or profile.partition in found:
                raise RuntimeError(f"gflkit.flower: two nodes report partition-id {profile.partition}; the run "
                                   f"needs exactly one node per client")
            found[profile.partition] = (reply.metadata.src_node_id, profile)
        return found

    def initial_arrays(self) -> ArrayRecord:
        """What Flower's ``start`` is given: the global model, or the common initial model."""
        model = self.fed.global_model if self.fed.global_model is not None else self.fed.initial
        return to_record({"global_model": model})

    def records(self) -> pd.DataFrame:
        """The evaluation records, as :func:`gflkit.experiment.run` returns them (one row per evaluated
        round and client; columns ``round``, ``client``, the metrics of both protocols, ``train_loss``,
        then ``method``, ``seed``, ``evaluate``)."""
        c = self.config
        return pd.DataFrame.from_records(self._records).assign(method=c.method, seed=c.seed, evaluate=c.evaluate)

    def _message(self, client: int, server_round: int, slots, message_type: str) -> Message:
        tensors = {slot.key: slot.get(self.fed, self.algorithm, client) for slot in slots}
        content = RecordDict({
            DOWN: to_record({key: value for key, value in tensors.items() if value is not None}),
            CONFIG: ConfigRecord({"server-round": server_round, "client": client}),
        })
        return Message(content=content, message_type=message_type, dst_node_id=self.nodes[client])

    def _by_client(self, replies: Iterable[Message], server_round: int, what: str) -> dict[int, Message]:
        """The replies by client id; a client's error fails the round with its reason."""
        replies = list(replies)
        clients = {node: client for client, node in (self.nodes or {}).items()}
        for reply in replies:
            if reply.has_error():
                client = clients.get(reply.metadata.src_node_id, "?")
                raise RuntimeError(f"gflkit.flower: client {client} failed to {what} in round {server_round}: "
                                   f"{_reason(reply)}")
        return {int(reply.content[METRICS]["client"]): reply for reply in replies}


def _reason(reply: Message) -> str:
    """The client's own error line of an error reply (Ray's backend wraps it in a traceback)."""
    reason = " ".join(reply.error.reason.split())
    return reason.rsplit("Message: ", 1)[-1].rstrip("'>") if "Message: " in reason else reason


def _listed(clients: list[int]) -> str:
    """``[3]`` → ``"3"``, ``[1, 4]`` → ``"1, 4"``."""
    return ", ".join(map(str, clients))


def run_strategy(strategy: GflkitStrategy, grid: Grid) -> None:
    """Run ``strategy`` on ``grid``: the handshake, then Flower's round loop over the config's rounds."""
    if strategy.started:
        raise RuntimeError("gflkit.flower: this strategy has run already; build a new one for another run")
    strategy.started = True
    strategy.connect(grid)
    strategy.result = strategy.start(grid, strategy.initial_arrays(), num_rounds=strategy.schedule.rounds,
                                     timeout=strategy.timeout)


def make_server_app(strategy: GflkitStrategy) -> ServerApp:
    """A Flower ``ServerApp`` that runs ``strategy`` for the config's rounds (one run per strategy)."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context) -> None:
        """The handshake, then Flower's round loop (``Strategy.start``) over the config's rounds."""
        run_strategy(strategy, grid)

    return app


__all__ = ["GflkitStrategy", "make_server_app", "run_strategy"]
