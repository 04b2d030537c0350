import json

import pandas as pd

from gflkit.results import ResultStore, atomic_write_text, config_key


def test_config_key_is_order_independent_and_sensitive_to_values():
    assert config_key({"a": 1, "b": [1, 2]}) == config_key({"b": [1, 2], "a": 1})
    assert config_key({"a": 1}) != config_key({"a": 2})
    assert len(config_key({"a": 1})) == 16


def test_store_round_trip_and_missing_runs(tmp_path):
    store = ResultStore(tmp_path)
    config = {"method": "fedavg", "seed": 0}
    assert store.load(config) is None
    records = pd.DataFrame({"round": [1, 1], "client": [0, 1], "accuracy": [50.0, 75.5]})
    store.checkpoint(config).path.parent.mkdir(parents=True)
    store.checkpoint(config).path.write_bytes(b"partial")
    store.save(config, records)
    pd.testing.assert_frame_equal(store.load(config), records)
    assert json.loads((store.folder(config) / "config.json").read_text()) == config
    assert not store.checkpoint(config).exists(), "a finished run drops its checkpoint"


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    target = tmp_path / "sub" / "file.txt"
    atomic_write_text(target, "hello")
    atomic_write_text(target, "world")
    assert target.read_text() == "world"
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]


def test_artifacts_are_stored_beside_the_records(tmp_path):
    import pytest
    import torch

    store = ResultStore(tmp_path)
    config = {"method": "fedska", "seed": 1}
    with pytest.raises(FileNotFoundError, match="no finished run"):
        store.load_artifacts(config)
    store.save(config, pd.DataFrame({"round": [1]}), {"adjacency": torch.eye(3)})
    assert torch.equal(store.load_artifacts(config)["adjacency"], torch.eye(3))
    store.save({"method": "fedavg"}, pd.DataFrame({"round": [1]}))
    assert store.load_artifacts({"method": "fedavg"}) == {}
