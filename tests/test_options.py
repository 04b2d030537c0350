"""Options added after runs were stored stay out of the store key while they reproduce those runs, and a
changed default always re-keys (gflkit/options.py)."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from gflkit.algorithms import ALGORITHMS
from gflkit.algorithms.fedavg import FedAvg
from gflkit.experiment import RunConfig, partition_defaults, stored_key
from gflkit.models import MODELS, MCLR
from gflkit.options import added_field, added_fields, keyed
from gflkit.results import config_key


@dataclass(frozen=True)
class Before:
    lam: float = 0.1


@dataclass(frozen=True)
class After:  # the same options after a release added `beta`, whose 0.0 is what every earlier run did
    lam: float = 0.1
    beta: float = added_field(0.0)


@dataclass(frozen=True)
class NewDefault:  # a later release made beta = 1.0 the default: the numbers change, so must the key
    lam: float = 0.1
    beta: float = added_field(1.0, earlier=0.0)


def toy_method(params_type: type) -> type:
    return type("Toy", (FedAvg,), {"name": "toy", "Params": params_type})


def key_with(monkeypatch, params_type: type, **options) -> str:
    monkeypatch.setitem(ALGORITHMS, "toy", toy_method(params_type))
    return config_key(RunConfig(dataset="digits", method="toy", method_options=options).to_dict())


def test_keyed_leaves_out_an_added_field_only_at_its_earlier_value():
    assert added_fields(After) == {"beta": 0.0} and added_fields(NewDefault) == {"beta": 0.0}
    assert keyed(After()) == {"lam": 0.1} == keyed(Before())
    assert keyed(After(beta=0.5)) == {"lam": 0.1, "beta": 0.5}
    assert keyed(NewDefault()) == {"lam": 0.1, "beta": 1.0}


def test_adding_a_method_option_keeps_every_stored_key(monkeypatch):
    before = key_with(monkeypatch, Before)
    assert key_with(monkeypatch, After) == before, "the new option at the earlier behaviour: same stored run"
    assert key_with(monkeypatch, After, beta=0.0) == before, "written out or not, one run"
    assert key_with(monkeypatch, After, beta=0.5) != before
    assert key_with(monkeypatch, NewDefault) != before, "a default that changes the numbers re-keys"
    assert key_with(monkeypatch, NewDefault, beta=0.0) == before
    monkeypatch.setitem(ALGORITHMS, "toy", toy_method(After))
    config = RunConfig(dataset="digits", method="toy")
    assert config.method_options == {"lam": 0.1, "beta": 0.0}, "the config itself still lists every option"


def test_added_runconfig_fields_and_channel_options_follow_the_same_rule():
    plain = RunConfig(dataset="digits")
    assert {"test_split", "nesterov", "lr_schedule"} <= set(added_fields(RunConfig))
    assert not {"test_split", "nesterov", "lr_schedule"} & set(plain.to_dict())
    assert plain.to_dict()["channel"] == plain.channel, "the channel's options are all original: all keyed"
    assert RunConfig(**plain.to_dict()) == plain


def test_an_added_field_refuses_a_mutable_default():
    with pytest.raises(TypeError, match="immutable"):
        added_field([])


class ToyModel(MCLR):
    """MCLR as it was: hidden 64."""


def toy_key(monkeypatch, model: type, earlier: dict | None = None, **options) -> str:
    from gflkit import experiment

    monkeypatch.setitem(MODELS, "toy_model", model)
    monkeypatch.setitem(experiment.EARLIER_MODEL_DEFAULTS, "toy_model", earlier or {"hidden": 64})
    return config_key(RunConfig(dataset="digits", model="toy_model", model_options=options).to_dict())


def test_a_changed_model_default_re_keys_the_runs_it_shapes(monkeypatch):
    """The issue's case: MCLR's hidden 64 → 32 kept the key and served the old numbers."""
    before = toy_key(monkeypatch, ToyModel)
    smaller = type("Smaller", (MCLR,), {"__init__": lambda self, input_shape, num_classes, hidden=32:
                                        MCLR.__init__(self, input_shape, num_classes, hidden=hidden)})
    assert toy_key(monkeypatch, smaller) != before, "the new default shapes the run: a new key"
    assert toy_key(monkeypatch, ToyModel, hidden=64) != before, "an option written out stays in the key, as before"
    assert toy_key(monkeypatch, smaller, hidden=64) == toy_key(monkeypatch, ToyModel, hidden=64), \
        "the same network asked for explicitly: one key whatever the default"


def test_an_added_model_option_keeps_the_keys_once_its_earlier_value_is_declared(monkeypatch):
    before = toy_key(monkeypatch, ToyModel)
    wider = type("Wider", (MCLR,), {"__init__": lambda self, input_shape, num_classes, hidden=64, bias=True:
                                    MCLR.__init__(self, input_shape, num_classes, hidden=hidden)})
    assert toy_key(monkeypatch, wider, {"hidden": 64, "bias": True}) == before
    assert toy_key(monkeypatch, wider) != before, "undeclared, it enters every key (and the pins report it)"


def test_every_model_task_and_loader_option_has_its_earlier_value_declared():
    """An option added without its earlier value would re-key every run of its model, task or dataset."""
    from gflkit.data import dataset_names
    from gflkit.defaults import EARLIER_DATA_DEFAULTS, EARLIER_MODEL_DEFAULTS, EARLIER_TASK_DEFAULTS
    from gflkit.experiment import data_defaults, model_defaults, task_defaults
    from gflkit.tasks import TASKS

    undeclared = [(kind, name, sorted(set(current(name)) - set(earlier.get(name, {}))))
                  for kind, names, current, earlier in [
                      ("model", MODELS, model_defaults, EARLIER_MODEL_DEFAULTS),
                      ("task", TASKS, task_defaults, EARLIER_TASK_DEFAULTS),
                      ("dataset", dataset_names(), data_defaults, EARLIER_DATA_DEFAULTS)]
                  for name in names]
    assert [entry for entry in undeclared if entry[2]] == [], "declare these in gflkit/defaults.py"


def test_a_changed_partition_default_re_keys_the_runs_it_shapes(monkeypatch):
    """Dirichlet's min_size 10 → 100 kept the key and served 44.96 where a fresh run gives 26.25."""
    import gflkit.data.partition as partition

    config = RunConfig(dataset="digits", partition="dirichlet", partition_options={"alpha": 0.5})
    before = config_key(stored_key(config, "cpu"))
    monkeypatch.setattr(partition.dirichlet, "__defaults__", (100, 1000))
    assert config_key(stored_key(config, "cpu")) != before
    written_out = config.replace(partition_options={"alpha": 0.5, "min_size": 100})
    assert config_key(stored_key(config, "cpu")) == config_key(stored_key(written_out, "cpu"))


