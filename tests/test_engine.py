import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.checkpoint import Checkpoint
from gflkit.engine import Schedule, run_rounds, sample_clients

from conftest import make_federation
from graph_fixtures import make_graph_federation


def test_records_have_one_row_per_evaluated_round_and_client():
    fed = make_federation()
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(5, eval_every=2), progress=False)
    assert sorted(records["round"].unique()) == [2, 4, 5]
    assert len(records) == 3 * fed.num_clients
    assert {"round", "client", "accuracy", "loss", "num_samples", "train_loss"} <= set(records.columns)


def test_client_sampling_is_seeded_and_partial():
    a = sample_clients(10, 3, seed=0, round=1)
    assert torch.equal(a, sample_clients(10, 3, seed=0, round=1))
    assert len(a) == 3 and len(set(a.tolist())) == 3
    assert torch.equal(sample_clients(10, None, 0, 1), torch.arange(10))
    fed = make_federation(num_clients=4)
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(2, clients_per_round=2), progress=False)
    assert records.groupby("round")["train_loss"].count().tolist() == [2, 2]


def test_same_config_and_seed_give_identical_per_client_numbers():
    runs = [run_rounds(make_federation(seed=7), build_algorithm("fedprox"), Schedule(3), progress=False)
            for _ in range(2)]
    pd.testing.assert_frame_equal(runs[0], runs[1])


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    full = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(6), progress=False)

    class Killed(Exception):
        pass

    class DieAfterRound4(type(build_algorithm("fedavg"))):
        def aggregate(self, fed, clients, updates, round):
            if round == 5:
                raise Killed
            super().aggregate(fed, clients, updates, round)

    ckpt = Checkpoint(tmp_path / "run" / "checkpoint.pt")
    with pytest.raises(Killed):
        run_rounds(make_federation(), DieAfterRound4(), Schedule(6, checkpoint_every=2), ckpt, progress=False)
    assert torch.load(ckpt.path, weights_only=False)["round"] == 4
    resumed = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(6, checkpoint_every=2), ckpt,
                         progress=False)
    pd.testing.assert_frame_equal(full, resumed)


@pytest.mark.parametrize("damaged", [("checkpoint.pt",), ("checkpoint.pt", "checkpoint.previous.pt")])
def test_a_truncated_checkpoint_is_set_aside_and_the_run_resumes_from_an_earlier_one(tmp_path, damaged):
    full = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(6), progress=False)
    ckpt = Checkpoint(tmp_path / "checkpoint.pt")
    run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(4, checkpoint_every=2), ckpt, progress=False)
    assert ckpt.previous.exists(), "the round-2 checkpoint is kept beside the round-4 one"
    for name in damaged:
        path = tmp_path / name
        path.write_bytes(path.read_bytes()[:100])  # a disk that filled up, a copy cut short
    with pytest.warns(UserWarning, match=r"is unusable .* set aside as checkpoint(\.previous)?\.pt\.corrupt"):
        resumed = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(6, checkpoint_every=2), ckpt,
                             progress=False)
    pd.testing.assert_frame_equal(full, resumed)
    assert all((tmp_path / f"{name}.corrupt").exists() for name in damaged)


