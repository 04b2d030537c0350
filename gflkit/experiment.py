"""Experiments as data: a :class:`RunConfig` fully describes a run; :func:`run` executes or re-uses it
(a grid of them: :func:`gflkit.executors.run_grid`).

``RunConfig`` → load the dataset → partition it into clients → split each client 80/20 (or by the
source's own marker) → build the model, the federation and the method → :func:`~gflkit.engine.run_rounds`.
A graph dataset (``cora``, ``citeseer``, ``polblogs``, ...) instead becomes K subgraph clients
(:func:`~gflkit.data.subgraphs.make_subgraph_clients`: ``louvain`` or ``metis``, per-client node and link
splits) in a :class:`~gflkit.federation.GraphFederation`, for the ``link_prediction`` or
``node_classification`` task; everything after that is the same engine.
With a :class:`~gflkit.results.ResultStore` in its :class:`~gflkit.runtime.Runtime`, a finished run is read
back instead of recomputed and an interrupted one resumes from its checkpoint.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd
import torch

from gflkit.algorithms import ALGORITHMS, build_algorithm
from gflkit.algorithms.base import make_params
from gflkit.channel import Channel
from gflkit.data import SampleDataset, dataset_names, get_spec, load_dataset, load_graph
from gflkit.data.partition import (SCHEMES, ClientSplit, hold_out_clients, matched_test_split, partition,
                                   scheme_defaults, split_by_marker, train_test_split)
from gflkit.data.subgraphs import PARTITIONERS, ClientGraph, make_subgraph_clients
from gflkit.checkpoint import Checkpoint
from gflkit.defaults import (EARLIER_DATA_DEFAULTS, EARLIER_MODEL_DEFAULTS, EARLIER_PARTITION_DEFAULTS,
                             EARLIER_TASK_DEFAULTS)
from gflkit.engine import Schedule, run_rounds
from gflkit.federation import Federation, GraphFederation
from gflkit.fields import POOLS, TEST_SPLITS, check_plain_fields
from gflkit.models import MODELS, build_model
from gflkit.models.base import FeatureModel
from gflkit.options import added_field, keyed, keyed_options, keyword_defaults
from gflkit.runtime import Runtime, resolve_device
from gflkit.seeding import HELD_OUT_CLIENTS, MODEL_INIT, derive_seed
from gflkit.tasks import GRAPH_TASKS, TASKS, build_task
from gflkit.training import TrainConfig

@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run's numbers (besides the device).

    Attributes:
        dataset: a registered dataset name (``gflkit data list``): a sample or a graph dataset.
        num_clients: number of clients K (ignored by the ``natural`` partition, which has one per user;
            10 by default, the subgraph-FL papers' setting).
        partition: samples: ``iid``, ``shards`` (label shards, option ``shards_per_client``),
            ``dirichlet`` (option ``alpha``) or ``natural`` (LEAF users). Graphs: ``louvain`` or
            ``metis`` subgraphs, options of :func:`~gflkit.data.subgraphs.make_subgraph_clients`
            (``train_ratio`` / ``val_ratio`` of the nodes, 0.2 / 0.4; ``link_val_ratio`` /
            ``link_test_ratio`` of the edges, 0.05 / 0.10).
        pool: which source samples are partitioned: ``all`` (official train + test pooled, as FedSKA
            does before its per-client 80/20 split) or ``train``.
        max_samples: optional random subsample of the pool (reduced profiles); None keeps everything.
        test_ratio: per-client test fraction; None uses the source's own per-user split (LEAF). Not used
            by graph datasets (their splits are ``partition_options``).
        test_split: where the clients' test samples come from. ``"client"`` (default): from each client's
            own samples (``test_ratio``). ``"matched"`` (the SFL authors' protocol): each client trains on
            all its samples and is tested on samples drawn from the dataset's official test split with
            the label mix of its training data (:func:`~gflkit.data.partition.matched_test_split`: per
            label in proportion to its training counts, without replacement within a client, clients
            drawn independently so they may share test samples). Needs ``pool="train"``,
            ``test_ratio=None`` and a sample dataset with an official test split and class labels; the
            number of test samples per client is ``partition_options["test_per_client"]``, by default
            ``round(N_test / num_clients)`` (at least 1) for the ``N_test`` official test samples (100
            for MNIST with 100 clients, the authors' number). Left out of :meth:`to_dict` while
            ``"client"`` (an :func:`~gflkit.options.added_field`).
        held_out: fraction of the clients held out as unseen test clients (LEAF's and FedCG's protocol,
            :func:`~gflkit.data.partition.hold_out_clients`): they never train and are scored on all their
            samples; their records carry ``held_out=True``. 0 (default): every client trains.
        model, method: registered names, with their options (``method_options`` is completed with the
            method's defaults, so it always lists every hyper-parameter).
        rounds, clients_per_round, eval_every: the schedule.
        evaluate: the evaluation protocol, which model a client is scored with: ``"server"`` (the model
            the server holds for it — global, cluster or personal) or ``"local"`` (that model after the
            client's local training of the round); the other protocol's metrics are recorded beside
            (see :mod:`gflkit.engine`). Each paper's profiles set it per method to the paper's protocol.
        local_epochs, batch_size, lr, momentum, weight_decay, optimizer, optimizer_state: local
            training (:class:`~gflkit.training.TrainConfig`: ``"sgd"`` or ``"adam"``, its state
            ``"fresh"`` at every local training or ``"persistent"`` per client). Graph clients take one
            full-batch step per local epoch ("local iterations") and ignore ``batch_size``.
        nesterov: Nesterov momentum for SGD (needs ``momentum > 0``). Left out of :meth:`to_dict` while
            ``False`` (an :func:`~gflkit.options.added_field`).
        lr_schedule: ``None`` (default: every step uses ``lr``) or a piecewise-linear learning-rate
            schedule over the local epochs that replaces ``lr``, restarted at every local training:
            ``[[epoch, lr], ...]`` knots, epochs non-decreasing from 0, rates >= 0, e.g. the SFL authors'
            ``[[0, 0], [5, 0.4], [20, 0.001]]`` (:attr:`TrainConfig.lr_schedule
            <gflkit.training.TrainConfig.lr_schedule>`, :func:`~gflkit.training.scheduled_lr`). Stored as
            lists of two floats, however written; left out of :meth:`to_dict` while ``None``.
        task: ``classification`` / ``forecasting`` for samples, ``link_prediction`` /
            ``node_classification`` for graphs; ``task_options`` its options (e.g. link prediction's
            ``reconstruction``, :class:`~gflkit.tasks.LinkPredictionTask`).
        data_options: the loader's options (:func:`~gflkit.data.loading.load_dataset`; for graphs
            :func:`~gflkit.data.loading.load_graph`, e.g. ``normalize_features``).
        channel: the uplink's corruption of uploads, options of :class:`~gflkit.channel.Channel`
            (``noise_scale`` s, ``missing_rate``; completed with its defaults: a perfect channel).
        seed: seeds partitioning, initialisation, sampling, minibatch order and the channel's noise.
    """

    dataset: str
    num_clients: int = 10
    method: str = "fedavg"
    method_options: dict[str, Any] = field(default_factory=dict)
    model: str = "mclr"
    model_options: dict[str, Any] = field(default_factory=dict)
    partition: str = "shards"
    partition_options: dict[str, Any] = field(default_factory=dict)
    pool: str = "all"
    max_samples: int | None = None
    test_ratio: float | None = 0.2
    test_split: str = added_field("client")
    held_out: float = 0.0
    rounds: int = 10
    clients_per_round: int | None = None
    eval_every: int = 1
    evaluate: str = "server"
    local_epochs: int = 1
    batch_size: int = 32
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    optimizer_state: str = "fresh"
    nesterov: bool = added_field(False)
    lr_schedule: list[list[float]] | None = added_field(None)
    task: str = "classification"
    task_options: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)
    channel: dict[str, Any] = field(default_factory=dict)
    seed: int = 0

    def __post_init__(self) -> None:
        check_plain_fields({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        if self.dataset not in dataset_names():
            raise ValueError(f"unknown dataset {self.dataset!r}; choose one of {dataset_names()}")
        of_kind = f" for the {'graph' if self.is_graph else 'sample'} dataset {self.dataset!r}"
        choices = {
            "method": (self.method, sorted(ALGORITHMS), ""),
            "model": (self.model, sorted(MODELS), ""),
            "partition": (self.partition, PARTITIONERS if self.is_graph else SCHEMES, of_kind),
            "pool": (self.pool, POOLS, ""),
            "test_split": (self.test_split, TEST_SPLITS, ""),
            "task": (self.task, [t for t in sorted(TASKS) if (t in GRAPH_TASKS) == self.is_graph], of_kind),
        }
        for what, (value, valid, context) in choices.items():
            if value not in valid:
                raise ValueError(f"unknown {what} {value!r}{context}; choose one of {list(valid)}")
        self._check_test_split()
        if self.held_out and self.is_graph:
            raise ValueError("held_out clients are for sample datasets; subgraph clients have their own "
                             "validation and test splits (partition_options)")
        # rejects unknown or invalid method options, and options that do not fit num_clients
        algorithm = build_algorithm(self.method, **self.method_options)
        algorithm.check(self.num_clients)
        # every hyper-parameter explicit: the same run written two ways shares one stored result
        object.__setattr__(self, "method_options", dataclasses.asdict(algorithm.params))
        object.__setattr__(self, "channel", dataclasses.asdict(self.uplink()))
        if self.lr_schedule is not None:  # validated, as lists of [epoch, lr] floats (JSON's form)
            object.__setattr__(self, "lr_schedule", [list(knot) for knot in self.train_config().lr_schedule])
        self.train_config()
        self.schedule()
        try:
            build_task(self.task, **self.task_options)
        except TypeError as error:
            raise ValueError(f"task_options: {error}") from None

    @property
    def is_graph(self) -> bool:
        """Whether the dataset is one graph cut into subgraph clients (rather than pooled samples)."""
        return get_spec(self.dataset).kind == "graph"

    def replace(self, **changes: Any) -> "RunConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def _check_test_split(self) -> None:
        """Raise ``ValueError`` unless ``test_split`` fits the rest of the config."""
        per_client = self.partition_options.get("test_per_client")
        if self.test_split != "matched":
            if "test_per_client" in self.partition_options:
                raise ValueError('partition_options["test_per_client"] is for test_split="matched"')
            return
        if self.is_graph:
            raise ValueError('test_split="matched" is for sample datasets; subgraph clients have their own '
                             "splits (partition_options)")
        if self.pool != "train":
            raise ValueError(f'test_split="matched" draws test samples from the official test split, so the '
                             f'clients must hold training samples only: set pool="train", not {self.pool!r}')
        if self.test_ratio is not None:
            raise ValueError(f'test_split="matched" trains each client on all its samples: set test_ratio=None, '
                             f"not {self.test_ratio}")
        if per_client is not None and (isinstance(per_client, bool) or not isinstance(per_client, int)
                                       or per_client < 1):
            raise ValueError(f'partition_options["test_per_client"] must be a positive integer, got {per_client!r}')

    def to_dict(self) -> dict[str, Any]:
        """The configuration as plain JSON-serialisable data, its stored form: every field and every method and
        channel option, less the fields added after runs were stored while they hold those runs' value
        (:func:`gflkit.options.keyed`), so adding an option never changes an earlier run's key; and the model,
        data and task options it names plus every default of theirs that differs from the one the stored runs
        had (:mod:`gflkit.defaults`), so changing a default always does."""
        return {**keyed(self), "method_options": keyed(self.method_params()), "channel": keyed(self.uplink()),
                "model_options": keyed_options(self.model_options, model_defaults(self.model),
                                               EARLIER_MODEL_DEFAULTS.get(self.model, {})),
                "data_options": keyed_options(self.data_options, data_defaults(self.dataset),
                                              EARLIER_DATA_DEFAULTS.get(self.dataset, {})),
                "task_options": keyed_options(self.task_options, task_defaults(self.task),
                                              EARLIER_TASK_DEFAULTS.get(self.task, {})),
                "partition_options": keyed_options(self.partition_options, partition_defaults(self),
                                                   EARLIER_PARTITION_DEFAULTS.get(self.partition, {}))}

    def method_params(self) -> Any:
        """The method's hyper-parameters (its ``Params`` dataclass)."""
        return make_params(ALGORITHMS[self.method].Params, self.method_options, f"method {self.method!r}")

    def train_config(self) -> TrainConfig:
        """Local-training hyper-parameters."""
        return TrainConfig(self.local_epochs, self.batch_size, self.lr, self.momentum, self.weight_decay,
                           self.optimizer, self.optimizer_state, nesterov=self.nesterov, lr_schedule=self.lr_schedule)

    def uplink(self) -> Channel:
        """The channel between clients and server."""
        return make_params(Channel, self.channel, "the channel")

    def schedule(self, checkpoint_every: int = 0) -> Schedule:
        """The round schedule."""
        return Schedule(self.rounds, self.clients_per_round, self.eval_every, checkpoint_every, self.evaluate)


@functools.lru_cache(maxsize=4)
def _cached_dataset(name: str, root: str | None, options: tuple) -> SampleDataset:
    return load_dataset(name, root=root, **dict(options))


def model_defaults(model: str) -> dict[str, Any]:
    """The options of a registered model that have a default, with their current defaults."""
    return keyword_defaults(MODELS[model], skip=2)


def task_defaults(task: str) -> dict[str, Any]:
    """The options of a registered task that have a default, with their current defaults."""
    return {f.name: f.default for f in dataclasses.fields(TASKS[task])
            if f.name != "name" and f.default is not dataclasses.MISSING}


def data_defaults(dataset: str) -> dict[str, Any]:
    """The loader options of a registered dataset that have a default (``download`` aside: where the files come
    from does not shape the data), with their current defaults."""
    spec = get_spec(dataset)
    found = keyword_defaults(spec.loader, skip=2) if spec.loader is not None else {}
    if spec.kind == "graph":
        found = {**keyword_defaults(load_graph, skip=2), **found}
    found.pop("download", None)
    return found


def partition_defaults(config: RunConfig) -> dict[str, Any]:
    """The options of ``config``'s partition that have a default, with their current defaults: the scheme's
    (``dirichlet``'s ``min_size``, ...) or, for a graph dataset, the subgraph splits' (``train_ratio``, ...)."""
    if not config.is_graph:
        return scheme_defaults(config.partition)
    found = keyword_defaults(make_subgraph_clients, skip=4)  # after data, num_clients, method, seed
    found.pop("links")  # set by the task, not an option
    return found


def pool_indices(data: SampleDataset, config: RunConfig) -> torch.Tensor:
    """The sample indices a config partitions: the chosen pool, optionally subsampled (seeded)."""
    indices = torch.arange(len(data)) if config.pool == "all" else torch.nonzero(~data.is_test).flatten()
    if "is_val" in data.info:  # validation windows (METR-LA) are neither trained nor tested on
        indices = indices[~data.info["is_val"][indices]]
    if config.max_samples is not None and config.max_samples < len(indices):
        gen = torch.Generator().manual_seed(derive_seed(config.seed, 0))
        indices = indices[torch.randperm(len(indices), generator=gen)[: config.max_samples]].sort().values
    return indices


def client_split(data: SampleDataset, config: RunConfig) -> ClientSplit:
    """Partition the pool into clients and split each into train / test indices (into ``data``)."""
    pool = pool_indices(data, config)
    groups = data.user[pool] if config.partition == "natural" else None
    if config.partition == "natural" and groups is None:
        raise ValueError(f"dataset {config.dataset!r} has no natural users; use iid, shards or dirichlet")
    kwargs = {"groups": groups} if groups is not None else {}
    options = {k: v for k, v in config.partition_options.items() if k != "test_per_client"}
    parts = partition(data.y[pool], config.partition, config.num_clients, config.seed, **options, **kwargs)
    parts = [pool[p] for p in parts]
    if config.test_split == "matched":
        split = matched_test_split(data.y, parts, matched_test_pool(data, config),
                                   matched_test_size(data, config, len(parts)), derive_seed(config.seed, 1))
    elif config.test_ratio is None:
        split = split_by_marker(parts, data.is_test)
    else:
        split = train_test_split(parts, config.test_ratio, derive_seed(config.seed, 1))
    if config.held_out:
        split = hold_out_clients(split, config.held_out, derive_seed(config.seed, HELD_OUT_CLIENTS))
    return split


#: The fields that decide a run's clients: runs equal in these share one partition.
PARTITION_FIELDS = ("dataset", "data_options", "pool", "max_samples", "num_clients", "partition", "partition_options",
                    "test_ratio", "test_split", "held_out", "seed")


def check_fits_data(configs: Sequence[RunConfig], data_root: str | Path | None = None) -> None:
    """Raise ``ValueError`` when a sample dataset under ``data_root`` cannot give one of ``configs`` its clients
    (more clients than samples, say), before anything trains: each distinct partition is drawn as its runs
    will draw it."""
    distinct = {repr([getattr(c, name) for name in PARTITION_FIELDS]): c for c in configs if not c.is_graph}
    for config in distinct.values():
        client_split(sample_dataset(config, data_root), config)


def matched_test_pool(data: SampleDataset, config: RunConfig) -> torch.Tensor:
    """The official test samples a ``test_split="matched"`` config draws the clients' test sets from.

    Raises:
        ValueError: the dataset has no official test split (``is_test`` all False) or no class labels.
    """
    if data.y.dim() != 1:
        raise ValueError(f'test_split="matched" matches class labels; dataset {config.dataset!r} has none '
                         f"(targets of shape {tuple(data.y.shape)})")
    marked = data.is_test.clone()
    if "is_val" in data.info:
        marked &= ~data.info["is_val"]
    if not marked.any():
        raise ValueError(f'test_split="matched" draws from the official test split, which dataset '
                         f'{config.dataset!r} does not have; use test_split="client" (test_ratio)')
    return torch.nonzero(marked).flatten()


def matched_test_size(data: SampleDataset, config: RunConfig, num_clients: int | None = None) -> int:
    """Test samples per client of a ``test_split="matched"`` config: ``partition_options["test_per_client"]``,
    else ``round(N_test / K)`` (at least 1) for the ``N_test`` official test samples and ``K =
    num_clients`` clients (default ``config.num_clients``; a ``natural`` partition passes its count)."""
    given = config.partition_options.get("test_per_client")
    if given is not None:
        return int(given)
    clients = config.num_clients if num_clients is None else num_clients
    return max(round(len(matched_test_pool(data, config)) / clients), 1)


@functools.lru_cache(maxsize=4)
def _cached_subgraph_clients(name: str, root: str | None, data_options: tuple, num_clients: int, method: str,
                             seed: int, links: bool, options: tuple) -> list[ClientGraph]:
    graph = load_graph(name, root=root, **dict(data_options))
    return make_subgraph_clients(graph, num_clients, method, seed, links=links, **dict(options))


def graph_clients(config: RunConfig, data_root: str | Path | None = None) -> list[ClientGraph]:
    """The subgraph clients of a graph-dataset ``config`` (cached: a grid over methods cuts the graph once).

    Raises:
        ValueError: ``config`` is not about a graph dataset, or as
            :func:`~gflkit.data.subgraphs.make_subgraph_clients`.
    """
    if not config.is_graph:
        raise ValueError(f"dataset {config.dataset!r} is not a graph dataset")
    return _cached_subgraph_clients(config.dataset, None if data_root is None else str(data_root),
                                    tuple(sorted(config.data_options.items())), config.num_clients,
                                    config.partition, config.seed, config.task == "link_prediction",
                                    tuple(sorted(config.partition_options.items())))


def build_graph_federation(config: RunConfig, data_root: str | Path | None = None,
                           device: str | torch.device = "auto") -> GraphFederation:
    """Subgraph clients, model and state of the graph-dataset run ``config`` (nothing trained yet).

    The model is built for the graph's ``F`` node features and, for node classification, its classes
    (``num_classes = 0`` for link prediction: no readout).
    """
    clients = graph_clients(config, data_root)
    graph = clients[0].data
    torch.manual_seed(derive_seed(config.seed, MODEL_INIT))
    num_classes = int(graph.num_classes) if config.task == "node_classification" else 0
    model = build_model(config.model, (graph.num_features,), num_classes, **config.model_options)
    return GraphFederation(clients, model, build_task(config.task, **config.task_options), config.train_config(),
                           seed=config.seed,
                           device=resolve_device(device), channel=config.uplink())


def build_federation(config: RunConfig, runtime: Runtime | None = None) -> Federation:
    """Data, clients, model and state of the run ``config`` (nothing trained yet), on ``runtime``'s data root and
    device, training locally as it says (:meth:`~gflkit.runtime.Runtime.training_mode`)."""
    runtime = runtime or Runtime()
    fed = _build_federation(config, runtime.data_root, runtime.torch_device())
    fed.trainer.mode = runtime.training_mode()
    return fed


def sample_dataset(config: RunConfig, data_root: str | Path | None = None) -> SampleDataset:
    """The sample dataset of ``config`` with its ``data_options`` (loaded once per process)."""
    options = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.data_options.items()))
    return _cached_dataset(config.dataset, None if data_root is None else str(data_root), options)  # hashable