def test_a_changed_subgraph_split_default_re_keys_the_runs_it_shapes(monkeypatch):
    import gflkit.experiment as experiment

    config = experiment.RunConfig(dataset="cora", task="link_prediction", model="vgae", partition="louvain",
                                  method="fedvgae")
    before = config_key(experiment.stored_key(config, "cpu"))
    original = experiment.make_subgraph_clients
    monkeypatch.setattr(experiment, "make_subgraph_clients",
                        lambda data, num_clients=10, method="louvain", seed=0, *, train_ratio=0.3, val_ratio=0.4,
                        links=True, link_val_ratio=0.05, link_test_ratio=0.10: original(data, num_clients))
    assert experiment.stored_key(config, "cpu")["partition_options"] == {"train_ratio": 0.3}
    assert config_key(experiment.stored_key(config, "cpu")) != before


def test_every_partition_option_has_its_earlier_value_declared():
    from gflkit.data.partition import SCHEMES, scheme_defaults
    from gflkit.data.subgraphs import PARTITIONERS
    from gflkit.defaults import EARLIER_PARTITION_DEFAULTS

    graph = RunConfig(dataset="cora", task="link_prediction", model="vgae", method="fedvgae", partition="louvain")
    current = {**{scheme: scheme_defaults(scheme) for scheme in SCHEMES},
               **{name: partition_defaults(graph.replace(partition=name)) for name in PARTITIONERS}}
    assert {name: set(found) - set(EARLIER_PARTITION_DEFAULTS.get(name, {})) for name, found in current.items()} == \
        dict.fromkeys(current, set()), "declare these in gflkit/defaults.py"
