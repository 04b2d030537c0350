import pandas as pd
import pytest
import torch

from gflkit.experiment import RunConfig, build_federation, client_split, pool_indices, run, stored_key
from gflkit.data import load_dataset
from gflkit import metrics
from gflkit.results import ResultStore
from gflkit.runtime import Runtime

SMALL = dict(dataset="digits", num_clients=10, partition="shards", partition_options={"shards_per_client": 2},
             rounds=2, batch_size=16, lr=0.05)


def test_client_split_is_disjoint_and_covers_the_pool():
    config = RunConfig(**SMALL)
    data = load_dataset("digits")
    split = client_split(data, config)
    every = torch.cat(split.train + split.test)
    assert len(every) == len(set(every.tolist())), "no sample belongs to two clients or two splits"
    assert set(every.tolist()) <= set(pool_indices(data, config).tolist())
    for train, test in zip(split.train, split.test):
        assert len(test) == pytest.approx(0.2 * (len(train) + len(test)), abs=1)


def test_max_samples_subsamples_the_pool_deterministically():
    config = RunConfig(**{**SMALL, "max_samples": 500})
    data = load_dataset("digits")
    assert torch.equal(pool_indices(data, config), pool_indices(data, config))
    assert len(pool_indices(data, config)) == 500


def test_same_config_and_seed_give_identical_per_client_numbers_on_cpu():
    config = RunConfig(**SMALL, method="fedprox")
    first, second = run(config, Runtime(device="cpu"), progress=False), run(config, Runtime(device="cpu"), progress=False)
    pd.testing.assert_frame_equal(first, second)
    other = run(config.replace(seed=1), Runtime(device="cpu"), progress=False)
    assert not first["accuracy"].equals(other["accuracy"])


def test_store_returns_finished_runs_without_recomputing(tmp_path, monkeypatch):
    store = ResultStore(tmp_path)
    config = RunConfig(**SMALL)
    first = run(config, Runtime(device="cpu", store=store), progress=False)

    def fail(*args, **kwargs):
        raise AssertionError("a stored run must not be recomputed")

    monkeypatch.setattr("gflkit.experiment.build_federation", fail)
    pd.testing.assert_frame_equal(run(config, Runtime(device="cpu", store=store), progress=False), first)


def run_killed_in_round_3(config: RunConfig, store: ResultStore, monkeypatch) -> None:
    """Run ``config`` into ``store`` with checkpoints every 2 rounds, killed in round 3 (as by Ctrl-C)."""
    import gflkit.algorithms.fedavg as fedavg

    original = fedavg.FedAvg.aggregate

    def killed_in_round_3(self, fed, clients, updates, round):
        if round == 3:
            raise KeyboardInterrupt
        original(self, fed, clients, updates, round)

    monkeypatch.setattr(fedavg.FedAvg, "aggregate", killed_in_round_3)
    with pytest.raises(KeyboardInterrupt):
        run(config, Runtime(device="cpu", store=store), checkpoint_every=2, progress=False)
    monkeypatch.setattr(fedavg.FedAvg, "aggregate", original)


def test_killed_run_resumes_from_its_checkpoint_to_the_same_numbers(tmp_path, monkeypatch):
    config = RunConfig(**{**SMALL, "rounds": 4})
    uninterrupted = run(config, Runtime(device="cpu"), progress=False)
    store = ResultStore(tmp_path)
    run_killed_in_round_3(config, store, monkeypatch)
    resumed = run(config, Runtime(device="cpu", store=store), checkpoint_every=2, progress=False)
    pd.testing.assert_frame_equal(resumed, uninterrupted)


