"""gflkit.timing: a round's local training and aggregation, timed apart."""
from gflkit.papers import sfl
from gflkit.profiles import resolve_profile
from gflkit.timing import time_rounds


def test_time_rounds_measures_training_and_aggregation_with_the_configs_own_options():
    params = resolve_profile(sfl.PROFILES, "smoke", overrides={"num_clients": 4})
    timed = time_rounds(sfl.variant_config(params, "sfl", 0, method_options={"layers": 5}), device="cpu", rounds=1)
    assert set(timed) == {"training_s", "aggregation_s"}
    assert timed["training_s"] > 0 and timed["aggregation_s"] > 0
