"""The shared noise model of the claims: differences, their 95 % intervals, verdicts, and pairs from records."""
import numpy as np
import pandas as pd
import pytest

from gflkit.papers import Verdict
from gflkit.papers.comparison import (Difference, Scoring, at_least, best_other, best_other_per_group,
                                      against_every_candidate, client_difference, compare, compare_per_group,
                                      compare_with_best_other,
                                      difference_noise, every, held_out_difference, on_shared_seeds, seed_difference,
                                      spread_within,
                                      tied_best, uneven_seeds)


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


def test_one_seed_model_is_students_t_over_the_clients_paired_differences():
    # d = 0, 1, 5: mean 2, sd √7 = 2.645751, se = sd/√3 = 1.527525, t(0.975, 2 df) = 4.302653 → ± 6.572411
    difference = client_difference([80.0, 71.0, 65.0], [80.0, 70.0, 60.0])
    assert difference.estimate == pytest.approx(2.0)
    assert (difference.low, difference.high) == pytest.approx((2 - 6.572411, 2 + 6.572411), abs=1e-6)
    assert difference.n == 3
    assert difference.model == ("Student t over 3 clients of one seed, unweighted mean: client sampling only, "
                                "not a rerun")


def test_one_seed_model_weights_clients_by_test_size():
    # weights 1, 1, 2: estimate (0 + 1 + 10) / 4 = 2.75; residuals (w / w̄)(d − 2.75) = −2.0625, −1.3125, 3.375,
    # se² = Σ r² / (3·2) = 2.894531 → se = 1.701332, half width 4.302653 · se = 7.320242
    difference = client_difference([80.0, 71.0, 65.0], [80.0, 70.0, 60.0], weights=[1, 1, 2])
    assert difference.estimate == pytest.approx(2.75)
    assert (difference.low, difference.high) == pytest.approx((2.75 - 7.320242, 2.75 + 7.320242), abs=1e-5)
    assert "weighted by test size" in difference.model
    with pytest.raises(ValueError, match="one positive test size per client"):
        client_difference([1.0, 2.0], [0.0, 0.0], weights=[1, 0])
    with pytest.raises(ValueError, match="at least two clients"):
        client_difference([1.0], [0.0])


def test_the_client_model_is_paired_a_constant_gain_over_spread_clients_is_decided():
    # every client gains exactly one point: the paired interval is [1, 1]; an unpaired comparison of two
    # samples spread from 50 to 90 would call it noise
    difference = client_difference([51.0, 71.0, 91.0], [50.0, 70.0, 90.0])
    assert (difference.low, difference.high) == pytest.approx((1.0, 1.0))
    assert difference.verdict is Verdict.REPRODUCED


def test_a_three_hundredths_difference_over_100_realistic_clients_is_inconclusive():
    first, second = spread_clients(0.03)
    difference = client_difference(first, second)
    assert difference.low < 0 < difference.high and difference.high - difference.low > 0.3
    assert difference.verdict is Verdict.INCONCLUSIVE


def test_a_clear_difference_is_decided_both_ways():
    better, worse = spread_clients(3.0)
    assert client_difference(better, worse).verdict is Verdict.REPRODUCED
    assert client_difference(worse, better).verdict is Verdict.NOT_REPRODUCED


def test_a_stricter_level_widens_the_interval_and_says_so():
    first, second = spread_clients(0.5)
    plain, strict = client_difference(first, second), client_difference(first, second, level=0.99)
    assert strict.estimate == plain.estimate and strict.low < plain.low and strict.high > plain.high
    assert "99.00 % interval" in strict.model and "%" not in plain.model
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        client_difference(first, second, level=1.0)


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
    assert difference.verdict is Verdict.INCONCLUSIVE
    assert difference.model == "per-image standard error, 366 test images of one seed: test-image sampling only, not a rerun"
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
    difference = Difference(estimate=0.45, low=-0.12, high=1.02, model="Student t over 3 seeds", n=3)
    assert difference.describe() == "+0.45 [−0.12, +1.02] (Student t over 3 seeds)"
    assert Difference(-1e-12, -0.004, 0.0, "m", 1).interval_text == "[−0.004, +0.00]"  # the side shown


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
    assert difference == client_difference(first, second)


def test_compare_uses_the_seed_model_from_two_seeds():
    records = records_of({"a": [91.0, 93.0, 92.0, 94.0], "b": [90.0] * 4}, seeds=(0, 1))
    # per-seed client means 92, 93 against 90: t over 2 seeds (1 degree of freedom), wide but honest
    assert compare(records, "a", "b") == seed_difference([92.0, 93.0], [90.0, 90.0])
    assert compare(records, "a", "b").model == "Student t over 2 seeds of the client mean"


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


