"""A Flower ``ClientApp`` that runs a gflkit method's own client step on the node's partition.

Flower ↔ gflkit on the client:

* the node's ``partition-id`` (``Context.node_config``) is gflkit's client id ``k``: the node trains and
  evaluates on client ``k``'s partition of the run's :class:`~gflkit.experiment.RunConfig`;
* a **train** message carries the server state client ``k``'s step reads (``Split.down``: the global
  model, row ``k`` of a personalised matrix, IFCA's cluster models) and the round ``t``. The client loads
  it, and its own kept state, into a fresh copy of the run (:class:`~gflkit.flower.replica.Replica`) and
  calls ``algorithm.round_updates(fed, [k], t)`` — the method's own step: ``configure`` →
  ``local_context`` → :meth:`Federation.train_clients <gflkit.federation.Federation.train_clients>`
  (gflkit's local loop, ``local_sgd``, with the method's loss term) → ``finish_client``, or the method's
  override (Ditto's two trainings, SCAFFOLD's control-variate update). Minibatch order and dropout are
  drawn from ``(seed, t, k, stream)`` as in gflkit's engine, so the order in which Flower runs the
  clients changes nothing;
* the reply carries the trained vector, the mean training loss and what the step wrote into server
  state (``Split.up``: IFCA's cluster choice, SCAFFOLD's control delta);
* what must outlive the round stays in ``Context.state`` (record ``"gflkit"``): ``Split.kept`` (Ditto's
  personal model, SCAFFOLD's control variate, the client's own model under partial sharing), the
  client's persistent optimiser state (``optimizer_state="persistent"``) and the model it last trained
  (scored under the ``"local"`` protocol). Flower may recreate the ClientApp — a fresh process, a fresh
  copy of the run — for every message; nothing else is kept;
* an **evaluate** message carries ``Split.evaluation_slots``; the client rebuilds the model the server
  holds for it (``algorithm.evaluation_models``) and scores it and its last trained model on its own
  evaluation splits (gflkit's ``"server"`` and ``"local"`` protocols);
* a **query** message (the strategy's handshake) is answered with the node's
  :class:`~gflkit.flower.replica.ClientProfile` (its partition id, sample counts, what the server needs
  to build its own copy without any client data).

The node holds only its own partition (:func:`~gflkit.flower.replica.node_replica`). The run is the one
:func:`make_client_app` was given, or — the app ``flwr run`` starts (:mod:`gflkit.flower.app`) — the one
of the run's ``Context.run_config`` (:mod:`gflkit.flower.run_config`). The node's ``node_config`` gives
``partition-id`` (its client), ``num-partitions`` (checked against the run's clients) and optionally
``data-root`` (else ``$GFLKIT_DATA``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from flwr.app import Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import Tensor

from gflkit.engine import merge_splits
from gflkit.experiment import RunConfig
from gflkit.flower.replica import ClientProfile, Replica, cached_node_replica, check_config, from_record, to_record
from gflkit.flower.run_config import settings_from_run_config
from gflkit.runtime import Runtime

#: keys of the records a message carries
DOWN, UP, CONFIG, METRICS = "gflkit.down", "gflkit.up", "config", "metrics"
#: the ArrayRecord in ``Context.state`` holding what a client keeps between rounds
STATE = "gflkit"
TRAINED = "trained"
OPTIMIZER = "optimizer"


def partition_id(context: Context) -> int:
    """gflkit's client id of the node: its ``partition-id`` in ``Context.node_config``."""
    if "partition-id" not in context.node_config:
        raise ValueError("gflkit.flower: the node has no 'partition-id' in its node_config (start the SuperNode "
                         "with --node-config \"partition-id=<k> num-partitions=<K>\")")
    return int(context.node_config["partition-id"])


def node_data_root(context: Context, default: str | Path | None = None) -> str | Path | None:
    """The node's data root: ``data-root`` of its node_config, else ``default`` (None: the data registry's
    own default, ``$GFLKIT_DATA``)."""
    return context.node_config.get("data-root") or default


def check_partitions(context: Context, profile: ClientProfile) -> None:
    """The node's ``num-partitions`` (when given) must be the run's number of clients."""
    given = context.node_config.get("num-partitions")
    if given is not None and int(given) != profile.num_clients:
        raise ValueError(f"gflkit.flower: the node was started with num-partitions={given} but the run has "
                         f"{profile.num_clients} clients; start the SuperNodes with num-partitions="
                         f"{profile.num_clients}")


def _kept_state(context: Context) -> dict[str, Tensor]:
    return from_record(context.state[STATE]) if STATE in context.state else {}


def _load(replica: Replica, client: int, slots, tensors: dict[str, Tensor], state: dict[str, Tensor]) -> None:
    """Fill the (reset) copy with the message's slots, then the client's kept state and optimiser states."""
    fed, algorithm = replica.fed, replica.algorithm
    for slot in slots:
        if slot.key in tensors:
            slot.set(fed, algorithm, client, tensors[slot.key])
    for slot in replica.split.kept:
        if slot.key in state:
            slot.set(fed, algorithm, client, state[slot.key])
    streams: dict[int, list[dict[str, Tensor]]] = {}
    for key, value in state.items():
        if key.startswith(OPTIMIZER + "."):
            _, stream, index, name = key.split(".", 3)
            per_parameter = streams.setdefault(int(stream), [{} for _ in fed.flat.parameters])
            per_parameter[int(index)][name] = value.to(fed.device)
    for stream, per_parameter in streams.items():
        fed.trainer.optimizer_states[(client, stream)] = per_parameter