class WritesAMarker:
    """A pickle whose loading runs ``os.system``: what someone with write access to a shared results folder
    could leave as an unfinished run's checkpoint."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


def test_a_planted_checkpoint_in_a_runs_folder_runs_no_code_and_the_run_is_recomputed(tmp_path):
    config = RunConfig(**SMALL)
    store = ResultStore(tmp_path / "results")
    checkpoint = store.checkpoint(stored_key(config, "cpu"))
    checkpoint.path.parent.mkdir(parents=True, exist_ok=True)
    marker = tmp_path / "code-ran"
    torch.save({"models": WritesAMarker(marker)}, checkpoint.path)
    with pytest.warns(UserWarning, match=r"checkpoint .*checkpoint\.pt is unusable"):
        records = run(config, Runtime(device="cpu", store=store), progress=False)
    assert not marker.exists()
    pd.testing.assert_frame_equal(records, run(config, Runtime(device="cpu"), progress=False))


def test_a_checkpoint_copied_from_another_run_is_set_aside_and_the_run_recomputed(tmp_path, monkeypatch):
    """Another learning rate's round-2 checkpoint, copied into this run's unfinished folder, fits every
    shape; only the run it names tells them apart."""
    config, other = RunConfig(**{**SMALL, "rounds": 4}), RunConfig(**{**SMALL, "rounds": 4, "lr": 0.5})
    store = ResultStore(tmp_path / "results")
    run_killed_in_round_3(other, store, monkeypatch)
    planted = store.checkpoint(stored_key(config, "cpu")).path
    planted.parent.mkdir(parents=True)
    planted.write_bytes(store.checkpoint(stored_key(other, "cpu")).path.read_bytes())
    with pytest.warns(UserWarning, match=r"checkpoint .*checkpoint\.pt is unusable \(ValueError: it belongs to run"):
        records = run(config, Runtime(device="cpu", store=store), checkpoint_every=2, progress=False)
    pd.testing.assert_frame_equal(records, run(config, Runtime(device="cpu"), progress=False))


def test_federation_matches_the_config():
    fed = build_federation(RunConfig(**SMALL), Runtime(device="cpu"))
    assert fed.num_clients == 10
    assert fed.data.x.shape[1:] == (1, 8, 8)


@pytest.mark.parametrize("change, message", [
    ({"dataset": "imagenet"}, "unknown dataset 'imagenet'"),
    ({"method": "fedsgd"}, "unknown method 'fedsgd'"),
    ({"partition": "powerlaw"}, "unknown partition 'powerlaw'"),
    ({"rounds": 0}, "rounds must be a positive"),
    ({"rounds": 2.5}, r"rounds must be an integer, got 2\.5"),
    ({"rounds": True}, "rounds must be an integer, got True"),
    ({"num_clients": 4.0}, r"num_clients must be an integer, got 4\.0"),
    ({"clients_per_round": "2"}, "clients_per_round must be an integer, got '2'"),
    ({"lr": float("nan")}, "lr must be a finite number, got nan"),
    ({"momentum": float("inf")}, "momentum must be a finite number, got inf"),
    ({"held_out": False}, "held_out must be a finite number, got False"),
    ({"test_ratio": 1.5}, "test_ratio must lie in"),
    ({"method": "fedprox", "method_options": {"mu": -1}}, "mu must be >= 0"),
    ({"lr": 0.0}, "lr must be > 0"),
    ({"optimizer": "rmsprop"}, "unknown optimizer 'rmsprop'"),
    ({"optimizer_state": "kept"}, "unknown optimizer_state 'kept'"),
    ({"task_options": {"reconstruction": "dense"}}, "reconstruction"),  # a classification task has no such option
    ({"dataset": "cora", "partition": "louvain", "partition_options": {}, "task": "link_prediction", "model": "vgae",
      "task_options": {"reconstruction": "full"}},
     "unknown reconstruction 'full'"),
])
def test_bad_configs_are_rejected(change, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**{**SMALL, **change})


def test_run_grid_concatenates_runs_with_their_labels_and_keeps_artifacts(tmp_path):
    from gflkit.executors import run_grid
    from gflkit.experiment import Run, stored_artifacts

    store = ResultStore(tmp_path)
    configs = [RunConfig(**{**SMALL, "method": "fedska", "method_options": {"k": 3}, "partition_options": {"shards_per_client": q}})
               for q in (2, 5)]
    runtime = Runtime(device="cpu", store=store)
    records = run_grid([Run(c, {"q": q, "name": f"q{q}"}) for c, q in zip(configs, (2, 5))], runtime)
    assert records.groupby("q")["name"].unique().map(list).to_dict() == {2: ["q2"], 5: ["q5"]}
    assert list(records.columns[-2:]) == ["q", "name"], "labels follow the engine's columns, in their order"
    bare = run_grid(configs[:1], Runtime(device="cpu", store=store))
    assert "q" not in bare and bare.equals(records[records["q"] == 2].drop(columns=["q", "name"]).reset_index(drop=True))
    assert len(records) == 2 * 10 * SMALL["rounds"]
    adjacency = stored_artifacts(configs[0], Runtime(device="cpu", store=store))["adjacency"]
    assert adjacency.shape == (10, 10) and torch.allclose(adjacency, adjacency.T, atol=1e-6)


def test_method_options_are_completed_so_equal_runs_share_one_key():
    from gflkit.results import config_key

    implicit = RunConfig(**SMALL, method="fedprox")
    explicit = RunConfig(**SMALL, method="fedprox", method_options={"mu": 0.01})
    assert implicit.method_options == {"mu": 0.01, "share": "all"}
    assert config_key(implicit.to_dict()) == config_key(explicit.to_dict())


def test_held_out_clients_never_train_and_are_scored_on_all_their_samples():
    config = RunConfig(**{**SMALL, "held_out": 0.3, "clients_per_round": 3, "rounds": 3})
    data = load_dataset("digits")
    plain, split = client_split(data, config.replace(held_out=0.0)), client_split(data, config)
    held = split.held_out.nonzero().flatten().tolist()
    assert len(held) == 3
    for k in range(config.num_clients):
        if k in held:
            assert len(split.train[k]) == 0
            assert torch.equal(split.test[k], torch.cat([plain.train[k], plain.test[k]]).sort().values)
        else:
            assert torch.equal(split.train[k], plain.train[k]) and torch.equal(split.test[k], plain.test[k])
    records = run(config, Runtime(device="cpu"), progress=False)
    trained = records.dropna(subset=["train_loss"])["client"].unique().tolist()
    assert trained and not set(trained) & set(held), "a held-out client trained"
    assert sorted(records.loc[records["held_out"], "client"].unique().tolist()) == held
    unseen = metrics.held_out_rows(records)
    assert set(unseen["client"]) == set(held)
    with pytest.raises(ValueError, match="held out no clients"):
        metrics.held_out_rows(run(RunConfig(**SMALL), Runtime(device="cpu"), progress=False))


@pytest.mark.parametrize("fraction", [-0.1, 1.0])
def test_a_held_out_fraction_outside_0_1_is_rejected(fraction):
    with pytest.raises(ValueError, match="held_out must be a fraction"):
        RunConfig(**SMALL, held_out=fraction)


def test_a_client_without_a_test_sample_is_never_scored_zero():
    """1,000 IID clients on 1,797 digits: about a fifth hold no test sample (80/20 split of one or two)."""
    from gflkit.papers.comparison import Scoring, compare

    config = RunConfig(dataset="digits", num_clients=1000, partition="iid", rounds=1, batch_size=8, lr=0.05)
    records = run(config, Runtime(device="cpu"), progress=False)
    empty = records[records["num_samples"] == 0]
    assert 0 < len(empty) < 1000 and empty["accuracy"].isna().all() and empty["loss"].isna().all()
    table = metrics.final_summary(records, by=("method",))
    scored = records[records["num_samples"] > 0]
    assert table["mean"].item() == pytest.approx(scored["accuracy"].mean())
    assert table["scored"].item() == f"{len(scored)} of 1000 clients"
    other = records.assign(method="other", accuracy=records["accuracy"] + 1.0)
    assert compare(pd.concat([records, other]), "other", "fedavg", Scoring()).estimate == pytest.approx(1.0)
