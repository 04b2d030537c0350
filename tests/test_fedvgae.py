import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.fedvgae import mix
from gflkit.engine import Schedule, run_rounds

from conftest import make_federation, run_full_and_resumed
from graph_fixtures import make_graph_federation


def test_mix_is_eq_12_on_the_shared_entries_only():
    local, global_model = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([5.0, 6.0, 7.0])
    shared = torch.tensor([True, True, False])
    assert torch.equal(mix(local, global_model, shared, 0.25), torch.tensor([0.25 * 1 + 0.75 * 5, 0.25 * 2 + 0.75 * 6, 3.0]))
    assert torch.equal(mix(local, global_model, shared, 1.0), local)


def setup_node_federation(**options):
    fed = make_graph_federation("node_classification", epochs=30)
    algorithm = build_algorithm("fedvgae", **options)
    algorithm.setup(fed)
    fed.models[0] = fed.train(0, 1, fed.initial).vector  # client 0's own, trained model
    return fed, algorithm


def test_finetuned_aggregation_starts_from_the_mix_when_validation_drops():
    fed, algorithm = setup_node_federation(phi=0.3)
    fed.global_model = torch.zeros(fed.dim)  # a useless global encoder: constant predictions
    local = fed.models[0]
    assert algorithm.validation_drop(fed, 0, local, torch.where(algorithm.shared, fed.global_model, local)) >= 1.0
    start = algorithm.configure(fed, 0)
    assert torch.equal(start, mix(local, fed.global_model, algorithm.shared, 0.3))
    assert algorithm.finetuned.tolist() == [1, 0, 0, 0]


def test_without_a_drop_the_client_takes_the_global_encoder_and_keeps_its_readout():
    fed, algorithm = setup_node_federation()
    local = fed.models[0]
    fed.global_model = torch.where(algorithm.shared, local + 1e-7, torch.full_like(local, 123.0))
    start = algorithm.configure(fed, 0)
    assert torch.equal(start[algorithm.shared], fed.global_model[algorithm.shared])
    assert torch.equal(start[~algorithm.shared], local[~algorithm.shared])
    assert algorithm.finetuned.sum() == 0
    no_finetune = build_algorithm("fedvgae", finetune=False)
    no_finetune.setup(fed)
    fed.global_model = torch.zeros(fed.dim)
    assert torch.equal(no_finetune.configure(fed, 0), torch.where(no_finetune.shared, 0.0, local))


def test_only_the_encoder_leaves_the_client_and_its_readout_is_untouched_by_aggregation():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("fedvgae")
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    shared = algorithm.shared
    assert 0 < int(shared.sum()) < fed.dim, "the readout is local"
    clients = torch.arange(fed.num_clients)
    uploads = torch.stack([algorithm.client_update(fed, k, 2).vector for k in range(fed.num_clients)])
    assert bool((uploads[:, ~shared] == 0).all()), "decoder / readout entries are not uploaded"
    before = fed.models.clone()
    poisoned = uploads.clone()
    poisoned[:, ~shared] = float("nan")  # whatever sits there, the server must not read it
    algorithm.aggregate(fed, clients, poisoned, 2)
    assert torch.equal(fed.models, before), "every client's model, readout included, is bit-identical"
    expected = (fed.num_train / fed.num_train.sum()) @ uploads[:, shared]
    assert torch.allclose(fed.global_model[shared], expected, atol=1e-6)
    assert torch.isfinite(fed.global_model).all()


