import pytest
import torch

from gflkit.channel import Channel
from gflkit.engine import Schedule, run_rounds
from gflkit.algorithms import build_algorithm
from gflkit.experiment import RunConfig

from conftest import make_federation

CLIENTS = torch.tensor([0, 3])


def test_perfect_channel_passes_uploads_through_unchanged():
    updates = torch.randn(2, 50)
    received, mask = Channel().transmit(updates, CLIENTS, round=1, seed=0, reference_scale=1.0)
    assert received is updates and mask is None


def test_noise_has_the_standard_deviation_s_times_the_reference_scale():
    updates = torch.zeros(2, 200_000)
    received, mask = Channel(noise_scale=0.2).transmit(updates, CLIENTS, round=1, seed=0, reference_scale=0.5)
    assert mask is None
    assert received.std(dim=1) == pytest.approx(torch.full((2,), 0.1), rel=0.01)
    assert received.mean().abs() < 1e-3


def test_lost_entries_arrive_as_zero_at_the_missing_rate():
    updates = torch.ones(2, 100_000)
    received, mask = Channel(missing_rate=0.1).transmit(updates, CLIENTS, round=1, seed=0, reference_scale=1.0)
    assert mask.dtype == torch.bool and (1 - mask.float().mean()).item() == pytest.approx(0.1, abs=0.005)
    assert torch.equal(received, mask.float())


def test_each_clients_corruption_depends_on_seed_round_and_client_only():
    updates = torch.zeros(2, 1000)
    channel = Channel(noise_scale=1.0, missing_rate=0.05)
    first, mask = channel.transmit(updates, CLIENTS, round=2, seed=7, reference_scale=1.0)
    alone, mask_alone = channel.transmit(updates[1:], CLIENTS[1:], round=2, seed=7, reference_scale=1.0)
    assert torch.equal(first[1], alone[0]) and torch.equal(mask[1], mask_alone[0])
    other_round, _ = channel.transmit(updates, CLIENTS, round=3, seed=7, reference_scale=1.0)
    assert not torch.equal(first, other_round)


def test_federation_upload_uses_the_initial_models_mean_absolute_entry_and_records_the_mask():
    fed = make_federation()
    fed.channel = Channel(noise_scale=0.1, missing_rate=0.2)
    vectors = fed.models[:2].clone()
    received = fed.upload(torch.tensor([0, 1]), vectors, round=1)
    expected, mask = fed.channel.transmit(vectors, torch.tensor([0, 1]), 1, fed.seed, float(fed.initial.abs().mean()))
    assert torch.equal(received, expected) and torch.equal(fed.upload_mask, mask)


def test_a_noisy_channel_changes_fedavg_but_not_local_training():
    def final_models(method, channel):
        fed = make_federation()
        fed.channel = channel
        run_rounds(fed, build_algorithm(method), Schedule(rounds=2), progress=False)
        return fed.models, fed.global_model

    noisy = Channel(noise_scale=0.5)
    assert not torch.equal(final_models("fedavg", noisy)[1], final_models("fedavg", Channel())[1])
    assert torch.equal(final_models("local", noisy)[0], final_models("local", Channel())[0])


@pytest.mark.parametrize("options, message", [
    ({"noise_scale": -0.1}, "noise_scale s must be >= 0"),
    ({"missing_rate": 1.0}, r"missing_rate must lie in \[0, 1\)"),
    ({"snr": 3}, r"unknown option\(s\) \['snr'\] for the channel"),
])
def test_bad_channel_options_fail_in_the_run_config(options, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(dataset="digits", num_clients=4, channel=options)


def test_run_config_lists_every_channel_option():
    assert RunConfig(dataset="digits", num_clients=4).channel == {"noise_scale": 0.0, "missing_rate": 0.0}
