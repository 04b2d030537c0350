"""FedCG: Eq. 6's adjacency, Eq. 5's domain GCN, Eq. 4's residual convolution, the teacher / student
domain classifiers, the server's teacher refresh and adjacency update, resume."""
import tempfile

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gflkit.algorithms import build_algorithm
from gflkit.engine import Schedule, run_rounds
from gflkit.graphs.adjacency import inverse_distance_similarity, self_weighted
from gflkit.graphs.domain_gcn import DomainGCN
from gflkit.models import build_model
from gflkit.models.fedcg import DomainConv2d, initial_adjacency, inverse_hamming_similarity
from gflkit.training import TrainConfig
from gflkit.runtime import Runtime

from conftest import make_federation, run_full_and_resumed

TINY = {"base": "simple_cnn", "num_domains": 3}


def fedcg_federation(**options):
    return make_federation(model="fedcg", model_options={**TINY, **options})


def test_eq6_adjacency_on_a_hand_computed_case():
    values = torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])  # distances 5, 1, sqrt(18)
    h = inverse_distance_similarity(values)
    assert torch.allclose(h, torch.tensor([[0, 1 / 5, 1], [1 / 5, 0, 18 ** -0.5], [1, 18 ** -0.5, 0]]))
    a = self_weighted(h, beta=0.5)
    assert torch.allclose(a.diagonal(), torch.full((3,), 0.5))
    assert torch.allclose(a[0, 1], torch.tensor(0.5 * (1 / 5) / (1 / 5 + 1)))
    assert torch.allclose(a.sum(1), torch.ones(3))
    assert torch.allclose(initial_adjacency(3, "uniform"), torch.tensor([[.5, .25, .25], [.25, .5, .25], [.25, .25, .5]]))
    assert torch.equal(initial_adjacency(3, "eye"), torch.eye(3))
    with pytest.raises(ValueError, match="beta"):
        self_weighted(h, beta=1.5)


def test_with_two_domains_eq6_merges_them():
    # D = 2, β = 0.5: whatever the distance, A = [[.5, .5], [.5, .5]], so after the server's first update both
    # domains get the same parameters σ(A V W) and FedCG with D = 2 has no domain-specific behaviour left
    values = torch.randn(2, 3, 5)
    a = self_weighted(inverse_distance_similarity(values.flatten(1)), beta=0.5)
    assert torch.allclose(a, torch.full((2, 2), 0.5))
    merged = DomainGCN(5)(values, a)
    assert torch.allclose(merged[0], merged[1])


def test_domain_gcn_propagates_then_projects():
    values = torch.randn(2, 3, 4)
    adjacency = torch.tensor([[0.5, 0.5], [0.25, 0.75]])
    square = DomainGCN(4)  # W starts as the identity: relu(A V)
    assert torch.allclose(square(values, adjacency), torch.relu(torch.einsum("ij,jrf->irf", adjacency, values)))
    plain = DomainGCN(4, projection=False, activation="none")
    assert torch.allclose(plain(values, torch.eye(2)), values)
    bottleneck = DomainGCN(32, layers=1, reduction=16)
    assert [tuple(p.shape) for p in bottleneck.parameters()] == [(2, 32), (32, 2)]
    two = DomainGCN(32, layers=2, reduction=16, activation="none")
    down, up = (p.detach() for p in two.parameters())
    v = torch.randn(2, 5, 32)
    expected = torch.einsum("ij,jrf->irf", adjacency, torch.einsum("ij,jrf->irf", adjacency, v) @ down.T) @ up.T
    assert torch.allclose(two(v, adjacency), expected, atol=1e-5)


def test_residual_convolution_is_eq4():
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    layer = DomainConv2d(conv, 2, DomainGCN(2 * 9 + 1, projection=False, activation="none"), lambda_init=0.7)
    z = torch.randn(4, 2, 5, 5)
    weights = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.3, 0.7], [0.5, 0.5]])
    layer.domain_weights = weights
    out = layer(z)
    per_domain = [F.conv2d(z, v[:, :-1].view(3, 2, 3, 3), v[:, -1], padding=1) for v in layer.values.detach()]
    mixed = sum(weights[:, d, None, None, None] * per_domain[d] for d in range(2))
    assert torch.allclose(out, conv(z) + 0.7 * mixed, atol=1e-5)
    layer.residual = False
    assert torch.allclose(layer(z), mixed, atol=1e-5)
    layer.domain_weights = None
    with pytest.raises(RuntimeError, match="domain_weights"):
        layer(z)


