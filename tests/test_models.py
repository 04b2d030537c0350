import pytest
import torch

from gflkit.models import MODELS, build_model

# models that take images (C, H, W); the sequence models are tested in test_models_extra.py
IMAGE_MODELS = ["mclr", "mcmahan_cnn", "simple_cnn", "mobilenet_v2"]


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


def test_mcmahan_cnn_has_the_published_parameter_count():
    # McMahan et al. report 1,663,370 parameters for their MNIST CNN.
    model = build_model("mcmahan_cnn", (1, 28, 28), 10)
    assert sum(p.numel() for p in model.parameters()) == 1_663_370


def test_unknown_model_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="unknown model 'resnet'.*mclr"):
        build_model("resnet", (1, 28, 28), 10)
