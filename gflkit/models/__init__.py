"""Client models. Every model is a :class:`FeatureModel`: ``forward(x) = head(features(x))``.

``vgae`` takes graphs (:class:`torch_geometric.data.Data`) as inputs; the others take tensors of samples.
"""
from __future__ import annotations

from typing import Any

from gflkit.models.base import FeatureModel
from gflkit.models.cnn import LeafCelebACNN, McMahanCNN, SimpleCNN
from gflkit.models.fedcg import FedCGNet
from gflkit.models.lstm import CharLSTM
from gflkit.models.mclr import MCLR, MCLRReLU
from gflkit.models.mobilenet import MobileNetV2
from gflkit.models.resnet9 import ResNet9
from gflkit.models.rnn import RNNForecaster
from gflkit.models.seq2seq import GRUSeq2Seq
from gflkit.models.vgae import VGAE

MODELS: dict[str, type[FeatureModel]] = {
    "mclr": MCLR,
    "mclr_relu": MCLRReLU,
    "mcmahan_cnn": McMahanCNN,
    "simple_cnn": SimpleCNN,
    "leaf_celeba_cnn": LeafCelebACNN,
    "fedcg": FedCGNet,
    "mobilenet_v2": MobileNetV2,
    "resnet9": ResNet9,
    "char_lstm": CharLSTM,
    "gru_seq2seq": GRUSeq2Seq,
    "rnn": RNNForecaster,
    "vgae": VGAE,
}


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, **options: Any) -> FeatureModel:
    """Instantiate the registered model ``name`` for inputs of ``input_shape`` and ``num_classes`` classes."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    return MODELS[name](tuple(input_shape), num_classes, **options)


__all__ = [
    "FeatureModel", "MCLR", "MCLRReLU", "McMahanCNN", "SimpleCNN", "LeafCelebACNN", "FedCGNet", "MobileNetV2", "ResNet9", "CharLSTM", "GRUSeq2Seq", "RNNForecaster", "VGAE", "MODELS",
    "build_model",
]
