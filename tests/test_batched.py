"""Batched local training (gflkit.batched) gives the sequential loop's numbers, and falls back where it must."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gflkit.algorithms import build_algorithm
from gflkit.batched import (batch_schedule, batching_obstacle, contiguous_order, slower_than_sequential, step_groups,
                            train_batched)
from gflkit.engine import Schedule, run_rounds, train_round
from gflkit.experiment import RunConfig, build_federation
from gflkit.federation import Federation
from gflkit.models.base import FeatureModel
from gflkit.seeding import generator
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig
from gflkit.runtime import Runtime

from conftest import make_federation, run_full_and_resumed

#: every method that opts in, with options that fit six clients
BATCHABLE = {
    "fedavg": {}, "fedprox": {"mu": 0.1}, "local": {}, "ditto": {}, "fedu": {}, "sfl": {}, "fedska": {"k": 3},
    "moon": {}, "pfedgraph": {}, "fedamp": {}, "pdca": {}, "ifca": {}, "cfl": {},
}


def digits_federation(method: str, model: str, mode: str, **overrides):
    """Six Dirichlet clients of unequal sizes, momentum, weight decay and two local epochs."""
    config = RunConfig(dataset="digits", num_clients=6, method=method, method_options=BATCHABLE.get(method, {}),
                       model=model, partition="dirichlet", partition_options={"alpha": 0.5}, batch_size=16,
                       lr=0.05, momentum=0.5, weight_decay=1e-3, local_epochs=2, **overrides)
    fed = build_federation(config, Runtime(data_root=None, device="cpu"))
    in_default_dtype(fed)
    fed.trainer.mode = mode
    algorithm = build_algorithm(method, **config.method_options)
    algorithm.setup(fed)
    return fed, algorithm


def in_default_dtype(fed: Federation) -> None:
    """Cast the loaded samples and client sizes to torch's default dtype, which the models are built in."""
    dtype = torch.get_default_dtype()
    fed.data.x = fed.data.x.to(dtype)
    fed.num_train, fed.num_test = fed.num_train.to(dtype), fed.num_test.to(dtype)


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / a.abs().max().clamp(min=1e-12))


def after_round(method: str, model: str, mode: str, round: int):
    """The federation and the round's local results after ``round`` rounds: every earlier round on the
    sequential path, the last one on ``mode``, so both paths start that round from the same state."""
    fed, algorithm = digits_federation(method, model, "sequential")
    for earlier in range(1, round):
        train_round(fed, algorithm, torch.arange(fed.num_clients), earlier)
    fed.trainer.mode = mode
    fed.trainer.paths.clear()
    results = train_round(fed, algorithm, torch.arange(fed.num_clients), round)
    assert fed.trainer.paths == {mode}
    return fed, torch.stack([r.vector for r in results]), torch.tensor([r.loss for r in results])


@pytest.fixture
def double_precision():
    """Both loops in float64. In float32 the two loops' sums differ by 1e-7 (another reduction order, another
    CPU's vector width), and a CNN's ReLU or max-pool kink, taken on one side of a near-tie, turns that into
    1e-4 to 1e-3 in one client's step (FedAMP and IFCA on an AVX2 CPU): float noise, not a difference
    between the loops. In float64 the same sums differ by 1e-16 and no tie is near enough to flip, so the
    comparison can be tight enough to catch any real difference."""
    dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(dtype)


#: relative tolerance in float64, where the two loops' sums differ by a few units of 1e-16
DOUBLE_TOLERANCE = 1e-12


@pytest.mark.parametrize("model", ["mclr", "simple_cnn"])
@pytest.mark.parametrize("method", sorted(BATCHABLE))
def test_batched_clients_train_the_sequential_models(method, model, double_precision):
    # rounds 2 and 3 exercise the terms that need a first aggregation (FedSKA's structure, MOON's history, ...)
    for round in (1, 2, 3):
        (sequential, uploads, losses), (batched, batched_uploads, batched_losses) = (
            after_round(method, model, mode, round) for mode in ("sequential", "batched"))
        assert len(set(len(i) for i in batched.data.train_indices)) > 1, "clients of unequal sizes"
        assert uploads.dtype == torch.float64
        assert relative_difference(uploads, batched_uploads) <= DOUBLE_TOLERANCE
        assert relative_difference(losses, batched_losses) <= DOUBLE_TOLERANCE
        assert relative_difference(sequential.models, batched.models) <= DOUBLE_TOLERANCE
        if sequential.global_model is not None:
            assert relative_difference(sequential.global_model, batched.global_model) <= DOUBLE_TOLERANCE


