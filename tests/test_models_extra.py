"""MobileNetV2, CharLSTM and GRUSeq2Seq: shapes, the features/head split, parameter counts, architecture facts."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from gflkit.models import MODELS, CharLSTM, GRUSeq2Seq, MobileNetV2, RNNForecaster, build_model
from gflkit.models.mobilenet import InvertedResidual, make_divisible


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------------------------ MobileNetV2
def test_mobilenet_v2_parameter_count_for_cifar10():
    # Sandler et al.'s MobileNetV2 (width 1.0) has 3,504,872 parameters with the 1000-class ImageNet head
    # (torchvision); with a 10-class head: 3,504,872 - (1280·1000 + 1000) + (1280·10 + 10) = 2,236,682.
    # Strides (our CIFAR change) do not affect the count.
    model = build_model("mobilenet_v2", (3, 32, 32), 10)
    assert _count(model) == 2_236_682
    assert _count(model.classifier) == 12_810
    assert 3_504_872 - (1280 * 1000 + 1000) + (1280 * 10 + 10) == 2_236_682


@pytest.mark.parametrize("shape,spatial", [((3, 32, 32), 4), ((1, 28, 28), 4), ((1, 8, 8), 1)])
def test_mobilenet_v2_shapes(shape, spatial):
    model = build_model("mobilenet_v2", shape, 10)
    x = torch.rand(3, *shape)
    assert model.body(x).shape == (3, 1280, spatial, spatial)  # CIFAR strides: 32×32 is down-sampled 8×
    h = model.features(x)
    assert h.shape == (3, 1280) and model.feature_dim == 1280
    assert model(x).shape == (3, 10) and torch.allclose(model.head(h), model(x))
    assert isinstance(model.classifier, nn.Linear)


def test_mobilenet_v2_architecture():
    model = MobileNetV2((3, 32, 32), 10)
    blocks = [m for m in model.body if isinstance(m, InvertedResidual)]
    assert len(blocks) == 17 and sum(b.residual for b in blocks) == 10
    strides = [m.stride[0] for m in model.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
    assert strides[0] == 1 and strides.count(2) == 3  # stem and the 24-channel stage use stride 1
    assert model.body[0][0].out_channels == 32 and model.body[-1][0].out_channels == 1280


def test_mobilenet_v2_width_multiplier():
    half = MobileNetV2((3, 32, 32), 10, width=0.5)
    assert half.feature_dim == 1280 and half.body[0][0].out_channels == 16
    assert _count(half) < _count(MobileNetV2((3, 32, 32), 10))
    assert MobileNetV2((3, 32, 32), 10, width=1.5).feature_dim == 1920
    assert [make_divisible(v) for v in (32 * 0.5, 24 * 0.75, 12.0, 3.0)] == [16, 24, 16, 8]
    with pytest.raises(ValueError, match="image inputs"):
        MobileNetV2((80,), 10)


# --------------------------------------------------------------------------------------------- CharLSTM
def test_char_lstm_shapes_and_split():
    model = build_model("char_lstm", (80,), 81)
    x = torch.randint(0, 81, (4, 80))
    h = model.features(x)
    assert h.shape == (4, 256) and model.feature_dim == 256
    assert model(x).shape == (4, 81) and torch.allclose(model.head(h), model(x))
    assert model.embedding.weight.shape == (81, 8)
    assert model.lstm.num_layers == 2 and model.lstm.hidden_size == 256
    assert model.classifier.weight.shape == (81, 256)
    # Embedding 81·8 + LSTM layer 1 4·256·(8+256+2) + layer 2 4·256·(256+256+2) + linear 256·81+81
    assert _count(model) == 81 * 8 + 4 * 256 * (8 + 256 + 2) + 4 * 256 * (256 + 256 + 2) + 256 * 81 + 81


def test_char_lstm_features_are_the_last_top_layer_state():
    model = CharLSTM((10,), 20, layers=1)
    x = torch.randint(0, 20, (3, 10))
    _, (h_n, _) = model.lstm(model.embedding(x))
    assert torch.allclose(model.features(x), h_n[-1])
    with pytest.raises(ValueError, match="seq_len"):
        CharLSTM((1, 28, 28), 10)


# ------------------------------------------------------------------------------------------- GRUSeq2Seq
def test_gru_seq2seq_shapes_and_split():
    model = build_model("gru_seq2seq", (12, 2), 12)
    x = torch.randn(5, 12, 2)
    h = model.features(x)
    assert h.shape == (5, 128) and model.feature_dim == 2 * 64
    assert model(x).shape == (5, 12) and torch.allclose(model.head(h), model(x))
    assert model.encoder.hidden_size == 64 and model.encoder.num_layers == 2
    assert model.classifier.weight.shape == (1, 64)


def test_gru_seq2seq_features_stack_the_encoder_layers():
    model = GRUSeq2Seq((12, 2), 6, hidden=8, layers=3)
    x = torch.randn(4, 12, 2)
    output, state = model.encoder(x)
    h = model.features(x)
    assert h.shape == (4, 24)
    assert torch.allclose(h[:, -8:], output[:, -1])  # the top layer's final state comes last
    assert torch.allclose(h.reshape(4, 3, 8), state.transpose(0, 1))
    assert model(x).shape == (4, 6)


def test_gru_seq2seq_decoder_feeds_back_its_predictions():
    model = GRUSeq2Seq((12, 2), 4, hidden=8, layers=2)
    h = model.features(torch.randn(3, 12, 2))
    # unroll by hand: GO = 0, then each prediction is the next input
    state = h.reshape(3, 2, 8).transpose(0, 1).contiguous()
    step, expected = torch.zeros(3, 1, 1), []
    for _ in range(4):
        out, state = model.decoder(step, state)
        step = model.classifier(out)
        expected.append(step[:, 0, 0])
    assert torch.allclose(model.head(h), torch.stack(expected, dim=1))
    with pytest.raises(ValueError, match="steps, features"):
        GRUSeq2Seq((12,), 12)


# ------------------------------------------------------------------------------------------ RNNForecaster
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_rnn_forecaster_reads_the_horizon_out_of_the_last_state(cell):
    model = build_model("rnn", (12, 2), 12, cell=cell)
    x = torch.randn(5, 12, 2)
    output, _ = model.recurrent(x)
    assert model.recurrent.hidden_size == 64 and model.feature_dim == 64
    assert torch.allclose(model.features(x), output[:, -1])
    assert torch.allclose(model(x), model.classifier(output[:, -1])) and model(x).shape == (5, 12)
    assert not model.features(x[:, :6]).equal(model.features(x)), "every input step is read"


def test_rnn_forecaster_rejects_bad_shapes_and_cells():
    with pytest.raises(ValueError, match="steps, features"):
        RNNForecaster((12,), 12)
    with pytest.raises(ValueError, match="cell must be one of"):
        RNNForecaster((12, 2), 12, cell="transformer")


def test_every_model_names_its_classifier():
    shapes = {"char_lstm": (80,), "gru_seq2seq": (12, 2), "rnn": (12, 2), "vgae": (6,)}
    for name in MODELS:
        model = build_model(name, shapes.get(name, (1, 28, 28)), 10)
        assert isinstance(model.classifier, nn.Linear)
