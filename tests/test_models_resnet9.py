"""The SFL authors' ResNet-9 (``BResidual.py``), registered as ``resnet9``."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gflkit.batched import batching_obstacle
from gflkit.federation import Federation
from gflkit.models import MODELS, ResNet9, build_model
from gflkit.state import FlatModule
from gflkit.tasks import ClassificationTask
from gflkit.training import TrainConfig

MNIST = (1, 28, 28)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("resnet9", MNIST, 10)


def randomise_batchnorm(net: nn.Module, seed: int = 1) -> None:
    """Non-trivial BN affine parameters and running statistics, so eval-mode checks see them."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.weight.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
                m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.running_var.shape, generator=gen))


def test_registered_with_the_authors_parameter_count(model):
    assert MODELS["resnet9"] is ResNet9
    assert sum(p.numel() for p in model.parameters()) == 2_439_104
    assert model.classifier.bias is None and tuple(model.classifier.weight.shape) == (10, 256)
    assert model.feature_dim == 256


def test_layer_structure_matches_bresidual(model):
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [
        (1, 64),                                # prep
        (64, 128), (128, 128), (128, 128),      # layer1 + residual
        (128, 256), (256, 256), (256, 256),     # layer2 + residual
        (256, 256),                             # layer3
    ]
    assert all(c.kernel_size == (3, 3) and c.padding == (1, 1) and c.stride == (1, 1) and c.bias is None
               for c in convs)
    norms = [m.num_features for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms == [c.out_channels for c in convs]
    pools = [m for m in model.modules() if isinstance(m, nn.MaxPool2d)]
    assert len(pools) == 4 and all(p.kernel_size == 2 and p.stride == 2 for p in pools)
    assert not hasattr(model.layer3, "residual") and len(model.layer3) == 2


def test_output_shape_and_features_then_head(model):
    model.eval()
    x = torch.rand(3, *MNIST)
    h = model.features(x)
    assert h.shape == (3, 256)
    assert model(x).shape == (3, 10)
    assert torch.allclose(model.head(h), model(x))


def test_logits_are_a_fifth_of_the_linear_layer(model):
    model.eval()
    seen = {}
    handle = model.classifier.register_forward_hook(lambda m, inputs, out: seen.update(linear=out))
    try:
        logits = model(torch.rand(2, *MNIST))
    finally:
        handle.remove()
    assert torch.allclose(logits, 0.2 * seen["linear"])
    unscaled = build_model("resnet9", MNIST, 10, scale=1.0)
    unscaled.load_state_dict(model.state_dict())
    h = torch.randn(2, 256)
    assert torch.allclose(model.head(h), 0.2 * unscaled.head(h))
    assert torch.allclose(unscaled.head(h), unscaled.classifier(h))


def test_forward_equals_the_authors_graph_written_out(model):
    """Recompute BResidual's graph with functional ops: the last pool takes the top-left 2×2 of the 3×3 map."""
    randomise_batchnorm(model)
    model.eval()
    p = dict(model.named_parameters())
    b = dict(model.named_buffers())

    def cbr(x, name):
        x = F.conv2d(x, p[f"{name}.0.weight"], padding=1)
        x = F.batch_norm(x, b[f"{name}.1.running_mean"], b[f"{name}.1.running_var"], p[f"{name}.1.weight"],
                         p[f"{name}.1.bias"], training=False)
        return torch.relu(x)

    x = torch.randn(2, *MNIST, generator=torch.Generator().manual_seed(2))
    out = cbr(x, "prep")
    for layer in ("layer1", "layer2"):
        out = F.max_pool2d(cbr(out, f"{layer}.0"), 2)
        out = out + cbr(cbr(out, f"{layer}.2.res1"), f"{layer}.2.res2")
    out = F.max_pool2d(cbr(out, "layer3.0"), 2)
    assert out.shape[-2:] == (3, 3)
    h = out[:, :, :2, :2].amax(dim=(2, 3))          # MaxPool2d(2) on 3×3: the last row/column are dropped
    expected = 0.2 * h @ p["classifier.weight"].T
    with torch.no_grad():
        assert torch.allclose(model.features(x), h, atol=1e-5)
        assert torch.allclose(model(x), expected, atol=1e-5)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_flat_module_round_trip_and_backward(mode):
    torch.manual_seed(0)
    net = build_model("resnet9", MNIST, 10)
    flat = FlatModule(net)
    buffers = [e for e in flat.layout.entries if e.is_buffer]
    assert {e.name.rsplit(".", 1)[1] for e in buffers} == {"running_mean", "running_var"}
    assert not any("num_batches_tracked" in e.name for e in flat.layout.entries)
    assert sum(e.numel for e in buffers) == 2 * 1472
    assert flat.layout.dim == 2_439_104 + 2 * 1472

    row = torch.randn(flat.layout.dim, generator=torch.Generator().manual_seed(3))
    row[flat.layout.mask(lambda e: e.name.endswith("running_var"))] = 1.0   # keep variances positive
    flat.load(row)
    state = net.state_dict()
    for entry in flat.layout.entries:
        assert torch.equal(state[entry.name], row[entry.slice].view(entry.shape)), entry.name

    getattr(net, mode)()
    before = flat.vector.clone()
    x, y = torch.rand(4, *MNIST), torch.tensor([0, 1, 2, 3])
    loss = F.cross_entropy(net(x), y)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(q.grad is not None and torch.isfinite(q.grad).all() for q in flat.parameters)
    stats = flat.layout.mask(lambda e: e.is_buffer)
    changed = not torch.equal(flat.vector[stats], before[stats])
    assert changed == (mode == "train"), "BN statistics update the flat vector in train mode only"


def test_batched_training_falls_back_because_of_batchnorm():
    gen = torch.Generator().manual_seed(4)
    x, y = torch.rand(8, *MNIST, generator=gen), torch.randint(0, 10, (8,), generator=gen)
    train, test = [torch.arange(0, 3), torch.arange(4, 7)], [torch.tensor([3]), torch.tensor([7])]
    fed = Federation(x, y, train, test, build_model("resnet9", MNIST, 10), ClassificationTask(), TrainConfig())
    assert "has buffers" in batching_obstacle(fed, fed.train_config, [{}, {}])


@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 8, 8), (1, 28, 32), (1, 15, 28)])
def test_inputs_the_head_cannot_flatten_are_refused(shape):
    with pytest.raises(ValueError, match=rf"input_shape \({shape[0]}, {shape[1]}, {shape[2]}\).*16–31"):
        build_model("resnet9", shape, 10)


def test_non_image_inputs_are_refused():
    with pytest.raises(ValueError, match="needs image inputs"):
        build_model("resnet9", (784,), 10)


@pytest.mark.parametrize("side", [16, 31])
def test_every_supported_side_gives_a_1x1_map(side):
    net = build_model("resnet9", (3, side, side), 5).eval()
    assert net(torch.rand(1, 3, side, side)).shape == (1, 5)