def test_the_schedule_is_the_sequential_loops_batches_and_unequal_clients_stop_early():
    fed, _ = digits_federation("fedavg", "mclr", "batched")
    config = TrainConfig(epochs=2, batch_size=16)
    positions, samples, sizes = batch_schedule(fed, [0, 3], round=4, stream=1, config=config)
    for row, client in enumerate([0, 3]):
        order = generator(fed.seed, 4, client, 1)
        expected = [batch.positions for _ in range(2) for batch in fed.batches(client, "train", order, 16)]
        assert sizes[row].tolist()[: len(expected)] == [len(b) for b in expected]
        assert (sizes[row, len(expected):] == 0).all(), "a client whose batches are used up takes no step"
        for step, batch in enumerate(expected):
            assert torch.equal(positions[row, step, : len(batch)], batch)
            assert torch.equal(samples[row, step, : len(batch)], fed.data.train_indices[client][batch])


def test_clients_are_ordered_so_that_each_steps_groups_are_contiguous():
    # one epoch of batch 4: clients of 9, 4, 10, 2 and 9 samples
    sizes = torch.tensor([[4, 4, 1], [4, 0, 0], [4, 4, 2], [2, 0, 0], [4, 4, 1]])
    order = contiguous_order(sizes)
    assert order.tolist() == [2, 0, 4, 1, 3]  # the most batches first; ties keep their order
    for step, column in enumerate(sizes[order].t().tolist()):
        groups = list(step_groups(column, chunk=10))
        assert all(isinstance(rows, slice) for _, rows in groups)
        rows_of = {size: [r for r, s in enumerate(column) if s == size] for size in set(column) - {0}}
        assert sorted((size, rows.start, rows.stop) for size, rows in groups) == sorted(
            (size, rows[0], rows[-1] + 1) for size, rows in rows_of.items())


def test_groups_that_cannot_be_contiguous_are_lists_and_chunks_split_them():
    assert list(step_groups([3, 2, 3, 0, 3], chunk=10)) == [(2, slice(1, 2)), (3, [0, 2, 4])]
    assert list(step_groups([3, 3, 3, 0], chunk=2)) == [(3, slice(0, 2)), (3, slice(2, 3))]
    assert list(step_groups([0, 0], chunk=2)) == []


def test_a_padding_loop_trains_all_of_a_steps_batches_as_one_group_as_wide_as_the_widest():
    assert list(step_groups([4, 4, 3, 1, 0], chunk=10, pad=True)) == [(4, slice(0, 4))]
    assert list(step_groups([2, 0, 3], chunk=10, pad=True)) == [(3, [0, 2])]
    assert list(step_groups([4, 2, 1], chunk=2, pad=True)) == [(4, slice(0, 2)), (4, slice(2, 3))]


def test_chunks_of_clients_give_the_same_models():
    whole, algorithm = digits_federation("fedprox", "mclr", "batched")
    chunked, _ = digits_federation("fedprox", "mclr", "batched")
    chunked.trainer.client_chunk = 2
    starts = whole.initial.expand(6, -1)
    contexts = [algorithm.local_context(whole, k) for k in range(6)]
    proximal = algorithm.proximal(whole)
    config = whole.train_config
    a = train_batched(whole, list(range(6)), 1, starts, None, contexts, 0, config, proximal=proximal)
    b = train_batched(chunked, list(range(6)), 1, starts, None, contexts, 0, config, client_chunk=2, proximal=proximal)
    assert torch.allclose(torch.stack([r.vector for r in a]), torch.stack([r.vector for r in b]), atol=1e-6)


@pytest.mark.parametrize("mode", ["sequential", "batched"])
def test_runs_are_deterministic_and_resume_exactly_on_both_paths(tmp_path, mode):
    def make_fed():
        fed = make_federation(num_clients=4)
        fed.trainer.mode = mode
        return fed

    run = run_full_and_resumed(make_fed, lambda: build_algorithm("fedprox", mu=0.1), tmp_path / "checkpoint.pt")
    assert (run.full["local_training"] == mode).all()
    again = run_rounds(make_fed(), build_algorithm("fedprox", mu=0.1), Schedule(3), progress=False)
    metrics = ["accuracy", "loss", "train_loss"]
    assert run.full[metrics].equals(again[metrics]), "two runs are identical"
    assert run.full[metrics].equals(run.resumed[metrics]), "a resumed run is the uninterrupted one"


