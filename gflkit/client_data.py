"""The clients' data as a federation holds it: sample clients, subgraph clients, or none (a server).

A :class:`~gflkit.federation.Federation` keeps its clients' data in one :class:`ClientData` object
(``fed.data``) and asks it for what training and evaluation read: a client's split
(:meth:`ClientData.client_data`), one pass over it as ``(input, targets)`` batches
(:meth:`ClientData.batches`), and the counts that weigh aggregation. Three kinds:

* :class:`SampleClients` — the pooled samples ``x``, ``y`` on one device and, per client, index tensors of
  its train and test samples (no per-client copies); a node of a deployment keeps only its own
  (:meth:`SampleClients.keep_only`);
* :class:`GraphClients` — each client's subgraph, one full batch per pass, with the targets of each split
  given by a graph task;
* :class:`NoClientData` — what a server holds: the counts the clients reported, no sample; any request
  for a client's samples raises.
"""
from __future__ import annotations

from typing import ClassVar, Iterator, Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data

from gflkit.data.partition import label_counts
from gflkit.data.subgraphs import ClientGraph
from gflkit.tasks import GraphTask
from gflkit.training import Batch, minibatches


class ClientData:
    """What a federation holds of its clients' data (the base: counts only).

    Attributes:
        num_train, num_test: per client, its train and test counts (samples; for graph clients, nodes and test
            targets).
    """

    #: the splits every evaluation scores — the test split, then held-out splits recorded as ``<split>_<metric>``
    evaluation_splits: ClassVar[tuple[str, ...]] = ("test",)
    #: whether clients' batches can be stacked for batched local training (:mod:`gflkit.batched`)
    batchable: ClassVar[bool] = True

    def __init__(self, num_train: Sequence[int], num_test: Sequence[int]):
        if len(num_train) != len(num_test):
            raise ValueError(f"got {len(num_train)} train and {len(num_test)} test counts: one of each per client")
        if len(num_train) == 0:
            raise ValueError("a federation needs at least one client")
        self.num_train, self.num_test = list(num_train), list(num_test)

    @property
    def num_clients(self) -> int:
        """Number of clients K."""
        return len(self.num_train)

    def holds(self, client: int) -> bool:
        """Whether ``client``'s samples are here."""
        return True

    def client_data(self, client: int, split: str = "train") -> tuple[object, Tensor]:
        """The model input and targets of one client's ``split``."""
        raise NotImplementedError

    def batches(self, client: int, split: str, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Batch]:
        """One pass over a client's ``split`` as ``(input, targets)`` batches (shuffled with a ``generator``)."""
        raise NotImplementedError

    def train_label_counts(self) -> Tensor:
        """The ``K × C`` label counts of the clients' train splits (a label-sharing graph's side information)."""
        raise ValueError(f"{type(self).__name__} has no label counts: they come with labelled samples")


class SampleClients(ClientData):
    """Sample clients over shared tensors.

    Args:
        x, y: all samples and labels (moved to ``device``).
        train_indices, test_indices: per client, indices into ``x`` / ``y``.
        device: where the tensors live.
        eval_batch_size: batch size of evaluation passes.

    Attributes:
        own_client: the one client whose samples this copy holds after :meth:`keep_only` (None: all).
    """

    def __init__(self, x: Tensor, y: Tensor, train_indices: Sequence[Tensor], test_indices: Sequence[Tensor],
                 device: torch.device | str = "cpu", eval_batch_size: int = 2048):
        if len(train_indices) != len(test_indices):
            raise ValueError(
                f"got {len(train_indices)} train and {len(test_indices)} test index sets: one of each per client"
            )
        super().__init__([len(i) for i in train_indices], [len(i) for i in test_indices])
        self.device = torch.device(device)
        self.x, self.y = x.to(self.device), y.to(self.device)
        self.train_indices = [idx.to(self.device) for idx in train_indices]
        self.test_indices = [idx.to(self.device) for idx in test_indices]
        self.eval_batch_size = eval_batch_size
        self.own_client: int | None = None

    def holds(self, client: int) -> bool:
        """Whether this copy holds ``client``'s samples (all of them, unless :meth:`keep_only` dropped the
        others, as a node of a deployment does)."""
        return self.own_client in (None, client)

    def keep_only(self, client: int) -> None:
        """Drop every other client's samples: what the node of ``client`` holds in a deployment. The counts
        are unchanged; the other clients' splits become empty, so nothing of theirs can reach ``client``'s step."""
        own = torch.cat([self.train_indices[client], self.test_indices[client]])
        num_train = len(self.train_indices[client])
        self.x, self.y = self.x[own], self.y[own]
        positions = torch.arange(len(own), device=self.device)
        empty = positions[:0]
        self.train_indices = [positions[:num_train] if k == client else empty for k in range(self.num_clients)]
        self.test_indices = [positions[num_train:] if k == client else empty for k in range(self.num_clients)]
        self.own_client = client

    def train_label_counts(self) -> Tensor:
        """The ``K × C`` label counts of the clients' train splits."""
        return label_counts(self.y, self.train_indices, int(self.y.max()) + 1)

    def _indices(self, client: int, split: str) -> Tensor:
        splits = {"train": self.train_indices, "test": self.test_indices}
        if split not in splits:
            raise ValueError(f"unknown split {split!r}; sample clients have the splits {list(splits)}")
        return splits[split][client]

    def client_data(self, client: int, split: str = "train") -> tuple[Tensor, Tensor]:
        """The samples and labels of one client's ``"train"`` or ``"test"`` split."""
        indices = self._indices(client, split)
        return self.x[indices], self.y[indices]

    def batches(self, client: int, split: str, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Batch]:
        """With a ``generator``: shuffled minibatches of ``batch_size`` (a training epoch); without: the split
        in order, in batches of ``eval_batch_size`` (evaluation)."""
        return minibatches(self.x, self.y, self._indices(client, split), batch_size or self.eval_batch_size,
                           generator)


