import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.cfl import complete_linkage_bipartition, should_split, update_norms
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs import cosine_similarity_matrix

from conftest import make_federation, run_full_and_resumed


def ready(**options):
    fed = make_federation()
    algorithm = build_algorithm("cfl", **options)
    algorithm.setup(fed)
    return fed, algorithm


def opposite_updates(fed, scale=2.0):
    """Uploads whose updates from the initial model form two opposite groups: clients {0, 1} and {2, 3}."""
    direction = torch.ones(fed.dim) / fed.dim ** 0.5
    wobble = torch.zeros(4, fed.dim)
    wobble[torch.arange(4), torch.arange(4)] = 0.05  # distinct clients, same groups
    deltas = scale * torch.stack([direction, direction, -direction, -direction]) + wobble
    return fed.initial + deltas, deltas


def test_norms_and_split_criterion_match_hand_computation():
    updates = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 0.0]])  # mean 0, largest norm 3
    assert update_norms(updates) == (0.0, 3.0)
    assert should_split(updates, eps_1=0.4, eps_2=1.6)
    assert not should_split(updates, eps_1=0.4, eps_2=3.0)  # no client far enough from stationarity
    agreeing = torch.tensor([[3.0, 0.0], [2.0, 0.0], [1.0, 0.0]])  # mean norm 2: not yet stationary
    assert update_norms(agreeing) == (2.0, 3.0)
    assert not should_split(agreeing, eps_1=0.4, eps_2=1.6)


def test_bipartition_separates_two_opposite_groups_and_labels_the_group_of_item_0_false():
    updates = torch.tensor([[1.0, 0.1], [-1.0, 0.0], [0.9, 0.0], [-1.0, -0.2], [1.0, -0.1]])
    second = complete_linkage_bipartition(cosine_similarity_matrix(updates))
    assert second.tolist() == [False, True, False, True, False]
    assert complete_linkage_bipartition(torch.tensor([[1.0, -1.0], [-1.0, 1.0]])).tolist() == [False, True]