@pytest.mark.parametrize("task", ["link_prediction", "node_classification"])
def test_first_layer_sharing_keeps_the_mu_and_log_sigma_layers_on_the_client(task):
    fed = make_graph_federation(task)
    algorithm = build_algorithm("fedvgae", share="first_layer")
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    shared = algorithm.shared
    for entry in fed.layout.entries:
        assert bool(shared[entry.slice].all()) == entry.name.startswith("vgae.encoder.conv1."), entry.name
        assert bool(shared[entry.slice].any()) == entry.name.startswith("vgae.encoder.conv1."), entry.name
    uploads = torch.stack([algorithm.client_update(fed, k, 2).vector for k in range(fed.num_clients)])
    assert bool((uploads[:, ~shared] == 0).all()), "μ / log σ (and readout) weights never leave a client"
    before = fed.models.clone()
    poisoned = uploads.clone()
    poisoned[:, ~shared] = float("nan")
    algorithm.aggregate(fed, torch.arange(fed.num_clients), poisoned, 2)
    assert torch.equal(fed.models, before) and torch.isfinite(fed.global_model[shared]).all()
    encoder = build_algorithm("fedvgae")
    encoder.setup(fed)
    assert int(shared.sum()) < int(encoder.shared.sum()), "the first layer is a strict part of the encoder"


def test_share_all_federates_every_entry():
    fed = make_graph_federation("node_classification")
    algorithm = build_algorithm("fedvgae", share="all")
    algorithm.setup(fed)
    assert bool(algorithm.shared.all())


@pytest.mark.parametrize("task, metric", [("link_prediction", "auc"), ("node_classification", "accuracy")])
def test_fedvgae_trains_personalised_models_with_finite_metrics(task, metric):
    fed = make_graph_federation(task)
    records = run_rounds(fed, build_algorithm("fedvgae"), Schedule(4, eval_every=2), progress=False)
    assert sorted(records["round"].unique()) == [2, 4] and records[metric].notna().all()
    assert not torch.equal(fed.models[0], fed.models[1]), "personalised rows"


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_graph_federation, lambda: build_algorithm("fedvgae"), tmp_path / "checkpoint.pt",
                               rounds=4)
    assert run.resumed.equals(run.full)
def test_sample_clients_need_an_explicit_validation_split():
    with pytest.raises(ValueError, match="validates on the split 'val'.*unknown split 'val'"):
        build_algorithm("fedvgae").setup(make_federation())
    build_algorithm("fedvgae", validation="train").setup(make_federation())


@pytest.mark.parametrize("options, message", [({"phi": 1.5}, "phi must lie in"), ({"drop": -1}, "drop must be"),
                                              ({"share": "decoder"}, "share must be one of"), ({"lam": -0.1}, "lam")])
def test_bad_fedvgae_options_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("fedvgae", **options)


def test_first_layer_sharing_needs_a_model_with_a_common_first_layer():
    with pytest.raises(ValueError, match="common first layer"):
        build_algorithm("fedvgae", share="first_layer", validation="train").setup(make_federation())


def test_reported_clients_keep_each_runs_best_validation_round():
    import pandas as pd

    from gflkit.papers.fedvgae import CLIENT_COLUMNS, reported_clients

    def records(method, best_round, **extra):
        rows = []
        for round_ in (1, 2, 3):
            for client in (0, 1):
                rows.append({"dataset": "cora", "method": method, "seed": 0, "client": client, "round": round_,
                             "auc": 50.0 + round_ + client, "ap": 40.0, "val_auc": 90.0 if round_ == best_round else 10.0,
                             **extra})
        return pd.DataFrame(rows)

    table3 = pd.concat([records("fedavg", 2), records("fedvgae", 3)])
    table6 = pd.concat([records("fedvgae", 1, setting="full"), records("fedvgae", 3, setting="without_both")])
    rows = reported_clients({"table3": (table3, "link_prediction"), "table6": (table6, "link_prediction"),
                             "table4": (None, "node_classification")})
    assert list(rows.columns) == CLIENT_COLUMNS and len(rows) == 8
    chosen = rows.groupby(["section", "setting"])["round"].unique().map(list).to_dict()
    assert chosen == {("table3", "fedavg"): [2], ("table3", "fedvgae"): [3], ("table6", "full"): [1],
                      ("table6", "without_both"): [3]}
    assert rows["accuracy"].isna().all() and set(rows["task"]) == {"link_prediction"}
