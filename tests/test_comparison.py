"""The shared noise model of the claims: differences, their 95 % intervals, verdicts, and pairs from records."""
import numpy as np
import pandas as pd
import pytest

from gflkit.papers import Verdict
from gflkit.papers.comparison import (Difference, Scoring, at_least, best_other, best_other_per_group,
                                      bootstrap_difference, compare, compare_per_group, compare_with_best_other,
                                      difference_noise, every, held_out_difference, seed_difference)


def records_of(scores: dict[str, list[float]], seeds=(0,), num_samples=None, last_round=5) -> pd.DataFrame:
    """Tidy final-round records: ``scores[method][i]`` is client ``i % K`` of seed ``seeds[i // K]``."""
    rows = []
    for method, values in scores.items():
        clients = len(values) // len(seeds)
        for i, value in enumerate(values):
            rows.append({"method": method, "seed": seeds[i // clients], "client": i % clients, "round": last_round,
                         "accuracy": value, "num_samples": 10 if num_samples is None else num_samples[i]})
    return pd.DataFrame(rows)


def spread_clients(shift: float, clients: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Realistic per-client accuracies (mean 90, spread 5 points over clients) of two methods whose per-client
    differences scatter by 2 points around ``shift``."""
    rng = np.random.default_rng(seed)
    second = rng.normal(90.0, 5.0, clients)
    return second + shift + rng.normal(0.0, 2.0, clients), second


def test_paired_bootstrap_on_three_clients_matches_the_27_equally_likely_resamples():
    # per-client differences 0, 1, 5: each of the 3^3 = 27 resamples is equally likely; (0, 0, 0) alone
    # has probability 1/27 = 3.7 % > 2.5 %, so the 2.5 % percentile of the resampled means is 0, and
    # likewise (5, 5, 5) puts the 97.5 % percentile at 5; the estimate is (0 + 1 + 5) / 3 = 2
    difference = bootstrap_difference([80.0, 71.0, 65.0], [80.0, 70.0, 60.0])
    assert difference.estimate == pytest.approx(2.0)
    assert (difference.low, difference.high) == (0.0, 5.0)
    assert difference.n == 3 and difference.model == "paired bootstrap over 3 clients, unweighted mean"


def test_paired_bootstrap_weights_clients_by_test_size():
    # weights 1, 1, 2: (0·1 + 1·1 + 5·2) / 4 = 2.75; the extreme resamples stay 0 and 5
    difference = bootstrap_difference([80.0, 71.0, 65.0], [80.0, 70.0, 60.0], weights=[1, 1, 2])
    assert difference.estimate == pytest.approx(2.75)
    assert (difference.low, difference.high) == (0.0, 5.0)
    assert "weighted by test size" in difference.model


def test_the_bootstrap_is_paired_a_constant_gain_over_spread_clients_is_decided():
    # every client gains exactly one point: the paired interval is [1, 1]; an unpaired comparison of two
    # samples spread from 50 to 90 would call it noise
    difference = bootstrap_difference([51.0, 71.0, 91.0], [50.0, 70.0, 90.0])
    assert (difference.low, difference.high) == pytest.approx((1.0, 1.0))
    assert difference.verdict is Verdict.REPRODUCED


def test_a_three_hundredths_difference_over_100_realistic_clients_is_inconclusive():
    first, second = spread_clients(0.03)
    difference = bootstrap_difference(first, second)
    assert difference.low < 0 < difference.high and difference.high - difference.low > 0.3
    assert difference.verdict is Verdict.INCONCLUSIVE


def test_a_clear_difference_is_decided_both_ways():
    better, worse = spread_clients(3.0)
    assert bootstrap_difference(better, worse).verdict is Verdict.REPRODUCED
    assert bootstrap_difference(worse, better).verdict is Verdict.NOT_REPRODUCED


def test_the_bootstrap_is_seeded():
    first, second = spread_clients(0.5)
    same = bootstrap_difference(first, second, seed=3), bootstrap_difference(first, second, seed=3)
    assert same[0] == same[1]
    other = bootstrap_difference(first, second, seed=4)
    assert other.estimate == same[0].estimate and (other.low, other.high) != (same[0].low, same[0].high)


def test_seed_model_is_students_t_on_the_paired_per_seed_differences():
    # d = 1, 2, 3: mean 2, sd 1, t(0.975, 2 df) = 4.302653 → 2 ± 4.302653 / √3 = 2 ± 2.484138
    difference = seed_difference([91.0, 92.0, 93.0], [90.0, 90.0, 90.0])
    assert difference.estimate == pytest.approx(2.0)
    assert (difference.low, difference.high) == pytest.approx((2 - 2.484138, 2 + 2.484138), abs=1e-6)
    assert difference.model == "Student t over 3 seeds of the client mean" and difference.n == 3
    assert difference.verdict is Verdict.INCONCLUSIVE


def test_standard_error_model_on_held_out_images():
    # p = 0.58 on 366 images: se = 100·√(2·0.58·0.42/366) = 3.6484 points; ± 1.959964·se = ± 7.1508
    assert difference_noise(58.0, 366) == pytest.approx(3.6484, abs=1e-4)
    difference = held_out_difference(60.0, 56.0, 366)
    assert difference.estimate == pytest.approx(4.0)
    assert (difference.low, difference.high) == pytest.approx((4 - 7.1508, 4 + 7.1508), abs=1e-3)
    assert difference.verdict is Verdict.INCONCLUSIVE and difference.model == "per-image standard error, 366 test images"
    assert held_out_difference(70.0, 56.0, 366).verdict is Verdict.REPRODUCED


def test_margins_and_within_claims():
    difference = Difference(estimate=3.0, low=2.5, high=3.5, model="m", n=10)
    assert difference.verdict is Verdict.REPRODUCED
    assert difference.exceeding(2.0).verdict is Verdict.REPRODUCED
    assert difference.exceeding(3.0).verdict is Verdict.INCONCLUSIVE
    assert difference.exceeding(4.0).verdict is Verdict.NOT_REPRODUCED
    assert difference.within(4.0).verdict is Verdict.REPRODUCED
    assert difference.within(3.0).verdict is Verdict.INCONCLUSIVE
    assert difference.within(1.0).verdict is Verdict.NOT_REPRODUCED
    # no difference at all, measured exactly: "first beats second" is not reproduced
    assert Difference(0.0, 0.0, 0.0, "m", 10).verdict is Verdict.NOT_REPRODUCED


def test_describe_gives_the_estimate_interval_and_model():
    difference = Difference(estimate=0.45, low=-0.12, high=1.02, model="paired bootstrap over 100 clients", n=100)
    assert difference.describe() == "+0.45 [−0.12, +1.02] (paired bootstrap over 100 clients)"
    assert Difference(-1e-12, -0.004, 0.0, "m", 1).interval_text == "[+0.00, +0.00]"


def test_a_claim_over_several_settings():
    yes, no, unsure = (Difference(1.0, 0.5, 1.5, "m", 9), Difference(-1.0, -1.5, -0.5, "m", 9),
                       Difference(0.0, -0.5, 0.5, "m", 9))
    assert every({"q=2": yes, "q=5": yes}).verdict is Verdict.REPRODUCED
    assert every({"q=2": yes, "q=5": unsure}).verdict is Verdict.INCONCLUSIVE
    assert every({"q=2": unsure, "q=5": no}).verdict is Verdict.NOT_REPRODUCED
    assert at_least(2, {"a": yes, "b": yes, "c": no}).verdict is Verdict.REPRODUCED
    assert at_least(2, {"a": yes, "b": unsure, "c": no}).verdict is Verdict.INCONCLUSIVE
    assert at_least(2, {"a": yes, "b": no, "c": no}).verdict is Verdict.NOT_REPRODUCED
    assert every({"q=2": yes}).parts == (("q=2", yes),)


def test_compare_pairs_records_on_seed_and_client_at_the_reported_round():
    first, second = spread_clients(3.0, clients=20)
    records = records_of({"a": list(first), "b": list(second)})
    earlier = records.assign(round=1, accuracy=0.0)  # an earlier round must not enter
    shuffled = pd.concat([records, earlier]).sample(frac=1.0, random_state=0)  # nor the rows' order matter
    difference = compare(shuffled, "a", "b")
    assert difference == bootstrap_difference(first, second)


def test_compare_uses_the_seed_model_from_three_seeds():
    records = records_of({"a": [91.0, 93.0, 92.0, 94.0, 93.0, 95.0], "b": [90.0] * 6}, seeds=(0, 1, 2))
    # per-seed client means 92, 93, 94 against 90: the differences 2, 3, 4
    assert compare(records, "a", "b") == seed_difference([92.0, 93.0, 94.0], [90.0, 90.0, 90.0])


def test_compare_weighted_by_test_size():
    records = records_of({"a": [80.0, 71.0, 65.0], "b": [80.0, 70.0, 60.0]}, num_samples=[1, 1, 2] * 2)
    assert compare(records, "a", "b", Scoring(weighted=True)).estimate == pytest.approx(2.75)
    assert compare(records, "a", "b").estimate == pytest.approx(2.0)


def test_mismatched_pairs_are_refused():
    records = records_of({"a": [80.0, 70.0, 60.0], "b": [80.0, 70.0, 60.0]})
    with pytest.raises(ValueError, match=r"same \(seed, client\) pairs; 1 pair\(s\) scored for one side only"):
        compare(records.drop(index=0), "a", "b")
    with pytest.raises(ValueError, match="no records with method = 'c'"):
        compare(records, "a", "c")
    with pytest.raises(ValueError, match=r"several rows per \(method, seed, client\)"):
        compare(pd.concat([records.assign(q=2), records.assign(q=5)]), "a", "b")
    different_sizes = records.assign(num_samples=[10, 10, 10, 10, 10, 20])
    with pytest.raises(ValueError, match="different test sizes"):
        compare(different_sizes, "a", "b", Scoring(weighted=True))


def test_ranking_compares_with_the_best_other_method():
    best, runner_up = spread_clients(1.0, clients=50)
    records = records_of({"fedska": list(best), "sfl": list(runner_up), "fedavg": list(runner_up - 10)})
    assert best_other(pd.Series({"fedska": 3.0, "sfl": 2.0, "fedavg": 1.0}), "fedska") == "sfl"
    assert best_other(pd.Series({"fedska": 3.0, "sfl": 2.0, "fedavg": 1.0}), "fedska", ["fedavg"]) == "fedavg"
    other, difference = compare_with_best_other(records, "fedska")
    assert other == "sfl" and difference == compare(records, "fedska", "sfl")
    assert compare_with_best_other(records, "fedavg")[1].verdict is Verdict.NOT_REPRODUCED
    with pytest.raises(ValueError, match=r"no score for \['ditto'\]"):
        compare_with_best_other(records, "fedska", ["sfl", "ditto"])


def test_per_setting_helpers_compare_within_each_group_and_name_the_best_other():
    better, worse = spread_clients(3.0, clients=30)
    at_2 = records_of({"fedska": list(better), "sfl": list(worse), "fedavg": list(worse - 5)}).assign(q=2)
    at_10 = records_of({"fedska": list(worse), "sfl": list(worse - 5), "fedavg": list(better)}).assign(q=10)
    records = pd.concat([at_10, at_2])
    pairwise = compare_per_group(records, "q", "fedska", "sfl")
    assert list(pairwise) == ["q=2", "q=10"] and pairwise["q=2"] == compare(at_2, "fedska", "sfl")
    ranking = best_other_per_group(records, "q", "fedska")
    assert list(ranking) == ["q=2 vs sfl", "q=10 vs fedavg"]
    assert [d.verdict for d in ranking.values()] == [Verdict.REPRODUCED, Verdict.NOT_REPRODUCED]
    assert every(ranking).verdict is Verdict.NOT_REPRODUCED
