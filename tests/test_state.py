import pytest
import torch
from torch import nn

from gflkit.state import FlatModule


def test_vector_holds_parameters_and_float_buffers_in_order():
    net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    flat = FlatModule(net)
    names = [e.name for e in flat.layout.entries]
    assert names == ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var"]
    assert flat.layout.dim == 6 + 2 + 2 + 2 + 2 + 2
    assert [e.is_buffer for e in flat.layout.entries] == [False] * 4 + [True] * 2


def test_parameters_are_views_of_the_vector():
    net = nn.Linear(3, 2)
    flat = FlatModule(net)
    row = torch.arange(flat.layout.dim, dtype=torch.float32)
    flat.load(row)
    assert torch.equal(net.weight.detach().flatten(), row[:6])
    assert torch.equal(net.bias.detach(), row[6:])
    with torch.no_grad():
        net.weight.add_(1.0)
    assert torch.equal(flat.vector[:6], row[:6] + 1)


def test_optimizer_step_and_batchnorm_statistics_write_into_the_vector():
    net = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    flat = FlatModule(net)
    before = flat.vector.clone()
    opt = torch.optim.SGD(flat.parameters, lr=0.1)
    net(torch.randn(8, 3)).sum().backward()
    opt.step()
    changed = flat.vector != before
    stats = flat.layout.mask(lambda e: e.name.endswith(("running_mean", "running_var")))
    assert changed[stats].any(), "BatchNorm running statistics must update the vector"
    assert changed[flat.layout.parameter_mask()].any()


def test_masks_and_split():
    flat = FlatModule(nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1)))
    head = flat.layout.mask(lambda e: e.name.startswith("1."))
    assert head.sum() == 3 and head[-3:].all()
    views = flat.layout.split(flat.vector)
    assert views["0.weight"].shape == (2, 2)


def test_load_rejects_wrong_length():
    flat = FlatModule(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="shape"):
        flat.load(torch.zeros(3))