def test_hamming_adjacency_weights_domains_by_their_attribute_codes():
    # codes 00, 01, 10, 11: Hamming distances 1, 1, 2 from domain 0 → similarities 1, 1, 1/2
    h = inverse_hamming_similarity(4)
    assert torch.allclose(h[0], torch.tensor([0.0, 1.0, 1.0, 0.5]))
    assert torch.equal(h, h.T)
    a = initial_adjacency(4, "hamming", beta=0.5)
    assert torch.allclose(a[0], torch.tensor([0.5, 0.2, 0.2, 0.1]))
    assert torch.allclose(a.sum(1), torch.ones(4))
    with pytest.raises(ValueError, match="D = 2\\^n domains"):
        initial_adjacency(3, "hamming")


def test_oracle_domains_come_from_the_last_channel_in_training_and_test():
    model = build_model("fedcg", (3, 4, 4), 3, base="simple_cnn", num_domains=4, domains="oracle", layers="all")
    assert model.base.conv[0].agnostic.in_channels == 2, "the domain channel is not an image channel"
    x = torch.randn(5, 2, 4, 4)
    ids = torch.tensor([0, 3, 1, 1, 2])
    batch = torch.cat([x, ids.float().view(-1, 1, 1, 1).expand(-1, 1, 4, 4)], dim=1)
    for train in (True, False):
        model.train(train)
        model.features(batch)
        assert all(torch.equal(layer.domain_weights, F.one_hot(ids, 4).float()) for layer in model.domain_layers)
        assert model.auxiliary_loss() is None, "no domain classifier is trained on oracle domains"
    batch[0, -1] = 7.0
    with pytest.raises(ValueError, match="oracle domain ids must lie in 0..3"):
        model.features(batch)
    with pytest.raises(ValueError, match="unknown domains 'attributes'"):
        build_model("fedcg", (3, 4, 4), 3, base="simple_cnn", domains="attributes")


def test_training_uses_the_teachers_hard_domains_and_test_the_students_soft_ones():
    model = build_model("fedcg", (2, 4, 4), 3, **TINY, pseudo_labels="argmax")
    x = torch.randn(6, 2, 4, 4)
    model.train()
    hard = model.domain_weights(x)
    assert torch.equal(hard, F.one_hot(model.teacher(x).argmax(1), 3).float())
    assert torch.allclose(model.auxiliary_loss(), 0.1 * F.cross_entropy(model.student(x), model.teacher(x).argmax(1)))
    model.eval()
    assert torch.allclose(model.domain_weights(x), torch.softmax(model.student(x), 1))
    assert model.auxiliary_loss() is None
    model.test_domains = "hard"
    assert torch.equal(model.domain_weights(x), F.one_hot(model.student(x).argmax(1), 3).float())


def test_centred_pseudo_labels_split_what_the_literal_arg_max_puts_in_one_domain():
    x = torch.randn(60, 2, 4, 4)
    literal, centred = (build_model("fedcg", (2, 4, 4), 3, **TINY, pseudo_labels=rule) for rule in ("argmax", "centred"))
    centred.load_state_dict(literal.state_dict())
    with torch.no_grad():
        for model in (literal, centred):
            model.teacher.linear.bias.copy_(torch.tensor([50.0, 0.0, 0.0]))  # a score common to every image
    assert literal.teacher_labels(x).unique().tolist() == [0], "the literal arg-max collapses"
    scores = centred.teacher(x)
    labels = centred.teacher_labels(x)  # first batch: the centre is this batch's mean score
    assert torch.allclose(centred.teacher_center, scores.mean(0))
    assert torch.equal(labels, (scores - scores.mean(0)).argmax(1)) and len(labels.unique()) == 3
    centred.teacher_labels(x[:10])  # then a running mean: cumulative over the first batches
    assert torch.allclose(centred.teacher_center, (scores.mean(0) + centred.teacher(x[:10]).mean(0)) / 2, atol=1e-5)
    with pytest.raises(ValueError, match="pseudo_labels"):
        build_model("fedcg", (2, 4, 4), 3, **TINY, pseudo_labels="kmeans")


def test_assigned_domains_train_the_student_on_the_clients_domain_and_none_switches_residuals_off():
    model = build_model("fedcg", (2, 4, 4), 3, **TINY, domains="assigned")
    x = torch.randn(6, 2, 4, 4)
    model.train()
    model.assigned_domain = 2
    assert torch.equal(model.domain_weights(x), F.one_hot(torch.full((6,), 2), 3).float())
    assert torch.allclose(model.auxiliary_loss(), 0.1 * F.cross_entropy(model.student(x), torch.full((6,), 2)))
    model.assigned_domain = None
    with_residuals_off = model(x)
    assert model.auxiliary_loss() is None, "no domain, nothing for the student to learn"
    with torch.no_grad():
        model.domain_layers[0].scale.zero_()
    model.assigned_domain = 0
    assert torch.allclose(with_residuals_off, model(x)), "no domain = the domain-agnostic network alone"
    model.eval()
    assert torch.allclose(model.domain_weights(x), torch.softmax(model.student(x), 1)), "test: the student decides"
    model.train()
    model.assigned_domain = 3
    with pytest.raises(ValueError, match="assigned_domain must lie in 0..2"):
        model(x)
    with pytest.raises(ValueError, match="residual=False does not have"):
        build_model("fedcg", (2, 4, 4), 3, **TINY, domains="assigned", residual=False)


