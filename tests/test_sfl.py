import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms import sfl as sfl_module
from gflkit.algorithms.sfl import graph_propagate, self_loop_propagation
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs import given_graph
from gflkit.graphs.graph_constructor import LearnedGraph
from gflkit.training import LocalStep

from conftest import make_federation, run_full_and_resumed

PATH4 = torch.tensor([[0.0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]])
# D^{-1}(A + I) of the path 0 - 1 - 2
PROPAGATION3 = torch.tensor([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])


def test_propagation_on_a_path_graph_matches_hand_computation():
    models = torch.tensor([[6.0, 0.0], [0.0, 6.0], [0.0, 0.0]])
    one_hop = torch.tensor([[3.0, 3.0], [2.0, 2.0], [0.0, 3.0]])
    two_hops = torch.tensor([[2.5, 2.5], [5 / 3, 8 / 3], [1.0, 2.5]])
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=1), one_hop)
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=2), two_hops)
    mixed = torch.tensor([[4.25, 1.25], [5 / 6, 13 / 3], [0.5, 1.25]])  # 0.5 * two hops + 0.5 * models
    assert torch.allclose(graph_propagate(PROPAGATION3, models, layers=2, alpha=0.5), mixed)
    assert torch.equal(graph_propagate(PROPAGATION3, models, layers=3, alpha=0.0), models)


def test_server_propagates_all_personalised_models_and_reads_out_their_mean():
    fed = make_federation()
    algorithm = build_algorithm("sfl")
    algorithm.setup(fed)
    assert torch.equal(algorithm.adjacency, given_graph(fed))
    algorithm.propagation = self_loop_propagation(PATH4)
    assert torch.allclose(algorithm.propagation[:2, :3], PROPAGATION3[:2])  # rows 0, 1 as on the 3-path
    updates = torch.randn(2, fed.dim)
    algorithm.aggregate(fed, torch.tensor([0, 2]), updates, 1)
    models = fed.initial.repeat(4, 1)
    models[torch.tensor([0, 2])] = updates
    assert torch.equal(algorithm.received, models), "the server's copies: the uploads, the last ones elsewhere"
    assert torch.equal(fed.models, fed.initial.repeat(4, 1)), "the clients' own models are theirs"
    expected = graph_propagate(algorithm.propagation, models, layers=3)
    assert torch.allclose(algorithm.aggregated, expected)
    assert torch.allclose(fed.global_model, expected.mean(0))
    assert torch.equal(algorithm.evaluation_models(fed), algorithm.aggregated), "server protocol: u_k"
    trained = algorithm.client_update(fed, 1, 2)
    assert torch.equal(algorithm.trained_model(fed, 1, trained), trained.vector), "local protocol: v_k"


def run(rounds, **options):
    fed = make_federation()
    algorithm = build_algorithm("sfl", **options)
    run_rounds(fed, algorithm, Schedule(rounds), progress=False)
    return fed, algorithm


def test_first_round_has_no_regulariser_and_zero_weights_give_local_training():
    local = make_federation()
    run_rounds(local, build_algorithm("local"), Schedule(1), progress=False)
    assert torch.equal(run(1, lam_graph=5.0, lam_global=5.0)[0].models, local.models)
    fresh = make_federation()
    run_rounds(fresh, build_algorithm("local"), Schedule(2), progress=False)
    assert torch.equal(run(2, lam_graph=0.0, lam_global=0.0)[0].models, fresh.models)


def test_regulariser_pulls_personalised_models_towards_the_aggregated_and_global_models():
    # the same round-2 client step of client 1, with and without the regulariser, from the same state
    fed, algorithm = run(1, lam_graph=2.0, lam_global=2.0)
    pulled = algorithm.client_update(fed, 1, round=2).vector
    free, plain = run(1, lam_graph=0.0, lam_global=0.0)
    unpulled = plain.client_update(free, 1, round=2).vector
    assert torch.equal(algorithm.aggregated, plain.aggregated)  # round 1 had no regulariser in either run
    for anchor in (algorithm.aggregated[1], fed.global_model):
        assert (pulled - anchor).norm() < 0.8 * (unpulled - anchor).norm()


@pytest.mark.parametrize("start", ["personal", "global", "graph"])
def test_local_training_starts_from_the_chosen_model(start):
    fed, algorithm = run(1, start=start, lam_graph=0.0, lam_global=0.0)
    source = {"personal": fed.models[3], "global": fed.global_model, "graph": algorithm.aggregated[3]}[start]
    assert torch.equal(algorithm.configure(fed, 3), source)
    expected = make_federation().train(3, 2, source).vector
    assert torch.equal(algorithm.client_update(fed, 3, round=2).vector, expected)


