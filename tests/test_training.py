import torch

from gflkit.seeding import derive_seed, generator
from gflkit.training import TrainConfig, local_sgd

from conftest import make_federation


def test_local_sgd_reduces_the_loss_of_a_separable_client():
    fed = make_federation()
    x, y, idx = fed.x, fed.y, fed.train_indices[0]
    fed.flat.load(fed.initial)
    first = local_sgd(fed.flat, fed.task.loss, x, y, idx, TrainConfig(epochs=1, batch_size=8, lr=0.1), generator(0, 1))
    later = local_sgd(fed.flat, fed.task.loss, x, y, idx, TrainConfig(epochs=20, batch_size=8, lr=0.1), generator(0, 2))
    assert later < first


def test_loss_term_gradient_is_applied():
    fed = make_federation()
    x, y, idx = fed.x, fed.y, fed.train_indices[0]
    config = TrainConfig(epochs=1, batch_size=8, lr=0.1)
    fed.flat.load(fed.initial)
    local_sgd(fed.flat, fed.task.loss, x, y, idx, config, generator(0, 1))
    plain = fed.flat.vector.clone()
    fed.flat.load(fed.initial)
    # a huge pull towards zero must shrink the weights compared with plain training
    local_sgd(fed.flat, fed.task.loss, x, y, idx, config, generator(0, 1),
              loss_term=lambda step: 5.0 * sum(p.pow(2).sum() for p in step.model.parameters()))
    assert fed.flat.vector.norm() < plain.norm()


def test_derived_seeds_depend_only_on_their_keys():
    assert derive_seed(3, 1, 2) == derive_seed(3, 1, 2)
    assert derive_seed(3, 1, 2) != derive_seed(3, 2, 1)
    assert torch.equal(torch.randperm(10, generator=generator(0, 5)), torch.randperm(10, generator=generator(0, 5)))