def kmeans_federation(**options):
    held_out = torch.tensor([False] * 6 + [True])
    return make_federation(num_clients=7, model="fedcg", held_out=held_out,
                           model_options={**TINY, "domains": "assigned", **options})


def test_kmeans_clusters_separately_trained_clients_by_their_data():
    # client k holds classes k % 3 and (k + 1) % 3: models trained apart group as {0, 3}, {1, 4}, {2, 5}
    fed = kmeans_federation()
    algorithm = build_algorithm("fedcg_kmeans", kmeans_epochs=5)
    algorithm.setup(fed)
    domains = algorithm.cluster_clients(fed)
    assert domains[6] == -1, "a held-out client never trains: it has no cluster"
    groups = {frozenset(torch.nonzero(domains == d).flatten().tolist()) for d in range(3)}
    assert groups == {frozenset({0, 3}), frozenset({1, 4}), frozenset({2, 5})}


def test_kmeans_clients_train_in_their_cluster_and_the_student_learns_it():
    fed = kmeans_federation()
    algorithm = build_algorithm("fedcg_kmeans", kmeans_epochs=2)
    model, train = fed.flat.module, fed.trainer.train  # every local training of a client passes through it
    trained = []  # (round, client, its training domain)

    def recording_train(client, round, *args, **kwargs):
        trained.append((round, client, model.assigned_domain))
        return train(client, round, *args, **kwargs)

    fed.trainer.train = recording_train
    run_rounds(fed, algorithm, Schedule(2), progress=False)
    domains = algorithm.client_domains
    assert {(c, d) for r, c, d in trained if r == 0} == {(k, None) for k in range(6)}, \
        "K-means's separate models first: every training client, no domain"
    in_rounds = [(c, d) for r, c, d in trained if r > 0]
    assert in_rounds and all(d == int(domains[c]) for c, d in in_rounds), "each client trains in its cluster"
    student = fed.layout.split(fed.global_model)["student.linear.weight"]
    assert not torch.equal(student, fed.layout.split(fed.initial)["student.linear.weight"]), "the student learned"
    assert torch.equal(algorithm.artifacts()["client_domains"], domains)
    assert model.assigned_domain is None, "no domain is left assigned after the round"


def test_kmeans_options_are_checked():
    with pytest.raises(ValueError, match="domains='assigned'"):
        run_rounds(fedcg_federation(), build_algorithm("fedcg_kmeans"), Schedule(1), progress=False)
    with pytest.raises(ValueError, match="method='fedcg_kmeans'"):
        run_rounds(kmeans_federation(), build_algorithm("fedcg"), Schedule(1), progress=False)
    with pytest.raises(ValueError, match="cannot make 8 clusters"):
        run_rounds(kmeans_federation(num_domains=8), build_algorithm("fedcg_kmeans"), Schedule(1), progress=False)
    with pytest.raises(ValueError, match="kmeans_epochs must be >= 1"):
        build_algorithm("fedcg_kmeans", kmeans_epochs=0)
    with pytest.raises(ValueError, match="teacher_every"):
        build_algorithm("fedcg_kmeans", teacher_every=0)


def test_local_training_leaves_the_teacher_alone_and_trains_the_student_and_lambda():
    fed = fedcg_federation()
    trained = fed.train(0, 1, fed.initial).vector
    views, start = fed.layout.split(trained), fed.layout.split(fed.initial)
    for name in start:
        changed = not torch.equal(views[name], start[name])
        if name.startswith("teacher."):
            assert not changed, f"the teacher changed in local training ({name})"
    assert not torch.equal(views["student.linear.weight"], start["student.linear.weight"])
    assert not torch.equal(views["base.conv.3.scale"], start["base.conv.3.scale"])