@pytest.mark.parametrize("options, message", [
    ({"lam_graph": -0.1}, "sfl lam_graph must be >= 0"),
    ({"lam_global": -1.0}, "sfl lam_global must be >= 0"),
    ({"layers": 0}, "sfl layers must be an integer >= 1"),
    ({"alpha": 1.5}, r"sfl alpha must lie in \[0, 1\]"),
    ({"start": "server"}, "sfl start must be one of"),
    ({"graph": "knn"}, "graph must be one of"),
    ({"smoothing": "ema"}, "sfl smoothing must be one of"),
    ({"learn_target": "cosine"}, "sfl learn_target must be one of"),
    ({"learn_k": 0}, "sfl learn_k must be an integer >= 1"),
    ({"regulariser": "squared"}, "sfl regulariser must be one of"),
    ({"smoothing_rate": 0.0}, r"sfl smoothing_rate must lie in \(0, 1\]"),
    ({"share": "half"}, "share must be one of"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("sfl", **options)


@pytest.mark.parametrize("options", [{}, {"graph": "learned", "learn_k": 2}, {"share": "encoder"},
                                     {"graph": "learned", "learn_k": 2, "share": "head", "smoothing": "given"}])
def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path, options):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("sfl", **options), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert torch.equal(run.full_algorithm.aggregated, run.resumed_algorithm.aggregated)


# ------------------------------------------------------------------------------------------------- SFL*
def test_learned_graph_is_relearned_every_round_and_smoothed_with_the_previous_one_under_cross_round_smoothing():
    fed, algorithm = run(3, graph="learned", learn_k=2, smoothing="previous")
    assert algorithm.adjacency is None and len(algorithm.fit_losses) == 3
    propagation = algorithm.propagation
    assert torch.allclose(propagation.sum(1), torch.ones(4)) and bool((propagation >= 0).all())
    fresh = build_algorithm("sfl", graph="learned", learn_k=2, smoothing="previous")
    fresh.setup(make_federation())
    first = fresh.learn_propagation(fed, 1)
    second_new = fresh.learn_propagation(fed, 2)  # no prior yet in the fresh object: the new graph itself
    fresh.propagation = first
    assert torch.allclose(fresh.learn_propagation(fed, 2), 0.95 * first + 0.05 * second_new)
    assert set(algorithm.artifacts()) == {"propagation", "fit_loss"}


def test_code_smoothing_mixes_with_the_given_graph_and_none_uses_the_learned_graph_alone():
    fed = make_federation()
    given = build_algorithm("sfl", graph="learned", learn_k=2, smoothing="given")
    alone = build_algorithm("sfl", graph="learned", learn_k=2, smoothing="none")
    given.setup(fed)
    alone.setup(fed)
    new = alone.learn_propagation(fed, 1)
    assert torch.allclose(given.learn_propagation(fed, 1), 0.95 * self_loop_propagation(given_graph(fed)) + 0.05 * new)



def test_sfl_star_defaults_are_the_authors_graph_v3():
    params = build_algorithm("sfl", graph="learned").params
    assert (params.smoothing, params.learn_target, params.learn_k, params.smoothing_rate) == ("given", "distance", 30, 0.05)
    assert (params.start, params.regulariser) == ("personal", "gradient"), "the local step stays the paper's"


def test_graph_v3_mixes_the_fixed_given_graph_with_each_rounds_fresh_learned_graph(monkeypatch):
    # 3 clients whose label sets all intersect: the given D^{-1}(A + I) is 1/3 everywhere
    fed = make_federation(num_clients=3)
    cycle = torch.tensor([[0.0, 1, 0], [0, 0, 1], [1, 0, 0]])
    halves = torch.tensor([[0.0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    learned = iter([cycle, halves])
    monkeypatch.setattr(sfl_module, "learn_client_graph", lambda *args, **kwargs: LearnedGraph(next(learned), (1.0, 0.5)))
    algorithm = build_algorithm("sfl", graph="learned")
    algorithm.setup(fed)
    third = torch.full((3, 3), 1 / 3)
    assert torch.allclose(algorithm.given_propagation, third)
    a, b = 19 / 60, 22 / 60  # 0.95 / 3 and 0.95 / 3 + 0.05
    round1 = torch.tensor([[a, b, a], [a, a, b], [b, a, a]])
    c, d = 19 / 60, 19 / 60 + 0.025
    round2 = torch.tensor([[c, d, d], [d, c, d], [d, d, c]])
    for round, expected in ((1, round1), (2, round2)):
        updates = torch.randn(3, fed.dim)
        algorithm.aggregate(fed, torch.arange(3), updates, round)
        assert torch.allclose(algorithm.propagation, expected), f"round {round}: 0.95 given + 0.05 this round's graph"
        assert torch.allclose(algorithm.given_propagation, third), "the given graph is never replaced"
        assert torch.allclose(algorithm.aggregated, graph_propagate(expected, updates, layers=3))


def test_start_global_trains_from_the_global_model_and_start_personal_from_its_own():
    fed, personal = run(2)
    globally = build_algorithm("sfl", start="global")
    globally.setup(fed)
    fed.global_model = personal.aggregated.mean(0)
    assert torch.equal(personal.configure(fed, 1), fed.models[1])
    assert torch.equal(globally.configure(fed, 1), fed.global_model)
    assert not torch.equal(fed.models[1], fed.global_model)


def test_the_codes_detached_regulariser_leaves_plain_local_sgd_from_the_global_model():
    fed, code = run(2, start="global", regulariser="detached", lam_graph=5.0, lam_global=5.0)
    fedavg = build_algorithm("fedavg")
    fedavg.shared = code.shared  # FedAvg's setup would reset the global model
    plain = fedavg.client_update(fed, 1, 3).vector
    assert torch.equal(code.client_update(fed, 1, 3).vector, plain)
    paper = build_algorithm("sfl", start="global", lam_graph=5.0, lam_global=5.0)
    paper.setup(fed)
    paper.aggregated = code.aggregated
    fed.global_model = code.aggregated.mean(0)
    assert not torch.allclose(paper.client_update(fed, 1, 3).vector, plain), "the paper's pulls change training"

# -------------------------------------------------------------------------------------- SFL+Per, SFL+LG
@pytest.mark.parametrize("share", ["encoder", "head"])
def test_partial_sfl_propagates_only_the_shared_entries_and_personal_entries_never_mix(share):
    fed, algorithm = run(2, share=share)
    shared = algorithm.shared
    assert 0 < int(shared.sum()) < fed.dim
    assert torch.equal(algorithm.aggregated[:, ~shared], fed.models[:, ~shared]), "u_k = v_k where not shared"
    expected = graph_propagate(algorithm.propagation, fed.models, layers=3)
    assert torch.allclose(algorithm.aggregated[:, shared], expected[:, shared])
    poisoned = fed.models.clone()
    poisoned[1, ~shared] = float("nan")  # a client's personal entries reach nobody else's model
    fed.models = poisoned
    algorithm.aggregate(fed, torch.tensor([0, 1, 2, 3]), torch.zeros(4, fed.dim), 3)
    assert not algorithm.aggregated[torch.tensor([0, 2, 3])].isnan().any()


def test_partial_sfl_pulls_act_on_shared_entries_only():
    fed, algorithm = run(2, share="encoder", lam_graph=1.0, lam_global=0.0)
    anchor_far = algorithm.aggregated.clone()
    anchor_far[:, ~algorithm.shared] += 100.0  # unshared targets are ignored: no pull, no loss
    algorithm.aggregated = anchor_far
    fed.flat.load(fed.models[0])
    step = LocalStep(client=0, round=3, model=fed.flat.module, x=None, y=None, features=None, logits=None,
                     params=fed.flat.parameters, context=algorithm.local_context(fed, 0))
    loss = algorithm.local_loss(fed, step)
    expected = 0.5 * (fed.models[0] - anchor_far[0])[algorithm.shared].pow(2).sum()
    assert torch.allclose(loss, expected)


def test_the_channel_corrupts_what_the_server_receives_not_what_the_client_keeps():
    from gflkit.channel import Channel

    for share in ("all", "encoder"):
        fed = make_federation()
        fed.channel = Channel(noise_scale=1.0)
        algorithm = build_algorithm("sfl", share=share)
        run_rounds(fed, algorithm, Schedule(1), progress=False)
        clean = make_federation()
        reference = build_algorithm("sfl", share=share)
        run_rounds(clean, reference, Schedule(1), progress=False)
        assert torch.equal(fed.models, clean.models), "each client keeps the model it trained"
        assert not torch.allclose(algorithm.received[:, algorithm.shared], reference.received[:, reference.shared])
        assert not torch.allclose(algorithm.aggregated[:, algorithm.shared], reference.aggregated[:, reference.shared])
