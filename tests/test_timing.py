"""gflkit.timing: a round's local training and aggregation, timed apart."""
import pytest

from gflkit import timing
from gflkit.papers import sfl
from gflkit.profiles import resolve_profile
from gflkit.timing import time_each_round, time_interleaved, time_rounds
from gflkit.runtime import Runtime


def test_time_rounds_measures_training_and_aggregation_with_the_configs_own_options():
    params = resolve_profile(sfl.PROFILES, "smoke", overrides={"num_clients": 4})
    timed = time_rounds(sfl.variant_config(params, "sfl", 0, method_options={"layers": 5}), Runtime(device="cpu"), rounds=1)
    assert set(timed) == {"training_s", "aggregation_s"}
    assert timed["training_s"] > 0 and timed["aggregation_s"] > 0


def test_time_rounds_is_the_median_of_each_timed_round(monkeypatch):
    measured = [{"training_s": 3.0, "aggregation_s": 0.1}, {"training_s": 1.0, "aggregation_s": 0.3},
                {"training_s": 2.0, "aggregation_s": 0.2}]
    monkeypatch.setattr(timing, "time_each_round", lambda config, runtime, rounds: measured[:rounds])
    assert time_rounds("config", rounds=3) == {"training_s": 2.0, "aggregation_s": 0.2}
    params = resolve_profile(sfl.PROFILES, "smoke", overrides={"num_clients": 4})
    monkeypatch.undo()
    rounds = time_each_round(sfl.variant_config(params, "fedavg", 0), Runtime(device="cpu"), rounds=2)
    assert len(rounds) == 2 and all(r["training_s"] > 0 and r["aggregation_s"] > 0 for r in rounds)


def test_time_interleaved_passes_over_every_config_and_takes_each_ones_median(monkeypatch):
    calls = []
    slow_second_pass = {("a", 2): 10.0}  # the machine slowed down during pass 2: a's outlier, not a's time

    def fake_time_rounds(config, runtime, rounds):
        calls.append(config)
        seconds = slow_second_pass.get((config, calls.count(config)), {"a": 1.0, "b": 2.0}[config] * calls.count(config))
        return {"training_s": seconds, "aggregation_s": 0.5}

    monkeypatch.setattr(timing, "time_rounds", fake_time_rounds)
    timed = time_interleaved(["a", "b"], rounds=2, passes=3)
    assert calls == ["a", "b", "b", "a", "a", "b"], "every config once per pass, each pass starting one later"
    assert timed == [{"training_s": 3.0, "aggregation_s": 0.5}, {"training_s": 4.0, "aggregation_s": 0.5}]
    assert time_interleaved(iter(["b"]), passes=1) == [{"training_s": 8.0, "aggregation_s": 0.5}], "any iterable"


@pytest.mark.parametrize("name, value", [("passes", 0), ("passes", -1), ("passes", 1.5), ("passes", True),
                                         ("rounds", 0)])
def test_time_interleaved_refuses_a_bad_number_of_passes_or_rounds(name, value):
    with pytest.raises(ValueError, match=f"{name} must be a positive integer"):
        time_interleaved(["a"], **{name: value})