def initial_model(config: RunConfig, input_shape: Sequence[int], num_classes: int) -> FeatureModel:
    """``config``'s model for inputs of ``input_shape`` and ``num_classes`` outputs, with the run's seeded
    initial weights (every copy of a run — the engine's, a Flower server's or node's — builds the same)."""
    torch.manual_seed(derive_seed(config.seed, MODEL_INIT))
    return build_model(config.model, tuple(input_shape), num_classes, **config.model_options)


def release_datasets() -> None:
    """Forget the sample datasets loaded by :func:`sample_dataset` (a process that keeps only one client's part)."""
    _cached_dataset.cache_clear()


def _build_federation(config: RunConfig, data_root: str | Path | None, device: str | torch.device) -> Federation:
    if config.is_graph:
        return build_graph_federation(config, data_root, device)
    data = sample_dataset(config, data_root)
    split = client_split(data, config)
    model = initial_model(config, data.input_shape, data.num_classes)
    return Federation(
        data.x, data.y, split.train, split.test, model,
        build_task(config.task, **{**data.info.get("task_options", {}), **config.task_options}),
        config.train_config(), seed=config.seed, device=resolve_device(device),
        client_graph=client_graph(data, config, split), channel=config.uplink(), held_out=split.held_out,
    )


def client_graph(data: SampleDataset, config: RunConfig, split: ClientSplit) -> torch.Tensor | None:
    """The dataset's graph over its natural users restricted to the clients (``None`` if it has none).

    Only a ``natural`` partition makes clients users: client ``k`` is then the ``k``-th smallest user id.
    """
    if config.partition != "natural" or "user_graph" not in data.info:
        return None
    users = [int(data.user[torch.cat([train, test])[0]]) for train, test in zip(split.train, split.test)]
    return data.info["user_graph"][users][:, users]


