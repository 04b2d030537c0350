import pytest
import torch

from gflkit.models import MODELS, build_model

# models that take images (C, H, W); the sequence models are tested in test_models_extra.py
IMAGE_MODELS = ["mclr", "mclr_relu", "mcmahan_cnn", "simple_cnn", "mobilenet_v2"]


def test_image_models_are_registered():
    assert set(IMAGE_MODELS) <= set(MODELS)


@pytest.mark.parametrize("name", IMAGE_MODELS)
@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 8, 8)])
def test_features_then_head_equals_forward(name, shape):
    model = build_model(name, shape, 10)
    x = torch.rand(5, *shape)
    h = model.features(x)
    assert h.shape == (5, model.feature_dim)
    assert torch.allclose(model.head(h), model(x))
    assert model(x).shape == (5, 10)


def test_mclr_is_784_64_10():
    model = build_model("mclr", (1, 28, 28), 10)
    assert [tuple(p.shape) for p in model.parameters()] == [(64, 784), (64,), (10, 64), (10,)]


def test_mclr_is_linear_and_mclr_relu_is_not():
    # the authors' Mclr_Logistic has no activation: f(a x1 + b x2) = a f(x1) + b f(x2) up to the bias
    torch.manual_seed(0)
    x1, x2 = torch.randn(3, 1, 28, 28), torch.randn(3, 1, 28, 28)
    linear = build_model("mclr", (1, 28, 28), 10)
    offset = linear(torch.zeros(1, 1, 28, 28))
    assert torch.allclose(linear(2 * x1 - 3 * x2) - offset, 2 * (linear(x1) - offset) - 3 * (linear(x2) - offset),
                          atol=1e-4)
    relu = build_model("mclr_relu", (1, 28, 28), 10)
    relu.load_state_dict(linear.state_dict())
    h = relu.features(x1)
    assert (h >= 0).all() and torch.allclose(h, linear.features(x1).clamp(min=0))


def test_mcmahan_cnn_has_the_published_parameter_count():
    # McMahan et al. report 1,663,370 parameters for their MNIST CNN.
    model = build_model("mcmahan_cnn", (1, 28, 28), 10)
    assert sum(p.numel() for p in model.parameters()) == 1_663_370


def test_unknown_model_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="unknown model 'resnet'.*mclr"):
        build_model("resnet", (1, 28, 28), 10)


def test_leaf_celeba_cnn_is_four_conv_bn_pool_relu_blocks():
    model = build_model("leaf_celeba_cnn", (3, 84, 84), 2)
    kinds = [type(m).__name__ for m in model.conv]
    assert kinds == ["Conv2d", "BatchNorm2d", "MaxPool2d", "ReLU"] * 4
    assert all(m.kernel_size == (3, 3) and m.out_channels == 32 for m in model.conv if isinstance(m, torch.nn.Conv2d))
    assert model.feature_dim == 32 * 5 * 5  # 84 → 42 → 21 → 10 → 5
    x = torch.randn(3, 3, 84, 84)
    assert model(x).shape == (3, 2) and model.features(x).shape == (3, 800)
    assert sum(p.numel() for p in model.parameters()) == 896 + 3 * 9248 + 4 * 64 + 800 * 2 + 2
    fresh = build_model("leaf_celeba_cnn", (3, 84, 84), 2)
    assert all(bool((bn.running_mean == 0).all()) for bn in fresh.conv if isinstance(bn, torch.nn.BatchNorm2d)), \
        "building the model does not touch its BatchNorm statistics"
