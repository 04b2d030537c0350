"""The model, data-loader, task and partition defaults every stored run was computed with (taken 2026-11-27;
the partitions' defaults, 2026-11-29, have not changed since the partitions were written).

A run's stored key (:meth:`gflkit.experiment.RunConfig.to_dict`) holds the options its config names, plus every
default of its model, data loader, task and partition that is **not** the value listed here: a changed default (MCLR's
``hidden`` 64 → 32) therefore re-keys every run it shapes, while the runs stored before keep their keys. An option
added later is listed here with the value that reproduces the earlier runs (the behaviour before it existed);
one left out enters every key of its model, loader, task or partition, which ``tests/test_store_keys.py`` reports.
Never edit a value here to follow a changed default: that would serve stored results the new code does not give.
"""
from __future__ import annotations

from typing import Any

EARLIER_MODEL_DEFAULTS: dict[str, dict[str, Any]] = {
    "char_lstm": {"embed_dim": 8, "hidden": 256, "layers": 2},
    "fedcg": {"base": "leaf_celeba_cnn", "base_options": None, "num_domains": 4, "layers": "last", "gcn_layers": 1,
              "reduction": 1, "projection": True, "activation": "relu", "residual": True, "lambda_init": 1.0,
              "test_domains": "soft", "student_weight": 0.1, "adjacency_init": "eye", "beta": 0.5,
              "pseudo_labels": "centred", "domains": "classifier"},
    "gru_seq2seq": {"hidden": 64, "layers": 2},
    "leaf_celeba_cnn": {"channels": 32, "blocks": 4},
    "mclr": {"hidden": 64},
    "mclr_relu": {"hidden": 64},
    "mcmahan_cnn": {"hidden": 512},
    "mobilenet_v2": {"width": 1.0},
    "resnet9": {"scale": 0.2},
    "rnn": {"hidden": 64, "cell": "rnn"},
    "simple_cnn": {"hidden": 120},
    "vgae": {"hidden": 32, "out": 16, "readout_hidden": None, "readout_from": "mu", "kl_weight": "per_node"},
}

EARLIER_TASK_DEFAULTS: dict[str, dict[str, Any]] = {
    "classification": {},
    "forecasting": {"mean": 0.0, "std": 1.0, "horizon_index": -1},
    "link_prediction": {"reconstruction": "dense"},
    "node_classification": {},
}

_TRAFFIC = {"stride": 1, "max_windows": None}
_GRAPH = {"normalize_features": False}
EARLIER_DATA_DEFAULTS: dict[str, dict[str, Any]] = {
    "celeba": {"images": "auto", "scale": "leaf", "resample": "bicubic", "domain_channel": ()},
    "cifar10": {},
    "cifar100": {},
    "citeseer": _GRAPH,
    "cora": _GRAPH,
    "cora_full": _GRAPH,
    "digits": {},
    "femnist": {},
    "flickr": _GRAPH,
    "metr_la": _TRAFFIC,
    "mnist": {"normalize": True, "raw": False},
    "pems_bay": _TRAFFIC,
    "pemsd4": _TRAFFIC,
    "pemsd8": _TRAFFIC,
    "polblogs": {**_GRAPH, "largest_component": True},
    "pubmed": _GRAPH,
    "shakespeare": {"source": "tff", "stride": 80, "seq_length": 80},
}

_SUBGRAPHS = {"train_ratio": 0.2, "val_ratio": 0.4, "link_val_ratio": 0.05, "link_test_ratio": 0.10}
EARLIER_PARTITION_DEFAULTS: dict[str, dict[str, Any]] = {
    "dirichlet": {"min_size": 10, "max_tries": 1000},
    "iid": {},
    "louvain": _SUBGRAPHS,
    "metis": _SUBGRAPHS,
    "natural": {},
    "shards": {},
    "shards_overlapping": {},
}
