import math

import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.gcfl import dtw_distance, dtw_distance_matrix, min_cut_bipartition
from gflkit.engine import Schedule, run_rounds
from gflkit.federation import Federation
from gflkit.models import build_model
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig

from conftest import make_federation, run_full_and_resumed
from graph_fixtures import make_graph_federation


def test_dtw_distance_matches_hand_computation():
    # a = (0, 1, 2), b = (0, 2): the best path (0,0) (1,0) (2,1) costs 0 + 1 + 0
    assert dtw_distance(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.0, 2.0])) == 1.0
    assert dtw_distance(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])) == math.sqrt(2.0)
    shifted = torch.tensor([1.0, 1.0, 2.0, 3.0])
    assert dtw_distance(torch.tensor([1.0, 2.0, 3.0]), shifted) == 0.0  # a time shift is free
    # (1, 1, 1) vs (0, 1, 2): every cell of row i costs (a_i - 1)², each row is visited: 1 + 0 + 1;
    # vs (0, 2, 2): every cell of column j costs (b_j - 1)², each column is visited: 1 + 1 + 1
    distance = dtw_distance_matrix(torch.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 2.0], [1.0, 1.0, 1.0]]))
    root2, root3 = math.sqrt(2.0), math.sqrt(3.0)
    assert distance.tolist() == [[0.0, 1.0, root2], [1.0, 0.0, root3], [root2, root3, 0.0]]
    scaled = torch.tensor([[0.0, 1.0, 2.0], [0.0, 2.0, 4.0]])  # the same trend at twice the scale
    assert dtw_distance_matrix(scaled)[0, 1] > 1 and dtw_distance_matrix(scaled, standardize=True)[0, 1] == 0.0
    with pytest.raises(ValueError, match="non-empty"):
        dtw_distance(torch.tensor([]), torch.tensor([1.0]))


