import torch

from gflkit.seeding import derive_seed, generator
from gflkit.training import TrainConfig, local_sgd, make_optimizer, minibatches

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
    x, y, idx = fed.x, fed.y, fed.train_indices[0]
    fed.flat.load(fed.initial)
    first = local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 1)), TrainConfig(epochs=1, batch_size=8, lr=0.1))
    later = local_sgd(fed.flat, fed.task.loss, epoch(x, y, idx, generator(0, 2)), TrainConfig(epochs=20, batch_size=8, lr=0.1))
    assert later < first


def test_loss_term_gradient_is_applied():
    fed = make_federation()
    x, y, idx = fed.x, fed.y, fed.train_indices[0]
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