def test_server_copies_the_student_into_the_teacher_every_T_rounds_and_updates_A():
    fed = fedcg_federation()
    algorithm = build_algorithm("fedcg", teacher_every=2)
    run_rounds(fed, algorithm, Schedule(1), progress=False)
    views = fed.layout.split(fed.global_model)
    assert not torch.equal(views["teacher.linear.weight"], views["student.linear.weight"])
    expected = self_weighted(inverse_distance_similarity(views["base.conv.3.values"]), 0.5)
    assert torch.allclose(views["base.conv.3.adjacency"], expected)
    run_rounds(fed, algorithm, Schedule(2), progress=False)  # rounds 1-2 again from this state: round 2 copies
    views = fed.layout.split(fed.global_model)
    assert torch.equal(views["teacher.linear.weight"], views["student.linear.weight"])
    assert not views["teacher_center"].any() and views["teacher_center_batches"] == 0, "a new teacher's centre restarts"
    artifacts = algorithm.artifacts()
    assert artifacts["lambda"].shape == (1,) and "adjacency.base.conv.3" in artifacts


def test_fixed_adjacency_keeps_the_initial_A():
    fed = fedcg_federation(adjacency_init="uniform")
    run_rounds(fed, build_algorithm("fedcg", adjacency="fixed"), Schedule(2), progress=False)
    assert torch.allclose(fed.layout.split(fed.global_model)["base.conv.3.adjacency"], initial_adjacency(3, "uniform"))


def test_all_layers_and_options_are_checked():
    model = build_model("fedcg", (2, 4, 4), 3, **TINY, layers="all")
    assert model.domain_layer_names() == ["base.conv.0", "base.conv.3"]
    with pytest.raises(ValueError, match="unknown layers"):
        build_model("fedcg", (2, 4, 4), 3, **TINY, layers="first")
    with pytest.raises(ValueError, match="model='fedcg'"):
        run_rounds(make_federation(), build_algorithm("fedcg"), Schedule(1), progress=False)
    fed = fedcg_federation()
    fed.train_config = TrainConfig(momentum=0.9)
    with pytest.raises(ValueError, match="plain SGD"):
        run_rounds(fed, build_algorithm("fedcg"), Schedule(1), progress=False)
    fed.train_config = TrainConfig(lr_schedule=[[0, 0.1], [1, 0.01]])
    with pytest.raises(ValueError, match="plain SGD at one rate only; got a learning-rate schedule"):
        run_rounds(fed, build_algorithm("fedcg"), Schedule(1), progress=False)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    run = run_full_and_resumed(fedcg_federation, lambda: build_algorithm("fedcg", teacher_every=1),
                               tmp_path / "checkpoint.pt")
    assert run.full.equals(run.resumed)


def test_kmeans_resume_reproduces_the_uninterrupted_run_without_clustering_again(tmp_path, monkeypatch):
    from gflkit.algorithms.fedcg import FedCGKMeans

    clusterings = []
    cluster_clients = FedCGKMeans.cluster_clients
    monkeypatch.setattr(FedCGKMeans, "cluster_clients",
                        lambda self, fed: clusterings.append(self) or cluster_clients(self, fed))
    run = run_full_and_resumed(kmeans_federation, lambda: build_algorithm("fedcg_kmeans", kmeans_epochs=2),
                               tmp_path / "checkpoint.pt")
    assert run.full.equals(run.resumed)
    assert torch.equal(run.full_algorithm.client_domains, run.resumed_algorithm.client_domains)
    assert run.resumed_algorithm not in clusterings, "the resumed run read its clusters from the checkpoint"
    assert len(clusterings) == 2, "the full run and the interrupted one each clustered once"


@pytest.mark.parametrize("method, domains", [("fedcg", "classifier"), ("fedcg_kmeans", "assigned")])
def test_fedcg_learns_digits_it_never_saw_and_trains_lambda(method, domains):
    from gflkit import metrics
    from gflkit.experiment import RunConfig, run, stored_artifacts
    from gflkit.results import ResultStore

    config = RunConfig(dataset="digits", num_clients=10, partition="iid", held_out=0.2, method=method,
                       method_options={"teacher_every": 2}, model="fedcg",
                       model_options={"base": "simple_cnn", "num_domains": 2, "domains": domains}, rounds=8,
                       batch_size=16, lr=0.3)
    with tempfile.TemporaryDirectory() as root:
        store = ResultStore(root)
        records = run(config, Runtime(device="cpu", store=store), progress=False)
        artifacts = stored_artifacts(config, Runtime(device="cpu", store=store))
    unseen = metrics.final_summary(metrics.held_out_rows(records))
    assert unseen["weighted_mean"].item() > 35, "held-out digits (chance: 10 %)"
    assert artifacts["lambda"].shape == (1,) and artifacts["lambda"].item() != 1.0, "λ was trained"
    if method == "fedcg_kmeans":
        assert artifacts["client_domains"].tolist().count(-1) == 2, "the two held-out clients have no cluster"