def test_min_cut_matches_hand_computation():
    # two tight pairs {0, 1} and {2, 3}: cutting between them costs 1 + 1 + 2 + 1 = 5, any single vertex >= 7
    weights = torch.tensor([
        [0.0, 5.0, 1.0, 1.0],
        [5.0, 0.0, 2.0, 1.0],
        [1.0, 2.0, 0.0, 5.0],
        [1.0, 1.0, 5.0, 0.0],
    ])
    assert min_cut_bipartition(weights).tolist() == [False, False, True, True]
    assert min_cut_bipartition(weights[[2, 0, 3, 1]][:, [2, 0, 3, 1]]).tolist() == [False, True, False, True]
    with pytest.raises(ValueError, match="symmetric and >= 0"):
        min_cut_bipartition(-weights)
    with pytest.raises(ValueError, match="at least 2 items"):
        min_cut_bipartition(torch.zeros(1, 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_min_cut_matches_networkx_stoer_wagner(seed):
    nx = pytest.importorskip("networkx")
    raw = torch.rand(7, 7, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    weights = raw + raw.T
    graph = nx.Graph()
    graph.add_weighted_edges_from((i, j, float(weights[i, j])) for i in range(7) for j in range(i + 1, 7))
    _, (side, _) = nx.stoer_wagner(graph)
    expected = torch.zeros(7, dtype=torch.bool)
    expected[list(side)] = True
    assert torch.equal(min_cut_bipartition(weights), expected ^ expected[0])


def ready(num_clients=4, **options):
    fed = make_federation(num_clients=num_clients)
    algorithm = build_algorithm("gcfl", **options)
    algorithm.setup(fed)
    return fed, algorithm


def opposite_updates(fed, scale=2.0):
    """Updates from the initial model forming two opposite groups {0, 1} / {2, 3}: mean norm 0.025, max ≈ scale."""
    direction = torch.ones(fed.dim) / fed.dim ** 0.5
    wobble = torch.zeros(4, fed.dim)
    wobble[torch.arange(4), torch.arange(4)] = 0.05
    deltas = scale * torch.stack([direction, direction, -direction, -direction]) + wobble
    return fed.initial + deltas, deltas


def record_sequences(algorithm, length=5):
    """Gradient norms that rise for clients 0 and 2 and fall for clients 1 and 3."""
    for t in range(length):
        for client in range(4):
            algorithm.record(client, 1.0 + t if client % 2 == 0 else 5.0 - t)


def test_a_cluster_is_split_by_its_gradient_norm_sequences_once_the_thresholds_are_crossed():
    fed, algorithm = ready()
    fed.num_train = torch.tensor([1.0, 3.0, 1.0, 1.0])
    record_sequences(algorithm)
    uploads, deltas = opposite_updates(fed)  # the updates' own groups, {0, 1} / {2, 3}, are not used
    algorithm.aggregate(fed, torch.arange(4), uploads, round=21)
    assert algorithm.assignments.tolist() == [0, 1, 0, 1]
    assert algorithm.lengths.tolist() == [0, 0, 0, 0], "a split starts every sequence afresh"
    weighted = (deltas[[1, 3]] * torch.tensor([[3.0], [1.0]])).sum(0) / 4
    assert torch.allclose(algorithm.cluster_models[1], fed.initial + weighted, atol=1e-6)
    assert torch.allclose(algorithm.cluster_models[0], fed.initial + deltas[[0, 2]].mean(0), atol=1e-6)
    assert torch.equal(algorithm.evaluation_models(fed), algorithm.cluster_models[torch.tensor([0, 1, 0, 1])])
    assert torch.equal(algorithm.artifacts()["assignments"], algorithm.assignments)


@pytest.mark.parametrize("case", ["too early", "short sequences", "not stationary", "no large update", "too few"])
def test_no_split_before_the_thresholds_are_crossed(case):
    fed, algorithm = ready()
    uploads, deltas = opposite_updates(fed)
    clients, round = torch.arange(4), 21
    record_sequences(algorithm, length=4 if case == "short sequences" else 5)
    if case == "too early":
        round = 20
    elif case == "not stationary":
        deltas = deltas.abs()  # all updates agree: mean norm ≈ 2 > eps_1 = 0.05
        uploads = fed.initial + deltas
    elif case == "no large update":
        uploads, deltas = opposite_updates(fed, scale=0.05)  # max norm ≈ 0.07 < eps_2 = 0.1
    elif case == "too few":
        algorithm.open_cluster(0, torch.tensor([2, 3]))  # clusters {0, 1} and {2, 3}, each of opposite updates
        uploads, deltas = uploads[[0, 2, 1, 3]], deltas[[0, 2, 1, 3]]
    algorithm.aggregate(fed, clients, uploads, round)
    assert algorithm.assignments.tolist() == ([0, 0, 1, 1] if case == "too few" else [0, 0, 0, 0])
    first = algorithm.assignments == 0
    assert torch.allclose(algorithm.cluster_models[0], fed.initial + deltas[first].mean(0), atol=1e-6)


def test_clients_report_the_norm_of_their_last_gradient():
    fed, algorithm = ready()
    algorithm.client_update(fed, 2, round=1)
    reference = make_federation()
    reference.train(2, 1, reference.initial)
    expected = torch.cat([p.grad.flatten() for p in reference.flat.parameters]).norm()
    assert algorithm.lengths.tolist() == [0, 0, 1, 0]
    assert math.isclose(algorithm.sequences[2, -1].item(), expected.item(), rel_tol=1e-6)


@pytest.mark.parametrize("options, message", [
    ({"eps_1": -0.1}, "gcfl eps_1 must be >= 0"),
    ({"eps_2": float("nan")}, "gcfl eps_2 must be >= 0"),
    ({"min_rounds": -1}, "gcfl min_rounds must be an integer >= 0"),
    ({"seq_length": 0}, "gcfl seq_length must be an integer >= 1"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("gcfl", **options)


def test_fewer_than_three_clients_are_rejected():
    with pytest.raises(ValueError, match="at least 3 clients"):
        build_algorithm("gcfl").check(2)
    build_algorithm("gcfl").check(3)


# thresholds that let every cluster of at least three clients split once its sequences have 2 norms
SPLITTING = {"min_rounds": 0, "eps_1": 1e3, "eps_2": 0.0, "seq_length": 2}


def test_link_prediction_run_clusters_subgraph_clients_with_finite_auc():
    fed = make_graph_federation()
    algorithm = build_algorithm("gcfl", **SPLITTING)
    records = run_rounds(fed, algorithm, Schedule(2), progress=False)
    assert len(algorithm.cluster_models) == 2, "round 2 splits the four clients"
    assert records["auc"].notna().all() and records["auc"].between(0, 100).all()
    assert (algorithm.sequences > 0).all()


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_graph_federation, lambda: build_algorithm("gcfl", **SPLITTING),
                               tmp_path / "checkpoint.pt", rounds=4, stop_after=3)
    assert run.resumed.equals(run.full)
    assert torch.equal(run.full_algorithm.assignments, run.resumed_algorithm.assignments)
    assert torch.equal(run.full_algorithm.sequences, run.resumed_algorithm.sequences)
def test_partial_participation_splits_whole_clusters_once_every_sequence_is_full():
    fed = make_federation(num_clients=6)
    algorithm = build_algorithm("gcfl", **SPLITTING)
    run_rounds(fed, algorithm, Schedule(6, clients_per_round=4), progress=False)
    sizes = torch.bincount(algorithm.assignments, minlength=len(algorithm.cluster_models))
    assert len(algorithm.cluster_models) >= 2 and sizes.min() >= 1 and sizes.sum() == 6


def two_group_federation():
    """Four clients on the same inputs; clients 0 and 1 learn y = [x > 0], clients 2 and 3 the opposite."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(4 * 40, 2, 4, 4, generator=gen)
    sign = (x[:, 0, 0, 0] > 0).long()
    owner = torch.arange(len(x)) // 40
    y = torch.where(owner < 2, sign, 1 - sign)
    train = [torch.arange(k * 40, k * 40 + 30) for k in range(4)]
    test = [torch.arange(k * 40 + 30, (k + 1) * 40) for k in range(4)]
    torch.manual_seed(0)
    return Federation(x, y, train, test, build_model("mclr", (2, 4, 4), 2), ClassificationTask(),
                      TrainConfig(batch_size=10, lr=0.1), seed=0)


@pytest.mark.parametrize("eps_1, eps_2, splits", [(0.02, 0.04, False), (0.1, 0.15, True)])
def test_gcfl_splits_a_two_group_federation_only_with_thresholds_above_its_update_scale(eps_1, eps_2, splits):
    fed = two_group_federation()
    algorithm = build_algorithm("gcfl", eps_1=eps_1, eps_2=eps_2, min_rounds=3, seq_length=3)
    run_rounds(fed, algorithm, Schedule(10), progress=False)
    artifacts = algorithm.artifacts()
    per_round, norms = artifacts["clusters_per_round"].tolist(), artifacts["update_norms"]
    assert len(per_round) == 10 and per_round[:3] == [1, 1, 1], "no split before min_rounds"
    assert norms.shape == (10, 2) and bool((norms[:, 0] <= norms[:, 1]).all())
    assert (per_round[-1] > 1) == splits, per_round
    if not splits:  # the recorded criterion says why: every cluster's mean update stayed above eps_1
        assert float(norms[3:, 0].min()) >= eps_1
        assert torch.equal(artifacts["assignments"], torch.zeros(4, dtype=torch.long))