def test_a_grid_with_incomplete_later_seeds_is_compared_on_the_seeds_both_sides_ran():
    # "a" ran seeds 0 and 1, "b" seed 0 only, "c" seeds 0 and 1: a vs b is a one-seed comparison, a vs c a two-seed one
    records = pd.concat([records_of({"a": [91.0, 93.0, 95.0, 97.0], "c": [90.0] * 4}, seeds=(0, 1)),
                         records_of({"b": [90.0, 90.0]})])
    with pytest.raises(ValueError, match="same \\(seed, client\\) pairs"):
        compare(records, "a", "b")  # the extra seed is refused, never silently paired
    shared = on_shared_seeds(records, ["a", "b"])
    assert sorted(shared["seed"].unique()) == [0] and set(shared["method"]) == {"a", "b"}
    assert compare(shared, "a", "b") == client_difference([91.0, 93.0], [90.0, 90.0])
    assert compare(on_shared_seeds(records, ["a", "c"]), "a", "c").model.startswith("Student t over 2 seeds")
    assert sorted(on_shared_seeds(records, ["a", "b", "c"])["seed"].unique()) == [0]


def test_a_ranking_claim_judges_each_candidate_on_the_seeds_it_shares_with_the_method():
    # a and b ran seeds 0-2, c seed 0 only: a vs b is a three-seed comparison, a vs c a one-seed one
    records = seed_records({"a": [95.0, 96.0, 97.0], "b": [90.0, 92.0, 91.0], "c": [90.0, 0.0, 0.0]})
    records = records[(records["method"] != "c") | (records["seed"] == 0)]
    records.loc[(records["method"] == "c"), "accuracy"] += np.array([0.5, -0.5, 1.0, -1.0])
    plain = {other: compare(on_shared_seeds(records, ["a", other]), "a", other) for other in ("b", "c")}
    assert plain["b"].model.startswith("Student t over 3 seeds")
    assert plain["c"].model.startswith("Student t over 4 clients of one seed")
    assert plain["b"].verdict is plain["c"].verdict is Verdict.REPRODUCED
    # one claim, one kind of interval: c's one-seed interval covers client sampling, not a rerun, so beside
    # b's seed-level comparison it decides nothing, and the claim says which candidate lacks seeds
    other, difference = compare_with_best_other(records, "a")
    assert other == "c" and difference.verdict is Verdict.INCONCLUSIVE
    assert difference.short_of == "c has 1 seed (a verdict over reruns needs 3)"
    assert difference.interval_text == "undecided: c has 1 seed (a verdict over reruns needs 3)"
    # with c over the same three seeds the claim is decided
    complete = seed_records({"a": [95.0, 96.0, 97.0], "b": [90.0, 92.0, 91.0], "c": [90.0, 91.0, 92.5]})
    assert compare_with_best_other(complete, "a")[1].verdict is Verdict.REPRODUCED
    assert uneven_seeds(records) == "3 seeds: a, b; 1 seed: c"
    assert uneven_seeds(records[records["method"] != "c"]) == ""


def test_of_the_candidates_that_beat_the_method_the_one_compared_over_the_most_seeds_is_named():
    # b (three seeds) and c (one seed, far above on tight clients) both beat a at the Bonferroni level; c's
    # one-seed interval is the clearer, but b's comparison is the one that covers a rerun
    records = seed_records({"a": [90.0, 90.5, 91.0], "b": [95.0, 95.4, 96.1], "c": [99.0, 0.0, 0.0]})
    records = records[(records["method"] != "c") | (records["seed"] == 0)]
    records.loc[(records["method"] == "c"), "accuracy"] += np.array([0.1, -0.1, 0.1, -0.1])
    level = 1.0 - 0.05 / 2
    plain = {other: compare(on_shared_seeds(records, ["a", other]), "a", other, level=level) for other in ("b", "c")}
    assert plain["b"].verdict is plain["c"].verdict is Verdict.NOT_REPRODUCED and plain["c"].high < plain["b"].high
    other, difference = compare_with_best_other(records, "a")
    assert other == "b" and difference.verdict is Verdict.NOT_REPRODUCED
    assert difference.model.startswith("Student t over 3 seeds") and difference.high == plain["b"].high
    # with one seed each, the clearest is named as before
    one_seed = records[records["seed"] == 0]
    assert compare_with_best_other(one_seed, "a")[0] == "c"


