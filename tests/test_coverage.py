"""The claims' intervals keep their 95 % coverage: simulated two-level data with a known true difference."""
import numpy as np
import pytest

from gflkit.papers.coverage import coverage, coverage_table, percentile_bootstrap_coverage, simulate

DRAWS = 2000  # per (seeds, clients) cell: a coverage of 95 % is measured to ± 0.5 % (one standard error)


def test_two_level_intervals_cover_the_truth_95_percent_of_the_time():
    # a seed effect (sd 0.3) plus a client effect (sd 3) around a true difference of 1 point: with one seed the
    # interval claims the seed's own difference, from two seeds the difference a rerun averages to
    table = coverage_table(seeds=(1, 2, 3, 5), clients=(10, 20, 100), draws=DRAWS)
    assert len(table) == 12 and (table["draws"] == DRAWS).all()
    assert table["covered"].between(0.93, 0.97).all(), table


def test_coverage_holds_when_seeds_vary_more_than_clients():
    for seeds in (3, 5):
        assert 0.93 <= coverage(seeds, 20, DRAWS, seed_sd=2.0, client_sd=1.0, rng_seed=1)["covered"] <= 0.97


def test_one_seed_does_not_cover_what_a_rerun_changes():
    # the reason for several seeds: with 100 clients the one-seed interval is narrow, and the seed effect
    # (sd 0.3, as large as its half width) moves the truth out of it far more often than 5 % of the time
    result = coverage(1, 100, DRAWS)
    assert result["covered"] >= 0.93 and result["covered_delta"] < 0.88


def test_several_seeds_keep_coverage_on_skewed_clients_where_one_seed_on_ten_clients_cannot():
    # a long tail of low clients (a centred exponential, as JGESR's clients at 0 %)
    skewed = coverage_table(seeds=(3, 5), clients=(10, 100), draws=DRAWS, client_effect="skewed")
    assert skewed["covered"].between(0.93, 0.97).all(), skewed
    # one seed on 10 skewed clients measured about 91 % when written (docs/results/interval_coverage.csv): a floor, not a target
    assert coverage(1, 10, DRAWS, client_effect="skewed")["covered"] > 0.88


def test_students_t_replaces_a_percentile_bootstrap_that_is_too_narrow_on_few_clients():
    bootstrap = percentile_bootstrap_coverage(10, 1000)
    t_interval = coverage(1, 10, 1000, seed_sd=0.0)["covered"]
    assert bootstrap < 0.92 < t_interval


def test_simulation_is_seeded_and_checks_its_parameters():
    first, effects = simulate(3, 10, 5, rng_seed=4)
    again, _ = simulate(3, 10, 5, rng_seed=4)
    assert first.shape == (5, 3, 10) and effects.shape == (5, 3) and np.array_equal(first, again)
    with pytest.raises(ValueError, match="clients must be an integer ≥ 2"):
        simulate(3, 1, 5)
    with pytest.raises(ValueError, match="client_effect must be 'normal' or 'skewed'"):
        simulate(3, 10, 5, client_effect="uniform")
    with pytest.raises(ValueError, match="seed_sd must be ≥ 0"):
        simulate(3, 10, 5, seed_sd=-1.0)


def test_the_weighted_one_seed_interval_keeps_its_coverage_with_unequal_test_sizes():
    from gflkit.papers.comparison import PairedScores

    rng = np.random.default_rng(7)
    covered = 0
    for _ in range(DRAWS):
        sizes = rng.integers(20, 400, 20).astype(float)
        differences = 1.0 + rng.normal(0.0, 3.0, 20)  # each client's difference, truth 1 for every weighting
        d = PairedScores(differences, np.zeros(20), np.zeros(20, dtype=int), sizes).difference()
        covered += d.low <= 1.0 <= d.high
    assert 0.93 <= covered / DRAWS <= 0.97


RULE_DRAWS = 2000  # per cell: a one-sided error of 2.5 % is measured to ± 0.35 % (one standard error)


def test_the_rule_keeps_its_one_sided_errors_at_2_5_percent_under_lopsided_seed_effects():
    """Grids of four equally good methods on 3, 5 and 8 seeds, seed effects normal, skewed (a long tail of bad
    seeds) and contaminated (a bad seed 6 sd away in 1 of 5 seeds, 12 sd away in 1 of 10) in every method or
    in one method only."""
    from gflkit.papers.coverage import DEFAULT_EFFECTS, rule_error_table

    table = rule_error_table(seeds=(3, 5, 8), draws=RULE_DRAWS)
    assert len(table) == 3 * len(DEFAULT_EFFECTS) == 18 and (table["draws"] == RULE_DRAWS).all()
    assert (table["false_above"] <= 0.025).all() and (table["false_below"] <= 0.025).all(), table
    assert (table["covered"] >= 0.95).all()
    # the plain Student t over seeds is what fails where one method breaks on some seeds: the seeds that missed
    # the bad draw look tight, and a false verdict comes several times as often as 2.5 %
    one_method = table[table["seed effects"].str.startswith("one method")]
    assert (one_method[["plain t false above", "plain t false below"]].max(axis=1) > 0.05).all(), one_method


def test_the_rule_keeps_its_one_sided_errors_under_the_committed_grids_own_seed_effects():
    from pathlib import Path

    from gflkit.papers.coverage import committed_grids, committed_seed_residuals, rule_error_table

    residuals = committed_seed_residuals(committed_grids(Path(__file__).resolve().parents[1] / "docs" / "results"))
    assert len(residuals) > 1000 and abs(residuals.mean()) < 1e-9
    table = rule_error_table(seeds=(3, 5, 8), draws=RULE_DRAWS, effects={"committed": {"seed_effect": residuals}})
    assert (table["false_above"] <= 0.025).all() and (table["false_below"] <= 0.025).all(), table


def test_rule_errors_checks_its_parameters():
    from gflkit.papers.coverage import rule_errors

    with pytest.raises(ValueError, match="needs seeds ≥ 3 and methods ≥ 2"):
        rule_errors(2, 10)
    with pytest.raises(ValueError, match="seed_effect must be"):
        rule_errors(3, 10, seed_effect="heavy")


def test_the_committed_rule_error_table_is_the_simulations_and_keeps_the_rule_within_2_5_percent():
    """docs/results/rule_errors.csv (shown on the noise-model page) is what ``python -m gflkit.papers.coverage``
    writes: one row is recomputed here, and every row keeps both one-sided errors at or below 2.5 %."""
    from pathlib import Path

    import pandas as pd

    from gflkit.papers.coverage import DEFAULT_EFFECTS, rule_errors

    table = pd.read_csv(Path(__file__).resolve().parents[1] / "docs" / "results" / "rule_errors.csv")
    assert list(table["seed effects"].unique()) == [*DEFAULT_EFFECTS, "committed grids, resampled"]
    assert (table["draws"] == 4000).all() and set(table["seeds"]) == {3, 5, 8}
    assert (table[["false_above", "false_below"]] <= 0.025).all().all()
    row = table[(table["seed effects"] == "one method: 1 bad seed in 10, 12 sd away") & (table["seeds"] == 5)].iloc[0]
    again = rule_errors(5, 4000, **DEFAULT_EFFECTS["one method: 1 bad seed in 10, 12 sd away"])
    assert (round(again["false_below"], 4), round(again["mean_width"], 4)) == (row["false_below"], row["mean_width"])