def test_bipartition_uses_complete_linkage():
    # distances (−S): a–b 0.1, b–c 0.2, a–c 0.9, d far from all. Single linkage would merge {a, b, c}
    # first and split off d; complete linkage sees {a, b} – c at 0.9 > c – d at 0.5 and pairs c with d.
    distance = torch.tensor([
        [0.0, 0.1, 0.9, 1.0],
        [0.1, 0.0, 0.2, 1.0],
        [0.9, 0.2, 0.0, 0.5],
        [1.0, 1.0, 0.5, 0.0],
    ])
    assert complete_linkage_bipartition(-distance).tolist() == [False, False, True, True]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bipartition_matches_scikit_learn_agglomerative_clustering(seed):
    sklearn_cluster = pytest.importorskip("sklearn.cluster")
    updates = torch.randn(9, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    similarity = cosine_similarity_matrix(updates)
    reference = sklearn_cluster.AgglomerativeClustering(n_clusters=2, metric="precomputed", linkage="complete")
    labels = torch.from_numpy(reference.fit(1.0 - similarity.numpy()).labels_)  # 1 − S: same order as −S
    assert torch.equal(complete_linkage_bipartition(similarity), labels != labels[0])


def test_a_cluster_of_opposite_updates_is_split_after_min_rounds_and_each_half_gets_its_mean_update():
    fed, algorithm = ready()
    uploads, deltas = opposite_updates(fed)
    algorithm.aggregate(fed, torch.arange(4), uploads, round=21)
    assert algorithm.assignments.tolist() == [0, 0, 1, 1]
    assert torch.allclose(algorithm.cluster_models[0], fed.initial + deltas[:2].mean(0), atol=1e-6)
    assert torch.allclose(algorithm.cluster_models[1], fed.initial + deltas[2:].mean(0), atol=1e-6)
    assert torch.equal(algorithm.evaluation_models(fed), algorithm.cluster_models[torch.tensor([0, 0, 1, 1])])
    assert torch.equal(algorithm.configure(fed, 3), algorithm.cluster_models[1])
    assert torch.equal(fed.models, uploads)


@pytest.mark.parametrize("case", ["too early", "not stationary", "no large update", "too few sampled"])
def test_no_split_when_the_criteria_are_not_met(case):
    fed, algorithm = ready()
    uploads, deltas = opposite_updates(fed)
    clients, round = torch.arange(4), 21
    if case == "too early":
        round = 20  # the authors split only when c_round > 20
    elif case == "not stationary":
        deltas = deltas.abs()  # all updates agree: the mean update is large
        uploads = fed.initial + deltas
    elif case == "no large update":
        uploads, deltas = opposite_updates(fed, scale=1.0)  # max norm ≈ 1 < eps_2 = 1.6
    else:
        clients, uploads, deltas = torch.tensor([0, 2]), uploads[[0, 2]], deltas[[0, 2]]
    algorithm.aggregate(fed, clients, uploads, round)
    assert algorithm.assignments.tolist() == [0, 0, 0, 0]
    assert torch.allclose(algorithm.cluster_models[0], fed.initial + deltas.mean(0), atol=1e-6)


def test_only_sampled_members_are_split_and_averaged():
    fed = make_federation(num_clients=6)
    algorithm = build_algorithm("cfl")
    algorithm.setup(fed)
    uploads, deltas = opposite_updates(make_federation())
    clients = torch.tensor([0, 2, 3, 5])
    algorithm.aggregate(fed, clients, fed.initial + deltas, round=21)
    assert algorithm.assignments.tolist() == [0, 0, 0, 1, 0, 1]  # 1 and 4 were not sampled: they stay
    assert torch.allclose(algorithm.cluster_models[0], fed.initial + deltas[:2].mean(0), atol=1e-6)


def test_clients_train_from_their_cluster_model():
    fed, algorithm = ready()
    algorithm.aggregate(fed, torch.arange(4), opposite_updates(fed)[0], round=21)
    expected = make_federation().train(2, 22, algorithm.cluster_models[1]).vector
    assert torch.equal(algorithm.client_update(fed, 2, round=22).vector, expected)


@pytest.mark.parametrize("options, message", [
    ({"eps_1": -0.1}, "cfl eps_1 must be >= 0"),
    ({"eps_2": float("nan")}, "cfl eps_2 must be >= 0"),
    ({"min_rounds": -1}, "cfl min_rounds must be an integer >= 0"),
    ({"min_rounds": 2.5}, "cfl min_rounds must be an integer >= 0"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("cfl", **options)


# thresholds that split every cluster of at least three sampled clients from round 1 on
SPLITTING = {"min_rounds": 0, "eps_1": 1e3, "eps_2": 0.0}


def test_end_to_end_run_splits_clusters_and_evaluates_clients_with_their_cluster_model():
    fed = make_federation()
    algorithm = build_algorithm("cfl", **SPLITTING)
    records = run_rounds(fed, algorithm, Schedule(2), progress=False)
    # round 1 splits the 4 clients, round 2 any half with 3 members: no cluster keeps more than 2
    sizes = torch.bincount(algorithm.assignments)
    assert len(sizes) == len(algorithm.cluster_models) >= 2 and sizes.max() <= 2 and sizes.min() >= 1
    assert algorithm.assignments[0] == algorithm.assignments[3]  # the two clients with the same labels
    final = fed.evaluate(algorithm.evaluation_models(fed))
    assert records[records["round"] == 2]["accuracy"].tolist() == [m["accuracy"] for m in final]
    assert torch.equal(algorithm.artifacts()["assignments"], algorithm.assignments)


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("cfl", **SPLITTING), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert torch.equal(run.full_algorithm.assignments, run.resumed_algorithm.assignments)