def test_sides_that_share_no_seed_or_never_ran_are_named():
    records = pd.concat([records_of({"a": [91.0, 93.0]}), records_of({"b": [90.0, 90.0]}, seeds=(1,))])
    with pytest.raises(ValueError, match=r"share no seed: a ran \[0\]; b ran \[1\]"):
        on_shared_seeds(records, ["a", "b"])
    with pytest.raises(ValueError, match=r"no records with method = \['z'\]"):
        on_shared_seeds(records, ["a", "z"])


def seed_records(per_seed: dict[str, list[float]], clients: int = 4) -> pd.DataFrame:
    """Records whose method ``m`` scores ``per_seed[m][s]`` on every client of seed ``s`` (exact per-seed means)."""
    seeds = tuple(range(len(next(iter(per_seed.values())))))
    return records_of({m: [v for v in values for _ in range(clients)] for m, values in per_seed.items()}, seeds=seeds)


def test_best_other_reports_ties_to_the_tables_rounding_and_no_list_order():
    scores = pd.Series({"fedska": 97.45, "fedu": 97.9012, "sfl": 97.8988, "ditto": 97.84})
    assert best_other(scores, "fedska") == ("fedu", "sfl")
    assert best_other(scores, "fedska", ["ditto", "fedu"]) == ("fedu",)
    assert tied_best(pd.Series({"a": 1.0, "b": 2.0})) == ("b",)
    with pytest.raises(ValueError, match=r"no score for \['moon'\]"):
        best_other(scores, "fedska", ["moon"])


def test_best_of_many_is_reproduced_only_when_it_beats_every_candidate():
    records = seed_records({"x": [93.0, 94.0, 95.0], "a": [90.0, 90.5, 91.0], "b": [91.0, 91.7, 92.1]})
    other, difference = compare_with_best_other(records, "x")
    # x − b = 2.0, 2.3, 2.9 is the tighter of the two: the claim's difference is it, at the plain 95 % level
    assert other == "b" and difference == compare(records, "x", "b")
    assert difference.verdict is Verdict.REPRODUCED and "Bonferroni" not in difference.model
    worse = seed_records({"x": [93.0, 94.0, 95.0], "a": [90.0, 90.5, 91.0], "b": [93.0, 95.0, 94.0]})
    assert compare_with_best_other(worse, "x")[1].verdict is Verdict.INCONCLUSIVE


def test_not_the_best_is_decided_only_after_correcting_for_the_choice_among_candidates():
    # x − best = −1.0, −1.5, −2.0: decided below 0 at 95 % (t over 3 seeds: [−2.74, −0.26]), but the best
    # competitor was picked from 7 candidates: at the Bonferroni level 1 − 0.05/7 the interval reaches above 0
    candidates = {f"c{i}": [80.0, 80.0, 80.0] for i in range(6)}
    records = seed_records({"x": [90.0, 90.0, 90.0], "best": [91.0, 91.5, 92.0], **candidates})
    assert compare(records, "x", "best").verdict is Verdict.NOT_REPRODUCED
    other, difference = compare_with_best_other(records, "x")
    assert other == "best" and difference.verdict is Verdict.INCONCLUSIVE
    assert difference.low < compare(records, "x", "best").low
    assert difference.model.endswith("99.29 % interval; Bonferroni over 7 candidates")
    # against one named competitor there is nothing to correct: decided
    assert compare_with_best_other(records, "x", ["best"])[1].verdict is Verdict.NOT_REPRODUCED
    # a gap beyond the corrected interval is decided even so
    clear = seed_records({"x": [90.0, 90.0, 90.0], "best": [95.0, 95.2, 95.4], **candidates})
    assert compare_with_best_other(clear, "x")[1].verdict is Verdict.NOT_REPRODUCED


def test_tied_competitors_are_named_together():
    records = seed_records({"x": [90.0, 90.0, 90.0], "fedu": [95.0, 95.2, 95.4], "sfl": [95.0, 95.2, 95.4]})
    other, difference = compare_with_best_other(records, "x")
    assert other == "fedu = sfl" and difference.verdict is Verdict.NOT_REPRODUCED


def test_per_setting_helpers_compare_within_each_group_and_name_the_best_other():
    better, worse = spread_clients(3.0, clients=30)
    at_2 = records_of({"fedska": list(better), "sfl": list(worse), "fedavg": list(worse - 5)}).assign(q=2)
    at_10 = records_of({"fedska": list(worse), "sfl": list(worse - 5), "fedavg": list(better)}).assign(q=10)
    records = pd.concat([at_10, at_2])
    pairwise = compare_per_group(records, "q", "fedska", "sfl")
    assert list(pairwise) == ["q=2", "q=10"] and pairwise["q=2"] == compare(at_2, "fedska", "sfl")
    ranking = best_other_per_group(records, "q", "fedska")
    assert list(ranking) == ["q=2 vs sfl", "q=10 vs fedavg"]  # q=2: the tightest; q=10: the one decided above
    assert [d.verdict for d in ranking.values()] == [Verdict.REPRODUCED, Verdict.NOT_REPRODUCED]
    assert every(ranking).verdict is Verdict.NOT_REPRODUCED