class GraphClients(ClientData):
    """Subgraph clients (:class:`~gflkit.data.subgraphs.ClientGraph`) on ``device``.

    A client's data is its subgraph, with the message-passing graph and the targets of each split given by a
    graph task (:class:`~gflkit.tasks.LinkPredictionTask`: training edges and labelled held-out pairs;
    :class:`~gflkit.tasks.NodeClassificationTask`: the subgraph and masked labels). A pass over a split is
    **one full batch**, so a local epoch is one optimiser step on the client's subgraph and ``batch_size`` is
    ignored. Training targets are redrawn per step by :meth:`~gflkit.tasks.LinkPredictionTask.training_targets`
    (fresh negative pairs) from the step's seeded stream.

    ``num_train`` counts a client's nodes :math:`|V_k|` (FedAvg's weights, FedVGAE's Eq. 2); ``num_test`` its
    test targets. ``num_nodes`` lists the :math:`|V_k|`: a method may enlarge a client's input graph
    (:meth:`replace_graph`, FedSage+'s generated neighbours), whose first ``num_nodes[k]`` nodes stay the
    client's own.

    :type clients: Sequence[~gflkit.data.subgraphs.ClientGraph]
    """

    SPLITS = ("train", "val", "test")
    evaluation_splits = ("test", "val")
    batchable = False

    def __init__(self, clients: Sequence[ClientGraph], task: GraphTask, device: torch.device | str = "cpu"):
        self.device = torch.device(device)
        self.task = task
        self.graphs = [task.inputs(client).to(self.device) for client in clients]
        self.num_nodes = [int(client.data.num_nodes) for client in clients]  # the clients' own nodes |V_k|
        self.targets = {split: [task.targets(client, split).to(self.device) for client in clients]
                        for split in self.SPLITS}
        super().__init__(self.num_nodes, [task.count(targets) for targets in self.targets["test"]])

    def client_data(self, client: int, split: str = "train") -> tuple[Data, Tensor]:
        """The graph (model input) and the ``split``'s targets of one client."""
        if split not in self.SPLITS:
            raise ValueError(f"unknown split {split!r}; graph clients have the splits {list(self.SPLITS)}")
        return self.graphs[client], self.targets[split][client]

    def replace_graph(self, client: int, graph: Data) -> None:
        """Make ``graph`` the model input of ``client`` (FedSage+'s mended subgraph).

        Its first ``num_nodes[client]`` nodes must be the client's own nodes, in order; any further node (a
        generated neighbour) is only seen by message passing: the targets of every split are kept
        (:meth:`~gflkit.tasks.NodeClassificationTask.resize_targets` marks the new nodes as no target) and
        training pairs of link prediction are still drawn among the client's own nodes.
        """
        if graph.num_nodes < self.num_nodes[client]:
            raise ValueError(f"client {client}'s graph needs its {self.num_nodes[client]} own nodes first, "
                             f"got a graph of {graph.num_nodes} nodes")
        self.graphs[client] = graph.to(self.device)
        for split in self.SPLITS:
            self.targets[split][client] = self.task.resize_targets(self.targets[split][client], graph.num_nodes)

    def batches(self, client: int, split: str, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Batch]:
        """The client's whole graph once; with a ``generator`` (training) the targets are redrawn by the task."""
        graph, targets = self.client_data(client, split)
        if generator is not None:
            targets = self.task.training_targets(targets, self.num_nodes[client], generator)
        yield Batch(graph, targets)


class NoClientData(ClientData):
    """A server's view of the clients: the counts they reported and, where reported, their train-label counts
    (the side information a label-sharing graph needs); no sample of any client.

    Args:
        num_train, num_test: per client, its train and test counts.
        label_counts: the ``K × C`` train-label counts, or None when the clients reported none.
        device: where the label counts are handed out.
    """

    def __init__(self, num_train: Sequence[int], num_test: Sequence[int], label_counts: Tensor | None = None,
                 device: torch.device | str = "cpu"):
        super().__init__(num_train, num_test)
        self.label_counts = label_counts
        self.device = torch.device(device)

    def holds(self, client: int) -> bool:
        """Never: the server holds no client's samples."""
        return False

    def train_label_counts(self) -> Tensor:
        """The label counts the clients reported (a ``ValueError`` if they reported none)."""
        if self.label_counts is None:
            raise ValueError("the server has no label counts: its clients reported none (a classification "
                             "task reports them)")
        return self.label_counts.to(self.device)

    def batches(self, client: int, split: str, generator: torch.Generator | None = None,
                batch_size: int | None = None) -> Iterator[Batch]:
        """Refused: the server holds no client data."""
        raise RuntimeError(f"the server holds no client data (asked for client {client}'s {split!r} split): "
                           "what a server step needs must come from the clients in messages")

    def client_data(self, client: int, split: str = "train") -> tuple[Tensor, Tensor]:
        """Refused: the server holds no client data."""
        return next(self.batches(client, split))