@dataclass(frozen=True)
class Run:
    """One run of a notebook's grid: its configuration and the labels its tables group it by.

    ``labels`` are what the grid that made the run knows about it (``{"q": 2}``, ``{"variant": "sfl_star",
    "reading": "paper"}``); :func:`~gflkit.executors.run_grid` adds them to the run's records as columns, so no
    table has to recover a row's name from the configuration's options. They never enter the stored key: two grids may
    label the same run differently and still share its stored result.
    """

    config: RunConfig
    labels: Mapping[str, Any] = field(default_factory=dict)


def as_run(run: Run | RunConfig) -> Run:
    """``run`` as a :class:`Run` (a bare configuration has no labels)."""
    return run if isinstance(run, Run) else Run(run)


def stored_key(config: RunConfig, device: str | torch.device = "auto") -> dict[str, Any]:
    """What a run is stored under: its configuration and the device type it computes on."""
    return {**config.to_dict(), "device": resolve_device(device).type}


def stored_artifacts(config: RunConfig, runtime: Runtime) -> dict[str, torch.Tensor]:
    """The artifacts (e.g. a learned client graph) that the finished run ``config`` left in ``runtime``'s store
    (under its device type)."""
    if runtime.store is None:
        raise ValueError("stored_artifacts needs a runtime with a store, e.g. Runtime(store=ResultStore(folder))")
    return runtime.store.load_artifacts(stored_key(config, runtime.torch_device()))