def fixed(plain: dict, corrected: dict):
    """A ``compare_with`` whose differences are given: ``(low, high)`` per candidate at 95 % and corrected."""
    def compare_with(candidate, level):
        low, high = (plain if level == 0.95 else corrected)[candidate]
        return Difference((low + high) / 2, low, high, "m", 3)
    return compare_with


def test_the_claims_verdict_never_depends_on_which_of_two_rounded_ties_comes_first():
    # corrected highs +0.004 (a) and −0.004 (b) round alike, but b decides against: not reproduced
    label, difference = against_every_candidate(fixed({"a": (-1, 0.002), "b": (-1, -0.006)},
                                                      {"a": (-2, 0.004), "b": (-2, -0.004)}), ["a", "b"])
    assert difference.verdict is Verdict.NOT_REPRODUCED and label == "b"
    # a is beaten at 95 % (low +0.004) but b is not (−0.001): inconclusive, whatever the order
    for order in (["a", "b"], ["b", "a"]):
        label, difference = against_every_candidate(fixed({"a": (0.004, 2), "b": (-0.001, 2)},
                                                          {"a": (0.001, 3), "b": (-0.5, 3)}), order)
        assert difference.verdict is Verdict.INCONCLUSIVE and label == "b"
    # reproduced: the tightest candidate, ties to two decimals named together
    label, difference = against_every_candidate(fixed({"a": (0.5012, 2), "b": (0.4988, 2), "c": (1.0, 2)}, {}),
                                                ["a", "b", "c"])
    assert difference.verdict is Verdict.REPRODUCED and label == "a = b" and difference.low == 0.4988


def test_a_bound_next_to_the_threshold_is_printed_with_its_side():
    assert Difference(-0.43, -0.86, 0.0028, "m", 3).interval_text == "[−0.86, +0.003]"
    assert Difference(-0.43, -0.86, -0.0028, "m", 3).interval_text == "[−0.86, −0.003]"
    assert Difference(0.0, 0.0, 0.0, "m", 3).interval_text == "[+0.00, +0.00]"
    assert Difference(1.0, 0.4961, 2.0, "m", 3).exceeding(0.5).interval_text == "[+0.496, +2.00]"


def test_spread_within_compares_the_highest_mean_side_with_the_lowest():
    base = np.linspace(60, 90, 20)
    tight = records_of({"k5": list(base), "k30": list(base + 0.3), "k80": list(base + 0.6)})
    high, low, difference = spread_within(tight, 2.0)
    assert (high, low) == ("k80", "k5") and difference.estimate == pytest.approx(0.6)
    assert difference.verdict is Verdict.REPRODUCED
    wide = records_of({"k5": list(base), "k80": list(base + 4.0)})
    assert spread_within(wide, 2.0)[2].verdict is Verdict.NOT_REPRODUCED
    assert spread_within(records_of({"k5": list(base)}), 2.0) is None


def test_a_comparison_over_seeds_takes_the_larger_of_its_own_spread_and_its_grids_pooled_one():
    from scipy import stats

    from gflkit.papers.comparison import SeedSpread, pool_seed_spread, pooled_seed_spread

    # a − b moves by 1 point over seeds, c has one bad seed: the grid's pooled spread is far above a − b's own
    records = seed_records({"a": [91.0, 92.0, 93.0], "b": [90.0, 90.0, 90.0], "c": [90.0, 78.0, 90.0]})
    pairs = {"a−b": [1.0, 2.0, 3.0], "a−c": [1.0, 14.0, 3.0], "b−c": [0.0, 12.0, 0.0]}
    squares = sum(((np.array(d) - np.mean(d)) ** 2).sum() for d in pairs.values())
    pooled = pool_seed_spread(list(pairs.values()))
    assert pooled == SeedSpread(pytest.approx(np.sqrt(squares / 6)), 3, 6)
    assert pooled_seed_spread(records) == pooled
    difference = compare(records, "a", "b")
    half = stats.t.ppf(0.975, 2) * pooled.sd / np.sqrt(3)
    assert (difference.low, difference.high) == pytest.approx((2.0 - half, 2.0 + half))
    assert difference.verdict is Verdict.INCONCLUSIVE  # its own spread alone: [−0.48, +4.48] → also open
    assert difference.model == ("Student t over 3 seeds of the client mean, seed spread at least its grid's pooled "
                                "one (3 pairs)")
    # the comparison that saw the bad seed keeps its own, larger spread
    a_c = compare(records, "a", "c")
    own = np.std(pairs["a−c"], ddof=1)
    assert own > pooled.sd and a_c.high - a_c.estimate == pytest.approx(stats.t.ppf(0.975, 2) * own / np.sqrt(3))
    # a two-sided grid pools nothing beyond its own pair
    assert compare(records[records["method"] != "c"], "a", "b") == seed_difference([91.0, 92.0, 93.0], [90.0] * 3)


