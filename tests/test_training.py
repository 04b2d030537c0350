import pytest
import torch

from gflkit.seeding import derive_seed, generator
from gflkit.algorithms.terms import squared_distance
from gflkit.training import Proximal, TrainConfig, local_sgd, make_optimizer, minibatches, sgd_step_

from conftest import make_federation


def epoch(x, y, idx, gen, batch_size=8):
    """One shuffled pass of minibatches per call, all drawn from ``gen``."""
    return lambda: minibatches(x, y, idx, batch_size, gen)


def test_minibatches_cover_the_indices_once_in_order_or_shuffled():
    x, y, idx = torch.arange(10.0)[:, None], torch.arange(10), torch.tensor([7, 1, 4, 2, 9])
    ordered = list(minibatches(x, y, idx, 2))
    assert [b[1].tolist() for b in ordered] == [[7, 1], [4, 2], [9]]
    shuffled = torch.cat([b[1] for b in minibatches(x, y, idx, 2, generator(0, 1))])
    assert sorted(shuffled.tolist()) == sorted(idx.tolist())


def test_local_sgd_reduces_the_loss_of_a_separable_client():
    fed = make_federation()
    x, y, idx = fed.data.x, fed.data.y, fed.data.train_indices[0]
    fed.flat.load(fed.initial)
    first = local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 1)), TrainConfig(epochs=1, batch_size=8, lr=0.1))
    later = local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 2)), TrainConfig(epochs=20, batch_size=8, lr=0.1))
    assert later < first


def test_loss_term_gradient_is_applied():
    fed = make_federation()
    x, y, idx = fed.data.x, fed.data.y, fed.data.train_indices[0]
    config = TrainConfig(epochs=1, batch_size=8, lr=0.1)
    fed.flat.load(fed.initial)
    local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 1)), config)
    plain = fed.flat.vector.clone()
    fed.flat.load(fed.initial)
    # a huge pull towards zero must shrink the weights compared with plain training
    local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 1)), config,
              loss_term=lambda step: 5.0 * sum(p.pow(2).sum() for p in step.model.parameters()))
    assert fed.flat.vector.norm() < plain.norm()


def test_derived_seeds_depend_only_on_their_keys():
    assert derive_seed(3, 1, 2) == derive_seed(3, 1, 2)
    assert derive_seed(3, 1, 2) != derive_seed(3, 2, 1)
    assert torch.equal(torch.randperm(10, generator=generator(0, 5)), torch.randperm(10, generator=generator(0, 5)))


def test_make_optimizer_builds_the_configured_optimiser():
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    sgd = make_optimizer(parameters, TrainConfig(lr=0.1, momentum=0.9, weight_decay=1e-3))
    adam = make_optimizer(parameters, TrainConfig(lr=0.01, weight_decay=1e-6, optimizer="adam"))
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["momentum"] == 0.9
    assert isinstance(adam, torch.optim.Adam) and (adam.defaults["lr"], adam.defaults["weight_decay"]) == (0.01, 1e-6)


@pytest.mark.parametrize("momentum, weight_decay, nesterov", [(0.0, 0.0, False), (0.0, 5e-4, False), (0.9, 0.0, False),
                                                             (0.9, 5e-4, False), (0.9, 5e-4, True), (0.5, 0.0, True)])
def test_sgd_step_is_torch_sgd_for_every_option_it_supports(momentum, weight_decay, nesterov):
    """The batched loop's step (sgd_step_) against torch.optim.SGD, the sequential loop's: four steps, at the
    config's rate and at a per-row rate (a learning-rate schedule's), each row of a stack a separate client."""
    config = TrainConfig(lr=0.05, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
    gen = torch.Generator().manual_seed(0)
    start, gradients = torch.randn(3, 5, generator=gen), [torch.randn(3, 5, generator=gen) for _ in range(4)]
    row_rates = torch.tensor([0.05, 0.01, 0.2])
    for rate in (None, row_rates):
        ours, velocity = start.clone(), torch.full_like(start, float("nan")) if momentum else None
        for step, gradient in enumerate(gradients):
            sgd_step_(ours, gradient.clone(), velocity, step == 0, config, None if rate is None else rate.view(-1, 1))
        for row in range(3):  # torch's SGD on one client's row at its own rate
            theirs = torch.nn.Parameter(start[row].clone())
            lr = config.lr if rate is None else float(rate[row])
            optimizer = torch.optim.SGD([theirs], lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=nesterov)
            for gradient in gradients:
                theirs.grad = gradient[row].clone()
                optimizer.step()
            torch.testing.assert_close(ours[row], theirs.detach(), rtol=1e-6, atol=1e-6)  # float32 rounding


def test_sgd_step_updates_the_parameters_and_the_momentum_in_place():
    config = TrainConfig(lr=0.1, momentum=0.9, weight_decay=0.01)
    param, gradient, velocity = torch.ones(4), torch.full((4,), 2.0), torch.full((4,), 3.0)
    sgd_step_(param, gradient, velocity, False, config)
    expected_velocity = 0.9 * 3.0 + (2.0 + 0.01 * 1.0) * torch.ones(4)
    torch.testing.assert_close(velocity, expected_velocity)
    torch.testing.assert_close(param, 1.0 - 0.1 * expected_velocity)


def test_the_first_step_fills_the_momentum_buffer_with_the_gradient():
    config = TrainConfig(lr=0.1, momentum=0.9)
    param, velocity = torch.zeros(3), torch.full((3,), float("nan"))  # whatever the buffer held is ignored
    sgd_step_(param, torch.ones(3), velocity, True, config)
    assert torch.equal(velocity, torch.ones(3)) and torch.equal(param, torch.full((3,), -0.1))


@pytest.mark.parametrize("weight", [0.01, 1.0, 1 / 0.3, 0.0])
def test_a_proximal_terms_gradient_is_autograds_bit_for_bit(weight):
    """Proximal(ρ) adds ρ (w − a) to the gradient: autograd's gradient of (ρ/2)‖w − a‖², the same floats."""
    gen = torch.Generator().manual_seed(1)
    w, anchor = torch.randn(1000, generator=gen, requires_grad=True), torch.randn(1000, generator=gen)
    (0.5 * weight * squared_distance([w], [anchor])).backward()
    assert torch.equal(Proximal(weight).gradient(w, anchor), w.grad)


@pytest.mark.parametrize("mode", ["sequential", "batched"])
def test_local_training_with_a_proximal_term_is_training_with_its_loss(mode):
    fed = make_federation()
    fed.trainer.mode = mode
    anchors = [{"anchor": torch.randn(fed.dim, generator=torch.Generator().manual_seed(k))} for k in range(3)]
    starts = fed.initial.expand(3, -1)

    def term(step):
        return 0.5 * 0.7 * squared_distance(step.params, fed.flat.parameters_as_views(step.context["anchor"]))

    by_loss = fed.train_clients([0, 1, 2], 1, starts, term, anchors)
    by_gradient = fed.train_clients([0, 1, 2], 1, starts, contexts=anchors, proximal=Proximal(0.7))
    for a, b in zip(by_loss, by_gradient):
        assert torch.equal(a.vector, b.vector) and a.loss == b.loss


def test_a_negative_proximal_weight_is_refused():
    with pytest.raises(ValueError, match="weight must be >= 0"):
        Proximal(-1.0)
