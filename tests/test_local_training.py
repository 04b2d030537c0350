"""A federation's local training (gflkit.local_training): the federation delegates to it, it keeps one
optimiser per training configuration and leaves nothing of a failed training behind."""
from __future__ import annotations

import dataclasses

import pytest
import torch

from gflkit.local_training import LOCAL_TRAINING, LocalTraining

from conftest import make_federation


def test_the_federation_trains_through_its_own_local_training():
    fed = make_federation(num_clients=3)
    assert isinstance(fed.trainer, LocalTraining) and fed.trainer.fed is fed and fed.trainer.mode == "auto"
    through_federation = fed.train(1, 1, fed.initial)
    fresh = make_federation(num_clients=3)
    direct = fresh.trainer.train(1, 1, fresh.initial)
    assert torch.equal(through_federation.vector, direct.vector) and through_federation.loss == direct.loss
    assert fed.trainer.paths == {"sequential"} and not torch.equal(direct.vector, fresh.initial)
    assert LOCAL_TRAINING == ("auto", "batched", "sequential")


def test_one_optimiser_per_training_configuration_reused_and_emptied():
    fed = make_federation(num_clients=2)
    config = dataclasses.replace(fed.train_config, momentum=0.9)
    first = fed.trainer.optimizer(config)
    fed.train(0, 1, fed.initial, config=config)
    assert any(first.state.values()), "momentum buffers exist after a training"
    again = fed.trainer.optimizer(config)
    assert again is first and not first.state, "the same optimiser, emptied for the next client"
    assert fed.trainer.optimizer(fed.train_config) is not first


def test_a_training_that_fails_leaves_no_extra_parameter_in_the_optimiser():
    fed = make_federation(num_clients=2)
    mask = torch.ones(3, requires_grad=True)

    def failing(step):
        raise RuntimeError("loss term failed")

    with pytest.raises(RuntimeError, match="loss term failed"):
        fed.train(0, 1, fed.initial, loss_term=failing, extra_parameters=[mask])
    optimizer = fed.trainer.optimizer(fed.train_config)
    assert len(optimizer.param_groups) == 1 and mask not in optimizer.state
    assert fed.trainer.optimizer_states == {}, "no state kept for a non-persistent optimiser"