def test_records_say_which_path_ran():
    records = {}
    for mode in ("sequential", "batched"):
        fed = make_federation(num_clients=4)
        fed.trainer.mode = mode
        records[mode] = run_rounds(fed, build_algorithm("fedavg"), Schedule(2), progress=False)
        assert (records[mode]["local_training"] == mode).all()
    assert torch.allclose(torch.tensor(records["sequential"]["loss"].values),
                          torch.tensor(records["batched"]["loss"].values), rtol=1e-5)


def test_a_method_with_its_own_client_step_trains_sequentially_and_says_so():
    fed = make_federation(num_clients=4)  # "auto"
    records = run_rounds(fed, build_algorithm("scaffold"), Schedule(1), progress=False)
    assert (records["local_training"] == "sequential").all()


def test_moon_with_clients_of_different_histories_falls_back_for_that_round():
    fed = make_federation(num_clients=4)
    fed.trainer.mode = "auto"
    records = run_rounds(fed, build_algorithm("moon"), Schedule(3, clients_per_round=2), progress=False)
    paths = records.groupby("round")["local_training"].first().tolist()
    assert paths[0] == "batched", "round 1: no client has a history, the contexts stack"
    assert "sequential" in paths, "a round whose clients hold 0 and 1 previous models cannot stack them"


class NormalisedNet(FeatureModel):
    """A small model with BatchNorm statistics (buffers), which batched training cannot carry."""

    def __init__(self):
        super().__init__()
        self.hidden, self.norm, self.classifier = nn.Linear(32, 8), nn.BatchNorm1d(8), nn.Linear(8, 3)
        self.feature_dim = 8

    def features(self, x):
        return self.norm(self.hidden(x.flatten(1)))

    def head(self, h):
        return self.classifier(h)


def test_obstacles_to_batching_are_named():
    fed = make_federation(num_clients=4)
    assert batching_obstacle(fed, fed.train_config, [{}, {}]) is None
    assert slower_than_sequential(fed, [0]) == "a single client trains"
    assert batching_obstacle(fed, TrainConfig(optimizer="adam"), [{}, {}]).startswith("optimizer='adam'")
    assert "persistent" in batching_obstacle(fed, TrainConfig(optimizer_state="persistent"), [{}, {}])
    assert "differ in shape" in batching_obstacle(fed, fed.train_config, [{"a": torch.zeros(2)}, {"a": torch.zeros(3)}])


def test_a_model_with_batchnorm_falls_back_to_the_sequential_loop():
    reference = make_federation(num_clients=4)
    fed = Federation(reference.data.x, reference.data.y, reference.data.train_indices, reference.data.test_indices, NormalisedNet(),
                     ClassificationTask(), TrainConfig(batch_size=8, lr=0.1))
    assert "has buffers" in batching_obstacle(fed, fed.train_config, [{}] * 4)
    fed.trainer.mode = "batched"
    with pytest.raises(ValueError, match="local_training='batched' cannot apply: .*has buffers"):
        fed.train_clients([0, 1], 1, fed.initial.expand(2, -1))
    fed.trainer.mode = "auto"
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(1), progress=False)
    assert (records["local_training"] == "sequential").all()


def test_auto_keeps_convolutions_sequential_on_a_cpu_but_batched_can_be_asked_for():
    fed, algorithm = digits_federation("fedavg", "simple_cnn", "auto")
    assert "grouped convolutions" in slower_than_sequential(fed, [0, 1])
    fed.trainer.paths.clear()
    train_round(fed, algorithm, torch.arange(fed.num_clients), 1)
    assert fed.trainer.paths == {"sequential"}


def test_an_unknown_local_training_mode_is_refused():
    fed = make_federation(num_clients=2)
    fed.trainer.mode = "vectorised"
    with pytest.raises(ValueError, match="unknown local_training 'vectorised'; choose one of"):
        fed.train_clients([0, 1], 1, fed.initial.expand(2, -1))


def test_the_automatic_chunk_fits_the_memory_budget(monkeypatch):
    import gflkit.batched as batched

    fed = make_federation(num_clients=4)
    per_client = 4 * 5 * fed.dim  # at least the row, its gradient, momentum and two temporaries
    monkeypatch.setattr(batched, "CPU_MEMORY_BUDGET", 1)
    assert batched.auto_client_chunk(fed, 8) == 1, "never less than one client"
    monkeypatch.setattr(batched, "CPU_MEMORY_BUDGET", 10 * per_client)
    assert 1 <= batched.auto_client_chunk(fed, 8) < 10, "activations count too"
    assert batched.auto_client_chunk(fed, 1) >= batched.auto_client_chunk(fed, 64), "larger batches, fewer clients"
