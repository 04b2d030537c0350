import pandas as pd
import pytest
import torch

from gflkit.algorithms import build_algorithm
from gflkit.algorithms.pfedgraph import (
    collaboration_weights,
    initial_graph,
    project_rows_to_simplex,
    update_similarity,
)
from gflkit.algorithms.terms import cosine_similarity
from gflkit.engine import Schedule, run_rounds
from gflkit.training import LocalStep

from conftest import make_federation, run_full_and_resumed


def bisection_projection(row: torch.Tensor, steps: int = 200) -> torch.Tensor:
    """Reference projection onto the simplex: the θ with Σ max(v − θ, 0) = 1, found by bisection."""
    low, high = float(row.min()) - 1.0, float(row.max())
    for _ in range(steps):
        theta = 0.5 * (low + high)
        low, high = (theta, high) if (row - theta).clamp(min=0).sum() > 1 else (low, theta)
    return (row - 0.5 * (low + high)).clamp(min=0)


def test_projection_onto_the_simplex_matches_hand_computation():
    values = torch.tensor([
        [1.125, 0.25, 0.25],  # θ = 0.625 / 3: every entry stays positive
        [0.2, 0.3, 0.5],      # already on the simplex
        [2.0, 0.0, 0.0],      # θ = 1: a vertex
        [0.5, 0.5, 0.5],      # θ = 1 / 6: the centre
        [0.9, 0.8, -1.0],     # θ = 0.35: the last entry drops out
    ], dtype=torch.float64)
    expected = torch.tensor([
        [11 / 12, 1 / 24, 1 / 24],
        [0.2, 0.3, 0.5],
        [1.0, 0.0, 0.0],
        [1 / 3, 1 / 3, 1 / 3],
        [0.55, 0.45, 0.0],
    ], dtype=torch.float64)
    assert torch.allclose(project_rows_to_simplex(values), expected)