def _save(replica: Replica, client: int, trained: Tensor) -> dict[str, Tensor]:
    """What client ``client`` keeps after its step: kept slots, its optimiser states, its trained model."""
    fed, algorithm = replica.fed, replica.algorithm
    state = {slot.key: slot.get(fed, algorithm, client) for slot in replica.split.kept}
    for (owner, stream), per_parameter in fed.trainer.optimizer_states.items():
        if owner == client:
            for index, entries in enumerate(per_parameter):
                for name, value in entries.items():
                    if value is not None:
                        state[f"{OPTIMIZER}.{stream}.{index}.{name}"] = torch.as_tensor(value)
    state[TRAINED] = trained
    return {key: value for key, value in state.items() if value is not None}


def _check_client(message: Message, client: int) -> None:
    addressed = int(message.content[CONFIG]["client"])
    if addressed != client:
        raise ValueError(f"gflkit.flower: a message for client {addressed} reached the node of partition {client}")


def train_client(replica: Replica, message: Message, context: Context) -> Message:
    """Handle a train message on the node of ``context`` (see the module docstring)."""
    client = partition_id(context)
    _check_client(message, client)
    round = int(message.content[CONFIG]["server-round"])
    down = from_record(message.content[DOWN])
    with replica.lock:
        replica.reset()
        _load(replica, client, replica.split.down, down, _kept_state(context))
        fed, algorithm = replica.fed, replica.algorithm
        result = algorithm.round_updates(fed, torch.tensor([client]), round)[0]
        trained = algorithm.trained_model(fed, client, result)
        context.state[STATE] = to_record(_save(replica, client, trained))
        up = {"vector": result.vector, **{slot.key: torch.as_tensor(slot.get(fed, algorithm, client))
                                          for slot in replica.split.up}}
        metrics = MetricRecord({"client": client, "train_loss": float(result.loss),
                                "num-examples": int(fed.num_train[client])})
    return Message(RecordDict({UP: to_record(up), METRICS: metrics}), reply_to=message)


def evaluate_client(replica: Replica, message: Message, context: Context) -> Message:
    """Handle an evaluate message: score the server's model for this client and its last trained model."""
    client = partition_id(context)
    _check_client(message, client)
    state = _kept_state(context)
    with replica.lock:
        replica.reset()
        _load(replica, client, replica.split.evaluation_slots, from_record(message.content[DOWN]), state)
        fed, algorithm = replica.fed, replica.algorithm
        models = algorithm.evaluation_models(fed)
        server = models if models.dim() == 1 else models[client]
        trained = state[TRAINED].to(fed.device) if TRAINED in state else server  # never trained: the server's
        metrics: dict[str, int | float] = {"client": client, "num-examples": int(fed.num_test[client])}
        for protocol, model in (("server", server), ("local", trained)):
            merged = merge_splits({split: fed.client_metrics(client, model, split) for split in fed.data.evaluation_splits})
            metrics.update({f"{protocol}.{name}": int(value) if name == "num_samples" else float(value)
                            for name, value in merged.items()})
    return Message(RecordDict({METRICS: MetricRecord(metrics)}), reply_to=message)


def make_client_app(config: RunConfig | None = None, runtime: Runtime | None = None, mods: Sequence = ()) -> ClientApp:
    """A Flower ``ClientApp`` running a gflkit method on the node's own partition (module docstring).

    ``config``: the run; None reads it from the run's ``Context.run_config`` (as :mod:`gflkit.flower.app`).
    ``runtime``: where the node computes — its data root (used where the node has no ``data-root``), device and
    local training (None: the run config's device, ``$GFLKIT_DATA``); ``mods`` are Flower client mods wrapped
    around every message. The node's copy of the run is built once per process, on its first message. Raises
    :class:`~gflkit.flower.methods.UnsupportedMethod` (one line) for a method this adapter does not run.
    """
    if config is not None:
        check_config(config)
    app = ClientApp(mods=list(mods))

    def node(context: Context) -> tuple[Replica, ClientProfile]:
        run, where = config, runtime
        if run is None:
            settings = settings_from_run_config(context.run_config)
            run, where = settings.config, where or Runtime(device=settings.device)
        where = where or Runtime()
        where = where.replace(data_root=node_data_root(context, where.data_root))
        replica, profile = cached_node_replica(run, partition_id(context), where)
        check_partitions(context, profile)
        return replica, profile

    @app.train()
    def train(message: Message, context: Context) -> Message:
        """The method's client step on this node's partition (:func:`train_client`)."""
        return train_client(node(context)[0], message, context)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        """This node's scores under both protocols (:func:`evaluate_client`)."""
        return evaluate_client(node(context)[0], message, context)

    @app.query()
    def query(message: Message, context: Context) -> Message:
        """The strategy's handshake: this node's :class:`~gflkit.flower.replica.ClientProfile`."""
        return Message(node(context)[1].to_record(), reply_to=message)

    return app


__all__ = ["STATE", "check_partitions", "evaluate_client", "make_client_app", "node_data_root", "partition_id",
           "train_client"]
