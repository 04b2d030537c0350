"""The flower notebook's paper module: the tables it publishes from both engines' records and timings."""
import pandas as pd
import pytest

from gflkit.papers import flower


def _records(method="sfl", seed=0, rounds=(1, 2), clients=3, evaluate="local"):
    """Engine records of one run: one row per evaluated round and client, both protocols' scores."""
    return pd.DataFrame([{"method": method, "seed": seed, "round": r, "client": c, "evaluate": evaluate,
                          "accuracy": 80.0 + r + c, "accuracy_server": 70.0 + r + c, "num_samples": 10}
                         for r in rounds for c in range(clients)])


def test_timing_rows_are_seconds_per_round_and_the_table_adds_their_ratio():
    from gflkit.profiles import resolve_profile

    config = resolve_profile(flower.PROFILES, "smoke").config(method="sfl", seed=0)
    row = flower.timing_row(config, engine_seconds=2.0 * config.rounds, flower_seconds=6.0 * config.rounds)
    assert row == {"method": "sfl", "seed": 0, "rounds": config.rounds, "gflkit engine s/round": 2.0,
                   "Flower simulation s/round": 6.0}
    timing = flower.timing_table([row])
    assert list(timing.columns) == [*row, "ratio"] and timing["ratio"].item() == 3.0


def test_both_engines_stack_the_runs_engine_first():
    records = flower.both_engines([_records(seed=0), _records(seed=1)], [_records(seed=0), _records(seed=1)])
    assert list(records["engine"].unique()) == ["gflkit", "flower"] and list(records.index) == list(range(24))
    assert (records.groupby("engine").size() == 12).all()


def test_derive_returns_every_file_of_the_notebook():
    records = flower.both_engines([_records()], [_records()])
    row = {"method": "sfl", "seed": 0, "rounds": 2, "gflkit engine s/round": 1.0, "Flower simulation s/round": 2.0}
    tables = flower.derive(records, [row])
    assert list(tables) == ["records.csv", "table.csv", "protocols.csv", "timing.csv"]
    assert tables["records.csv"] is records
    table = tables["table.csv"]
    assert list(table[["method", "engine"]].itertuples(index=False, name=None)) == [("sfl", "flower"), ("sfl", "gflkit")]
    assert table["mean"].tolist() == pytest.approx([83.0, 83.0]), "the last round's mean over the clients"
    protocols = tables["protocols.csv"]
    assert protocols["local"].tolist() == pytest.approx([83.0, 83.0])
    assert protocols["server"].tolist() == pytest.approx([73.0, 73.0])
    assert tables["timing.csv"]["ratio"].item() == 2.0