def test_projection_lies_on_the_simplex_and_matches_a_bisection_solver():
    values = 2 * torch.randn(50, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    projected = project_rows_to_simplex(values)
    assert torch.all(projected >= 0)
    assert torch.allclose(projected.sum(1), torch.ones(50, dtype=torch.float64))
    reference = torch.stack([bisection_projection(row) for row in values])
    assert torch.allclose(projected, reference, atol=1e-10)


def test_collaboration_weights_solve_the_authors_qp():
    alpha = 0.8
    similarity = torch.tensor([[1.0, 0.2, -0.3, 0.9], [0.2, 1.0, 0.5, -1.0],
                               [-0.3, 0.5, 1.0, 0.1], [0.9, -1.0, 0.1, 1.0]], dtype=torch.float64)
    sizes = torch.tensor([10.0, 30.0, 20.0, 40.0], dtype=torch.float64)
    weights = collaboration_weights(similarity, sizes, alpha)
    p = sizes / sizes.sum()

    def objective(a):  # cp.quad_form(x, αI) + (d − 2αp)ᵀx with d = −s
        return alpha * (a * a).sum(-1) + (a * (-similarity[0] - 2 * alpha * p)).sum(-1)

    candidates = torch.distributions.Dirichlet(torch.ones(4, dtype=torch.float64)).sample((5000,))
    assert objective(weights[0]) <= objective(candidates).min() + 1e-12
    assert torch.all(weights >= 0) and torch.allclose(weights.sum(1), torch.ones(4, dtype=torch.float64))


def test_equal_similarities_give_the_data_shares_and_a_similar_client_gets_more_weight():
    sizes = torch.tensor([2.0, 1.0, 1.0])
    assert torch.allclose(collaboration_weights(torch.full((3, 3), 0.3), sizes, 0.8), torch.tensor([0.5, 0.25, 0.25]))
    # p + s / (2α) = (1.125, 0.25, 0.25) → (11/12, 1/24, 1/24)
    weights = collaboration_weights(torch.tensor([[1.0, 0.0, 0.0]]), sizes, 0.8)
    assert torch.allclose(weights, torch.tensor([[11 / 12, 1 / 24, 1 / 24]]))


def test_similarities_above_the_cap_count_as_identical():
    updates = torch.tensor([[1.0, 0.0], [1.0, 0.4], [0.0, 1.0]])  # cos(u0, u1) = 0.928, cos(u0, u2) = 0
    similarity = update_similarity(updates)
    assert similarity[0, 1] == 1.0 and similarity[1, 0] == 1.0 and similarity[0, 2] == 0.0
    assert torch.allclose(similarity.diagonal(), torch.ones(3))
    assert similarity[1, 2] == pytest.approx(0.4 / 1.16 ** 0.5)


def test_initial_graph_is_uniform_over_the_other_clients():
    assert torch.allclose(initial_graph(4), (torch.ones(4, 4) - torch.eye(4)) / 3)
    assert torch.equal(initial_graph(1), torch.ones(1, 1))


def test_server_aggregates_the_sampled_models_over_the_inferred_graph():
    fed = make_federation()
    algorithm = build_algorithm("pfedgraph")
    algorithm.setup(fed)
    fed.num_train = torch.tensor([10.0, 20.0, 30.0, 40.0])
    before = fed.models.clone()
    clients = torch.tensor([0, 1, 3])
    deltas = torch.randn(3, fed.dim, generator=torch.Generator().manual_seed(0))
    deltas[1] = deltas[0] + 0.1 * deltas[2]  # clients 0 and 1 moved alike
    uploads = fed.initial + deltas
    algorithm.aggregate(fed, clients, uploads, 1)
    weights = collaboration_weights(update_similarity(deltas), fed.num_train[clients], 0.8)
    assert torch.allclose(algorithm.graph[clients][:, clients], weights)
    assert torch.all(algorithm.graph[clients][:, 2] == 0)
    assert torch.allclose(algorithm.graph[clients].sum(1), torch.ones(3))
    assert weights[0, 1] > weights[0, 2] and weights[1, 0] > weights[1, 2]
    assert torch.allclose(fed.models[clients], algorithm.graph[clients] @ torch.cat([uploads[:2], fed.models[2:3],
                                                                                     uploads[2:]]), atol=1e-6)
    assert torch.equal(fed.models[2], before[2])
    assert torch.equal(algorithm.graph[2], initial_graph(4)[2])
    assert torch.equal(algorithm.evaluation_models(fed), fed.models)


def test_first_round_has_no_regulariser_and_later_rounds_pull_towards_the_aggregate():
    plain, plain_algorithm = make_federation(), build_algorithm("pfedgraph", lam=0.0)
    run_rounds(plain, plain_algorithm, Schedule(1), progress=False)
    fed, algorithm = make_federation(), build_algorithm("pfedgraph", lam=100.0)  # the cosine term is weak
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    assert torch.equal(fed.models, plain.models)
    free = plain_algorithm.client_update(plain, 1, round=2).vector
    pulled = algorithm.client_update(fed, 1, round=2).vector
    anchor = fed.models[1]
    distance = lambda w: 1 - float(torch.nn.functional.cosine_similarity(w, anchor, dim=0))
    assert distance(pulled) < 0.5 * distance(free)


def test_regulariser_is_minus_lam_times_the_cosine_similarity_to_the_aggregate():
    fed = make_federation()
    algorithm = build_algorithm("pfedgraph", lam=0.3)
    algorithm.setup(fed)
    fed.models[0] = fed.initial + 0.5
    step = LocalStep(0, 2, fed.flat.module, None, None, None, None, params=fed.flat.parameters,
                     context=algorithm.local_context(fed, 0))
    params, anchor = fed.flat.parameters, fed.flat.parameters_as_views(fed.models[0])
    expected = -0.3 * torch.nn.functional.cosine_similarity(fed.flat.vector, fed.models[0], dim=0)
    assert torch.allclose(algorithm.local_loss(fed, step), expected)
    assert torch.allclose(cosine_similarity(params, anchor), -expected / 0.3)


def test_neighbours_regulariser_is_the_weighted_sum_of_per_neighbour_cosines():
    fed = make_federation()
    algorithm = build_algorithm("pfedgraph", lam=0.3, regularizer="neighbours")
    algorithm.setup(fed)
    updates = torch.stack([fed.initial + 0.5 * k for k in range(1, 5)]) * torch.linspace(0.5, 2.0, fed.dim)
    algorithm.aggregate(fed, torch.arange(4), updates, 1)
    fed.flat.load(fed.initial - 0.1)
    step = LocalStep(2, 2, fed.flat.module, None, None, None, None, params=fed.flat.parameters,
                     context=algorithm.local_context(fed, 2))
    mask = fed.layout.parameter_mask(fed.device)
    w = fed.flat.vector.detach()[mask]
    cosines = torch.stack([torch.nn.functional.cosine_similarity(w, u[mask], dim=0) for u in updates])
    expected = -0.3 * (algorithm.graph[2] * cosines).sum()
    assert torch.allclose(algorithm.local_loss(fed, step), expected, atol=1e-6)


@pytest.mark.parametrize("options, message", [
    ({"regularizer": "cosine"}, "pfedgraph regularizer must be one of"),
    ({"alpha": 0.0}, "pfedgraph alpha must be > 0"),
    ({"lam": -0.01}, "pfedgraph lam must be >= 0"),
])
def test_invalid_params_are_rejected(options, message):
    with pytest.raises(ValueError, match=message):
        build_algorithm("pfedgraph", **options)


def test_resume_after_checkpoint_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(make_federation, lambda: build_algorithm("pfedgraph"), tmp_path / "checkpoint.pt")
    pd.testing.assert_frame_equal(run.full, run.resumed)
    assert torch.equal(run.resumed_algorithm.artifacts()["graph"], run.resumed_algorithm.graph)