def test_two_seeds_give_an_interval_that_decides_nothing():
    records = seed_records({"a": [99.0, 99.5], "b": [50.0, 50.2]})
    difference = compare(records, "a", "b")
    assert difference.low > 0 and difference.decision is Verdict.INCONCLUSIVE is difference.verdict
    assert difference.short_of == "2 seeds (a verdict over reruns needs 3)"


def test_a_claim_never_mixes_a_one_seed_interval_with_seed_level_ones():
    over_seeds = seed_difference([95.0, 96.0, 97.0], [90.0, 90.5, 91.0])
    one_seed = client_difference([95.0, 96.0, 97.0, 95.0], [90.0, 90.0, 90.0, 90.0])
    assert over_seeds.verdict is one_seed.verdict is Verdict.REPRODUCED
    claim = every({"q=2": over_seeds, "q=5": one_seed})
    assert claim.verdict is Verdict.INCONCLUSIVE
    assert dict(claim.parts)["q=5"].short_of == "1 seed (a verdict over reruns needs 3)"
    # a claim that is one-seed throughout keeps its (labelled) client-sampling verdict
    assert every({"q=2": one_seed, "q=5": one_seed}).verdict is Verdict.REPRODUCED


def test_compare_shared_names_the_side_a_rerun_grid_lacks_seeds_of():
    from gflkit.papers.comparison import compare_shared

    records = seed_records({"a": [95.0, 96.0, 97.0], "b": [90.0, 90.0, 90.0]})
    records = records[(records["method"] == "a") | (records["seed"] == 0)]
    records.loc[records["method"] == "b", "accuracy"] += np.array([0.5, -0.5, 1.0, -1.0])
    difference = compare_shared(records, "a", "b")
    assert difference.model.startswith("Student t over 4 clients of one seed")
    assert difference.verdict is Verdict.INCONCLUSIVE
    assert difference.short_of == "b has 1 seed (a verdict over reruns needs 3)"
    # where every side ran one seed, the client interval decides (client sampling only)
    assert compare_shared(records[records["seed"] == 0], "a", "b").verdict is Verdict.REPRODUCED


def test_identical_runs_are_labelled_as_such_not_counted_as_evidence():
    records = seed_records({"k=30": [90.0, 91.0, 92.0], "k=70": [90.0, 91.0, 92.0], "k=5": [88.0, 89.1, 89.9]})
    same = compare(records, "k=70", "k=30").within(2.0)
    assert same.identical and same.decision is Verdict.REPRODUCED and same.verdict is Verdict.TRIVIAL
    assert same.interval_text == "identical runs"
    assert every({"q=5": same}).verdict is Verdict.TRIVIAL
    # beside a part that rests on evidence, the identical part counts by its difference and the claim is decided
    different = compare(records, "k=30", "k=5").exceeding(0.0)
    assert not different.identical and different.verdict is Verdict.REPRODUCED
    assert every({"a": same, "b": different}).verdict is Verdict.REPRODUCED
    # one client apart by more than the scores' fourth decimal: not identical
    moved = records.copy()
    moved.loc[(moved["method"] == "k=70") & (moved["client"] == 0) & (moved["seed"] == 0), "accuracy"] += 1e-3
    assert not compare(moved, "k=70", "k=30").identical


def test_an_inconclusive_ranking_names_the_candidates_undecided_for_want_of_seeds():
    records = seed_records({"a": [95.0, 90.0, 96.0], "b": [94.0, 93.0, 96.5], "c": [99.0, 0.0, 0.0]})
    records = records[(records["method"] != "c") | (records["seed"] == 0)]
    records.loc[(records["method"] == "c"), "accuracy"] += np.array([0.1, -0.1, 0.1, -0.1])
    other, difference = compare_with_best_other(records, "a")
    assert other == "b; undecided: c" and difference.verdict is Verdict.INCONCLUSIVE and not difference.short_of