class WritesAMarker:
    """What an attacker would pickle into a checkpoint: unpickling it calls ``os.system``."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def resumed_after_replacing(tmp_path: Path, replace) -> tuple[pd.DataFrame, pd.DataFrame, Checkpoint]:
    """An uninterrupted 4-round run, and the same run resumed after ``replace(checkpoint_path)`` rewrote its
    round-2 checkpoint (with no previous checkpoint to fall back to)."""
    full = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(4), progress=False)
    ckpt = Checkpoint(tmp_path / "checkpoint.pt")
    run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(2, checkpoint_every=2), ckpt, progress=False)
    replace(ckpt.path)
    resumed = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(4, checkpoint_every=2), ckpt,
                         progress=False)
    return full, resumed, ckpt


def test_a_checkpoint_that_would_run_code_runs_none_and_is_set_aside(tmp_path):
    marker = tmp_path / "pwned"

    def plant(path):
        torch.save({"format": 3, "round": 2, "payload": WritesAMarker(marker)}, path)

    with pytest.warns(UserWarning, match=r"checkpoint .*checkpoint.pt is unusable \(UnpicklingError.*set aside"):
        full, resumed, ckpt = resumed_after_replacing(tmp_path, plant)
    assert not marker.exists(), "loading a checkpoint must not execute what it contains"
    pd.testing.assert_frame_equal(full, resumed)  # recomputed from the start
    assert (tmp_path / "checkpoint.pt.corrupt").exists()


@pytest.mark.parametrize("change, reason", [
    (lambda state: state.pop("records"), "'records' is missing"),
    (lambda state: state.update(models=state["models"][:, :3]), "'models' is .*, the run's is"),
    (lambda state: state.update(round=99), "round 99 lies outside the run's rounds 1..4"),
    (lambda state: state.update(format=1), "checkpoint format 1"),
    (lambda state: state.pop("format"), "checkpoint format None"),
    (lambda state: state.update(run="9f2c"), "it belongs to run '9f2c', not to this run ''"),
    (lambda state: state["records"][-1].update(accuracy=999.0), "record 7: 'accuracy' = 999.0 lies outside"),
    (lambda state: state["records"][3].update(loss_local="low"), "record 3: 'loss_local' is a str, not a number"),
    (lambda state: state.update(records=[1, 2, 3]), "it holds 3 records; rounds 1..2 of this run give 8"),
    (lambda state: state.update(records=state["records"][4:] + state["records"][:4]), "record 0 is not round 1"),
    (lambda state: state.update(local_scores={7: {"accuracy": 50.0}}), "an entry 7 that is not a client"),
    (lambda state: state["algorithm"].update(proxy=torch.zeros(3)), r"fedavg state has the keys \['proxy'\]"),
])
def test_a_checkpoint_that_does_not_fit_the_run_is_set_aside(tmp_path, change, reason):
    def rewrite(path):
        state = torch.load(path, weights_only=True)
        change(state)
        torch.save(state, path)

    with pytest.warns(UserWarning, match=f"is unusable \\(ValueError: .*{reason}"):
        full, resumed, _ = resumed_after_replacing(tmp_path, rewrite)
    pd.testing.assert_frame_equal(full, resumed)


def test_a_method_state_is_checked_against_the_state_it_has_after_setup(tmp_path):
    """FED-PUB's state after a round, with one entry replaced, added or of another shape: set aside, and
    the run recomputes to the uninterrupted numbers."""
    fed = make_federation

    def run_with(change):
        full = run_rounds(fed(), build_algorithm("fedpub"), Schedule(3), progress=False)
        ckpt = Checkpoint(tmp_path / change.__name__ / "checkpoint.pt")
        run_rounds(fed(), build_algorithm("fedpub"), Schedule(2, checkpoint_every=2), ckpt, progress=False)
        state = torch.load(ckpt.path, weights_only=True)
        change(state["algorithm"])
        torch.save(state, ckpt.path)
        resumed = run_rounds(fed(), build_algorithm("fedpub"), Schedule(3, checkpoint_every=2), ckpt, progress=False)
        pd.testing.assert_frame_equal(full, resumed)

    def adds_params(state):
        state["params"] = 1.0

    def reshapes_personal(state):
        state["personal"] = state["personal"][:, :5]

    def retypes_weights(state):
        state["weights"] = state["weights"].double()

    for change, reason in [(adds_params, r"fedpub state has the keys \['params'\] it may not hold"),
                           (reshapes_personal, r"fedpub state\['personal'\] is \(4, 5\)"),
                           (retypes_weights, r"fedpub state\['weights'\] is .* torch.float64")]:
        with pytest.warns(UserWarning, match=f"is unusable \\(ValueError: {reason}"):
            run_with(change)


def test_server_protocol_scores_the_global_model_and_local_the_fine_tuned_copy():
    fed = make_federation()
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(1), progress=False).set_index("client")
    reference = make_federation()
    trained = [reference.train(k, 1, reference.initial).vector for k in range(fed.num_clients)]
    for k in range(fed.num_clients):
        on_global = reference.client_metrics(k, fed.global_model, "test")
        fine_tuned = reference.client_metrics(k, trained[k], "test")
        assert records.loc[k, "accuracy"] == on_global["accuracy"]
        assert records.loc[k, "accuracy_local"] == fine_tuned["accuracy"]
        # the round trains its clients batched, the reference one by one: equal to float tolerance
        assert records.loc[k, "loss_local"] == pytest.approx(fine_tuned["loss"], rel=1e-5)
    assert (records["loss"] != records["loss_local"]).all()


def test_switching_the_protocol_swaps_the_columns_and_changes_no_training():
    server = run_rounds(make_federation(), build_algorithm("ifca", num_clusters=2), Schedule(2), progress=False)
    local = run_rounds(make_federation(), build_algorithm("ifca", num_clusters=2), Schedule(2, evaluate="local"),
                       progress=False)
    assert local["accuracy"].tolist() == server["accuracy_local"].tolist()
    assert local["accuracy_server"].tolist() == server["accuracy"].tolist()
    assert local["train_loss"].tolist() == server["train_loss"].tolist()


def test_a_non_participant_keeps_the_score_of_the_model_it_last_trained():
    fed = make_federation(num_clients=4)
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(3, clients_per_round=2, evaluate="local"),
                         progress=False)
    for client, rows in records.groupby("client"):
        rows = rows.sort_values("round")
        took_part = rows["train_loss"].notna().tolist()
        scores = rows["accuracy"].tolist()
        for i in range(1, len(rows)):
            if any(took_part[:i]) and not took_part[i]:
                assert scores[i] == scores[i - 1]
            if not any(took_part[: i + 1]):  # never trained yet: the server's model
                assert scores[i] == rows["accuracy_server"].iloc[i]


def test_resume_keeps_the_local_scores_of_non_participants(tmp_path):
    schedule = dict(clients_per_round=2, evaluate="local", checkpoint_every=2)
    full = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(5, **schedule), progress=False)
    ckpt = Checkpoint(tmp_path / "c.pt")
    run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(2, **schedule), ckpt, progress=False)
    resumed = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(5, **schedule), ckpt, progress=False)
    pd.testing.assert_frame_equal(full, resumed)


@pytest.mark.parametrize("kwargs, message", [
    ({"rounds": 0}, "rounds must be a positive"),
    ({"rounds": 3, "evaluate": "global"}, "unknown evaluation protocol evaluate='global'"),
    ({"rounds": 3, "clients_per_round": 0}, "clients_per_round"),
    ({"rounds": 3, "eval_every": 0}, "eval_every"),
])
def test_bad_schedules_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Schedule(**kwargs)


def test_graph_runs_also_record_validation_metrics_under_both_protocols():
    fed = make_graph_federation("node_classification")
    records = run_rounds(fed, build_algorithm("fedavg"), Schedule(2), progress=False)
    assert {"val_accuracy", "val_loss", "val_accuracy_local", "val_loss_local"} <= set(records.columns)
    assert "val_num_samples" not in records.columns
    last = records[records["round"] == 2].set_index("client")
    for k in range(fed.num_clients):
        on_val = fed.client_metrics(k, fed.global_model, "val")
        assert last.loc[k, "val_accuracy"] == on_val["accuracy"] and last.loc[k, "val_loss"] == on_val["loss"]
    assert not last["val_accuracy"].equals(last["accuracy"])


def test_sample_runs_without_a_validation_split_record_none():
    records = run_rounds(make_federation(), build_algorithm("fedavg"), Schedule(1), progress=False)
    assert not [c for c in records.columns if c.startswith("val_")]