def run(config: RunConfig, runtime: Runtime | None = None, checkpoint_every: int = 5,
        progress: bool = True) -> pd.DataFrame:
    """Run ``config`` on ``runtime`` (default :class:`~gflkit.runtime.Runtime`: ``$GFLKIT_DATA``, the best
    device, no store) — or read it back from the runtime's store — and return its records.

    Local training is batched or sequential as the runtime says (``auto`` by default, or
    ``$GFLKIT_LOCAL_TRAINING``); each record's ``local_training`` column says which ran.

    The records are the engine's per-round, per-client rows plus the columns ``method``, ``seed`` and
    ``evaluate`` (the run's evaluation protocol).
    With a store, the run checkpoints every ``checkpoint_every`` rounds and resumes after a kill, and
    is computed under the store's lock for it: a second process asking for the same run waits for the
    first and reads its records. ``device="cuda"`` on a machine without a GPU reads runs a GPU machine
    stored and raises ``RuntimeError`` for any other.
    """
    runtime = runtime or Runtime()
    runtime.limit_threads()  # else GFLKIT_THREADS, e.g. exported by `gflkit --threads 1 notebook ...` into the kernel
    device = runtime.torch_device()
    runtime.training_mode()  # an unknown $GFLKIT_LOCAL_TRAINING fails before a stored run is read
    stored, store = stored_key(config, device), runtime.store
    if store is None:
        _check_computable(config, device)
        records = _compute(config, runtime, None, 0, progress)[0]
    else:
        records = store.load(stored)
        if records is None:
            _check_computable(config, device)
            with store.lock(stored):  # another process computing the same run: wait, then read its records
                records = store.load(stored)
                if records is None:
                    records, artifacts = _compute(config, runtime, store.checkpoint(stored), checkpoint_every,
                                                  progress)
                    store.save(stored, records, artifacts)
    return records.assign(method=config.method, seed=config.seed, evaluate=config.evaluate)


def _check_computable(config: RunConfig, device: torch.device) -> None:
    """Refuse to compute on CUDA where torch sees no GPU (only runs a GPU machine stored can be read here)."""
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"run {config.method} seed={config.seed} is not stored under device 'cuda' and torch "
                           f"sees no CUDA GPU here: compute it on a GPU machine and bring its results folder "
                           f"back (benchmarks/paper_gpu.py shows how), or choose device 'cpu' (runs stored "
                           f"under 'cpu' are separate)")


def _compute(config: RunConfig, runtime: Runtime, checkpoint: Checkpoint | None, checkpoint_every: int,
             progress: bool) -> tuple[pd.DataFrame, dict[str, torch.Tensor]]:
    """Train ``config`` on ``runtime`` (resuming from ``checkpoint`` when one exists): its records and artifacts."""
    fed = build_federation(config, runtime)
    algorithm = build_algorithm(config.method, **config.method_options)
    records = run_rounds(fed, algorithm, config.schedule(checkpoint_every), checkpoint, progress,
                         description=f"{config.method} seed={config.seed}")
    return records, algorithm.artifacts()