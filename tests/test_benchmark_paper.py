"""The benchmark notebook's paper module: methods from the papers' modules, settings, protocols, grids."""
import pytest

from gflkit.papers import benchmark, fedska, jgesr
from gflkit.profiles import resolve_profile


def test_every_run_is_labelled_with_its_method_and_setting():
    params = resolve_profile(benchmark.PROFILES, "paper1")
    runs = benchmark.grids(params)["benchmark"]
    expected = [(m, s) for s in benchmark.SETTINGS for m in benchmark.METHODS]
    assert [(run.labels["variant"], run.labels["setting"]) for run in runs] == expected
    assert all(run.config.method == benchmark.METHODS[run.labels["variant"]][0] for run in runs)
    noisy = next(run.config for run in runs if run.labels["setting"].startswith("noisy"))
    clean = next(run.config for run in runs if run.labels["setting"] == "shards q=5")
    assert noisy.channel["noise_scale"] == 0.1 and clean.channel["noise_scale"] == 0.0
    assert noisy.partition_options == clean.partition_options == {"shards_per_client": 5}


def test_options_come_from_the_publishing_papers_modules():
    params = resolve_profile(benchmark.PROFILES, "paper1")
    config = lambda label: benchmark.method_config(params, label, "shards q=2", 0)
    assert config("fedu").method_options["lam"] == fedska.PROFILES["paper1"].method_options["fedu"]["lam"] == 0.1
    assert config("cfl").method_options["min_rounds"] == jgesr.cfl_options(200)["cfl"]["min_rounds"]
    star = config("sfl_star").method_options
    assert (star["graph"], star["smoothing"]) == ("learned", "given"), "SFL* as its authors ran it"
    assert config("sfl").method_options["graph"] != "learned", "SFL aggregates over the given graph"
    assert "fedcg" not in benchmark.METHODS, "FedCG needs its own network"


def test_protocols_are_each_methods_own_papers_and_baselines_exclude_the_papers_own_methods():
    assert benchmark.PROTOCOL["fedska"] == benchmark.PROTOCOL["ditto"] == "local"  # FedSKA's notebook
    assert benchmark.PROTOCOL["sfl"] == benchmark.PROTOCOL["pdca"] == benchmark.PROTOCOL["fedavg"] == "server"
    assert set(benchmark.METHODS) == set(benchmark.SOURCE) == set(benchmark.PROTOCOL)
    assert not set(benchmark.BASELINES) & {"fedska", "sfl", "sfl_star", "pdca", "two_step"}
    assert {m for members in benchmark.FAMILIES.values() for m in members} == set(benchmark.METHODS)


def test_ci_runs_three_methods_per_family_and_bad_entries_fail_clearly():
    ci = resolve_profile(benchmark.PROFILES, "ci")
    assert len(ci.sweep["variants"]) == sum(min(3, len(m)) for m in benchmark.FAMILIES.values())
    bad = resolve_profile(benchmark.PROFILES, "smoke", overrides={"variants": ["fedavg", "fedcg"]})
    with pytest.raises(ValueError, match=r"unknown method\(s\) \['fedcg'\]"):
        benchmark.grids(bad)
    bad = resolve_profile(benchmark.PROFILES, "smoke", overrides={"settings": ["iid"]})
    with pytest.raises(ValueError, match=r"unknown setting\(s\) \['iid'\]"):
        benchmark.grids(bad)


def test_runs_carry_their_own_protocol_and_share_keys_with_their_source_papers_runs():
    from gflkit.papers.fedska import shards_config
    from gflkit.results import config_key

    params = resolve_profile(benchmark.PROFILES, "paper1")
    runs = benchmark.grids(params)["benchmark"]
    assert all(run.config.evaluate == benchmark.PROTOCOL[run.labels["variant"]] for run in runs)
    fedska_params = resolve_profile(fedska.PROFILES, "paper1")
    for label in ("fedska", "ditto", "fedavg", "fedu"):
        ours = benchmark.method_config(params, label, "shards q=5", 0)
        theirs = shards_config(fedska_params, label, 5, 0)
        assert config_key(ours.to_dict()) == config_key(theirs.to_dict()), label


def test_a_perturbed_twin_is_no_independent_block():
    settings = list(benchmark.SETTINGS)
    blocks = benchmark.independent_settings(settings)
    assert "noisy uplink s=0.1, q=5" not in blocks and len(blocks) == len(settings) - 1
    # without the setting it perturbs, the twin is the only reading of its partition and counts
    alone = ["shards q=2", "noisy uplink s=0.1, q=5"]
    assert benchmark.independent_settings(alone) == alone
    assert all(original in benchmark.SETTINGS for original in benchmark.TWINS.values())


def test_rank_readings_count_the_twin_once_and_say_what_each_reading_separates():
    import numpy as np
    import pandas as pd

    methods = [f"m{i}" for i in range(6)]
    rows = {s: np.arange(6, 0, -1, dtype=float) + 0.01 * i for i, s in enumerate(benchmark.SETTINGS)}
    scores = pd.DataFrame(rows, index=methods).T  # settings × methods, m0 always best
    readings = benchmark.rank_readings(scores).set_index("reading")
    assert readings.loc["twins counted too", "settings"] == 6 and readings.loc["independent blocks", "settings"] == 5
    assert readings.loc["independent blocks", "critical difference"] > readings.loc["twins counted too",
                                                                                    "critical difference"]
    assert readings.loc["twins counted too", "pairs separated"] >= readings.loc["independent blocks", "pairs separated"]


def test_headline_comparisons_decide_against_every_baseline_that_ran():
    import pandas as pd

    rows = []
    for variant, level in (("fedska", 90.0), ("ditto", 95.0), ("fedavg", 80.0)):
        for client in range(10):
            rows.append({"variant": variant, "setting": "shards q=2", "seed": 0, "client": client, "round": 200,
                         "accuracy_own": level + (client % 3)})
    table = benchmark.headline_comparisons(pd.DataFrame(rows), ["fedska", "ditto", "fedavg"])
    assert len(table) == 1
    row = table.iloc[0]
    assert row["deciding baseline"] == "ditto" and row["verdict (beats every baseline)"] == "not reproduced"
    assert "Bonferroni over 2 candidates" in row["noise model"]


def test_own_protocol_records_score_each_method_under_its_papers_protocol():
    import pandas as pd

    records = pd.DataFrame({"variant": ["fedska", "pdca"], "evaluate": ["local", "server"], "accuracy": [91.0, 80.0],
                            "accuracy_server": [88.0, float("nan")], "accuracy_local": [float("nan"), 85.0]})
    assert benchmark.PROTOCOL["fedska"] == "local" and benchmark.PROTOCOL["pdca"] == "server"
    scored = benchmark.own_protocol_records(records)
    assert scored["accuracy_own"].tolist() == [91.0, 80.0], "each row's own protocol, whichever it was run under"
    assert scored["accuracy_server"].tolist() == [88.0, 80.0] and scored["accuracy_local"].tolist() == [91.0, 85.0]
    assert scored["method"].tolist() == ["fedska", "pdca"]


def test_stored_clients_read_only_the_runs_a_store_holds_and_append_to_committed_rows(tmp_path):
    from gflkit.executors import run_grid
    from gflkit.papers import append_seeds
    from gflkit.results import ResultStore
    from gflkit.runtime import Runtime

    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    with pytest.raises(ValueError, match=r"no smoke run of seeds \[1\] is stored"):
        benchmark.stored_clients("smoke", [1], runtime)
    params = resolve_profile(benchmark.PROFILES, "smoke", seeds=[0, 1])
    runs = [benchmark.method_run(params, "fedavg", "shards q=2", seed) for seed in (0, 1)]
    run_grid(runs, runtime)
    rows = benchmark.stored_clients("smoke", [1], runtime)
    assert list(rows.columns) == benchmark.CLIENT_COLUMNS
    assert set(rows["seed"]) == {1} and set(rows["variant"]) == {"fedavg"} and set(rows["setting"]) == {"shards q=2"}
    assert rows["client"].nunique() == params.base["num_clients"] and (rows["round"] == params.base["rounds"]).all()
    committed = benchmark.stored_clients("smoke", [0, 1], runtime, variants=["fedavg"], settings=["shards q=2"])
    both = append_seeds(committed[committed["seed"] == 0], rows, benchmark.CLIENT_KEYS)
    assert both.equals(committed.reset_index(drop=True)), "seed 0 committed + seed 1 later = the grid of both"


EARLIER = {"benchmark_paper1": [], "benchmark_paper": ["benchmark_paper1"]}


@pytest.mark.parametrize("folder", sorted(EARLIER))
def test_decide_from_clients_gives_the_committed_headline_table(folder):
    """The committed tables of each paper-budget folder are the module's decision on its clients.csv and those
    of the folders it continues (``benchmark_paper``: seeds 1–2 of the runs whose seed 0 ``benchmark_paper1``
    holds)."""
    from pathlib import Path

    import pandas as pd

    results = Path(__file__).parent.parent / "docs" / "results"
    earlier = [results / name for name in EARLIER[folder]]
    decided = benchmark.decide_from_clients(results / folder, earlier)
    committed = pd.read_csv(results / folder / "headline_vs_best_baseline.csv")
    pd.testing.assert_frame_equal(decided.astype(str), committed.astype(str))
    if earlier:  # a folder of later seeds commits their table over seeds too
        seeds = benchmark.seed_table(benchmark.committed_clients([*earlier, results / folder]))
        committed_seeds = pd.read_csv(results / folder / benchmark.DERIVED_FILES["seeds"], index_col=0)
        pd.testing.assert_frame_equal(seeds, committed_seeds, check_names=False)
        clients = benchmark.committed_clients([*earlier, results / folder])
        readings = pd.read_csv(results / folder / benchmark.DERIVED_FILES["rank_readings"], keep_default_na=False)
        pd.testing.assert_frame_equal(benchmark.seed_rank_readings(clients).astype(str), readings.astype(str))
        ranks = pd.read_csv(results / folder / benchmark.DERIVED_FILES["average_ranks"], index_col=0)
        pd.testing.assert_frame_equal(benchmark.seed_average_ranks(clients), ranks, check_names=False)
    clients = benchmark.folder_clients(results / folder)
    assert list(clients.columns) == benchmark.CLIENT_COLUMNS and not clients.duplicated(benchmark.CLIENT_KEYS).any()


def test_the_paper_folder_holds_only_the_later_seeds_at_four_decimals_one_small_file_each():
    from pathlib import Path

    results = Path(__file__).parent.parent / "docs" / "results"
    one_seed = benchmark.folder_clients(results / "benchmark_paper1")
    later = benchmark.folder_clients(results / "benchmark_paper")
    assert set(one_seed["seed"]) == {0} and set(later["seed"]) == {1, 2}
    scores = later[benchmark.SCORE_COLUMNS]
    assert (scores.round(benchmark.SCORE_DECIMALS) == scores).all().all()
    files = sorted(path.name for path in (results / "benchmark_paper").glob(benchmark.CLIENT_FILE_PATTERN))
    assert files == ["clients_seed1.csv", "clients_seed2.csv"]
    for name in files:
        assert (results / "benchmark_paper" / name).stat().st_size < 1 << 20, "a summary, not a store"


def test_seed_table_shows_mean_and_spread_over_seeds_and_their_number():
    import pandas as pd

    rows = [{"variant": v, "setting": "shards q=2", "seed": seed, "client": c, "round": 4,
             "accuracy_own": level + seed + c, "num_samples": 10}
            for v, level, seeds in (("fedavg", 80.0, (0, 1, 2)), ("fedska", 90.0, (0,))) for seed in seeds
            for c in range(2)]
    table = benchmark.seed_table(pd.DataFrame(rows))
    assert table.loc["fedavg", "shards q=2"] == "81.50 ± 1.00 (3 seeds)"
    assert table.loc["fedska", "shards q=2"] == "90.50 (1 seed)"
    assert list(table.index) == ["fedavg", "fedska"], "rows in the benchmark's method order"


def test_seed_0_of_the_three_seed_profile_is_the_one_seed_profiles_run():
    from gflkit.experiment import stored_key
    from gflkit.results import config_key

    one, three = benchmark.PROFILES["paper1"], benchmark.PROFILES["paper"]
    assert three.seeds == (0, 1, 2)
    for method in benchmark.METHODS:
        for setting in benchmark.SETTINGS:
            keys = {config_key(stored_key(benchmark.method_config(p, method, setting, 0), "cpu")) for p in (one, three)}
            assert len(keys) == 1, (method, setting)


def test_append_to_folder_adds_the_later_seeds_and_rewrites_what_derives_from_them(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)

    def rows(seeds):
        return pd.DataFrame([{"variant": v, "setting": "shards q=2", "seed": seed, "client": c, "round": 200,
                              "accuracy_own": level + rng.normal(), "accuracy_server": 0.0, "accuracy_local": 0.0,
                              "num_samples": 10}
                             for v, level in (("fedska", 90.0), ("ditto", 95.0)) for seed in seeds for c in range(8)])

    seed_0 = rows([0])
    seed_0.to_csv(tmp_path / "clients.csv", index=False)
    later = rows([1, 2])
    headline = benchmark.append_to_folder(tmp_path, later)
    assert sorted(path.name for path in tmp_path.glob("clients*.csv")) == [
        "clients_seed0.csv", "clients_seed1.csv", "clients_seed2.csv"], "one file per seed replaces clients.csv"
    clients = benchmark.folder_clients(tmp_path)
    assert clients.groupby("variant")["seed"].nunique().to_dict() == {"ditto": 3, "fedska": 3}
    pd.testing.assert_frame_equal(benchmark.decide_from_clients(tmp_path), headline)
    assert headline["noise model"].item().startswith("Student t over 3 seeds")
    table = pd.read_csv(tmp_path / benchmark.DERIVED_FILES["seeds"], index_col=0)
    assert table.loc["fedska", "shards q=2"].endswith("(3 seeds)")
    with pytest.raises(ValueError, match="differs"):  # a seed rerun must give the rows committed for it
        benchmark.append_to_folder(tmp_path, later.assign(accuracy_own=later["accuracy_own"] + 1.0))
    pd.testing.assert_frame_equal(benchmark.folder_clients(tmp_path), clients)


def test_a_folder_that_continues_another_writes_only_its_own_seeds(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(1)
    rows = pd.DataFrame([{"variant": v, "setting": "shards q=2", "seed": seed, "client": c, "round": 200,
                          "accuracy_own": level + rng.normal(), "accuracy_server": 0.0, "accuracy_local": 0.0,
                          "num_samples": 10}
                         for v, level in (("fedska", 90.0), ("ditto", 95.0)) for seed in (0, 1, 2) for c in range(8)])
    one_seed, later = tmp_path / "one_seed", tmp_path / "later"
    one_seed.mkdir(), later.mkdir()
    rows[rows["seed"] == 0].to_csv(one_seed / "clients.csv", index=False)
    rows[rows["seed"] == 1].to_csv(later / "clients.csv", index=False)
    headline = benchmark.append_to_folder(later, rows[rows["seed"] >= 1], earlier=[one_seed])
    written = benchmark.folder_clients(later)
    assert set(written["seed"]) == {1, 2} and len(written) == 32, "seed 0 stays in the folder that holds it"
    assert headline["noise model"].item().startswith("Student t over 3 seeds")
    pd.testing.assert_frame_equal(benchmark.decide_from_clients(later, [one_seed]), headline)
    with pytest.raises(ValueError, match="differs"):  # a row the earlier folder holds must agree with it
        benchmark.append_to_folder(later, rows[rows["seed"] == 0].assign(accuracy_own=0.0), earlier=[one_seed])
    with pytest.raises(ValueError, match="at least one results folder"):
        benchmark.committed_clients([])


def test_folder_clients_reads_a_row_two_files_hold_once_and_refuses_one_they_disagree_on(tmp_path):
    import pandas as pd

    rows = pd.DataFrame([{"variant": "fedavg", "setting": "shards q=2", "seed": seed, "client": c, "round": 200,
                          "accuracy_own": 90.0 + seed + c, "accuracy_server": 0.0, "accuracy_local": 0.0,
                          "num_samples": 10} for seed in (0, 1) for c in range(3)])
    with pytest.raises(FileNotFoundError, match="lacks clients.csv"):
        benchmark.folder_clients(tmp_path)
    rows.to_csv(tmp_path / "clients.csv", index=False)  # a kill after the seed files, before clients.csv went
    for seed, part in rows.groupby("seed"):
        part.to_csv(tmp_path / f"clients_seed{seed}.csv", index=False)
    pd.testing.assert_frame_equal(benchmark.folder_clients(tmp_path), rows)
    rows.assign(accuracy_own=0.0)[rows["seed"] == 1].to_csv(tmp_path / "clients_seed1.csv", index=False)
    with pytest.raises(ValueError, match="differs"):
        benchmark.folder_clients(tmp_path)


def test_client_scores_round_to_the_files_decimals():
    import pandas as pd

    records = pd.DataFrame([{"variant": "fedavg", "setting": "shards q=2", "seed": 0, "client": 0, "round": r,
                             "accuracy": 100 / 3, "evaluate": "server", "accuracy_local": 200 / 3,
                             "num_samples": 3} for r in (1, 2)])
    rows = benchmark.client_scores(benchmark.own_protocol_records(records))
    assert rows[["round", "accuracy_own", "accuracy_server", "accuracy_local"]].values.tolist() == [
        [2, 33.3333, 33.3333, 66.6667]]


def test_seed_means_are_each_runs_client_mean():
    import pandas as pd

    rows = pd.DataFrame([{"variant": "fedavg", "setting": "shards q=2", "seed": seed, "client": c, "round": 4,
                          "accuracy_own": 80.0 + seed + 2 * c, "num_samples": 100}
                         for seed in (0, 1) for c in range(2)])
    means = benchmark.seed_means(rows)
    assert means.to_dict("records") == [{"method": "fedavg", "setting": "shards q=2", "seed": 0, "mean": 81.0},
                                        {"method": "fedavg", "setting": "shards q=2", "seed": 1, "mean": 82.0}]


def _count_rows(levels, seeds, settings=None, clients=4, samples=20):
    """Per-client rows whose accuracies are counts over ``samples`` test samples: method → correct answers."""
    import pandas as pd

    settings = settings or list(benchmark.SETTINGS)
    return pd.DataFrame([{"variant": v, "setting": s, "seed": seed, "client": c, "round": 200,
                          "accuracy_own": round(100 * min(samples, correct(i, seed, c)) / samples, 4),
                          "accuracy_server": 0.0, "accuracy_local": 0.0, "num_samples": samples}
                         for v, correct in levels.items() for i, s in enumerate(settings) for seed in seeds
                         for c in range(clients)])


def test_exact_accuracy_recovers_the_count_that_four_decimals_rounded():
    import numpy as np
    import pandas as pd

    rows = pd.DataFrame({"accuracy_own": [round(100 * 2 / 3, 4), 50.0], "num_samples": [3, 8]})
    np.testing.assert_allclose(benchmark.exact_accuracy(rows), [200 / 3, 50.0], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="not a count"):
        benchmark.exact_accuracy(rows.assign(accuracy_own=[33.0, 50.0]))


def test_seed_means_keep_ties_that_the_scores_rounding_would_break():
    # both methods are right on a third of their samples: 1/3 and 1/3, or 1/2 and 1/6, whose rounded scores
    # (33.3333, 33.3333 against 50.0 and 16.6667) have means that differ in the fifth decimal
    import pandas as pd

    rows = pd.DataFrame([{"variant": v, "setting": "shards q=2", "seed": 0, "client": c, "round": 1,
                          "accuracy_own": round(100 * correct / n, 4), "accuracy_server": 0.0, "accuracy_local": 0.0,
                          "num_samples": n}
                         for v, scores in (("a", [(1, 3), (1, 3)]), ("b", [(1, 2), (1, 6)]))
                         for c, (correct, n) in enumerate(scores)])
    assert rows.groupby("variant")["accuracy_own"].mean().round(9).nunique() == 2
    means = benchmark.seed_means(rows).set_index("method")["mean"]
    assert round(means["a"], 9) == round(means["b"], 9) == round(100 / 3, 9)


def test_seed_scores_use_the_seeds_every_cell_holds_and_their_mean():
    levels = {"fedavg": lambda i, seed, c: 10 + seed, "ditto": lambda i, seed, c: 15 + c % 2,
              "fedska": lambda i, seed, c: 12 + i % 3}
    rows = _count_rows(levels, seeds=(0, 1, 2))
    rows = rows[~((rows["variant"] == "ditto") & (rows["seed"] == 2))]  # one method lacks seed 2
    tables = benchmark.seed_scores(rows)
    assert list(tables) == ["seed 0", "seed 1", "mean over 2 seeds"]
    mean = tables["mean over 2 seeds"]
    assert list(mean.index) == list(benchmark.SETTINGS) and list(mean.columns) == ["fedavg", "ditto", "fedska"]
    assert mean.loc["shards q=2", "fedavg"] == pytest.approx(100 * 10.5 / 20)
    assert list(benchmark.seed_scores(rows[rows["seed"] == 0])) == ["seed 0"], "one seed: no mean table"
    with pytest.raises(ValueError, match="no seed is held by every"):
        benchmark.seed_scores(rows[(rows["seed"] == 0) & (rows["variant"] == "fedavg") | (rows["seed"] == 1)
                                   & (rows["variant"] != "fedavg")])


def test_seed_rank_readings_name_the_separations_every_seed_makes():
    # six methods in a fixed order in every setting, except that the 2nd and 3rd swap places in seed 1 only
    m = list(benchmark.METHODS)[:6]
    levels = {name: (lambda j: lambda i, seed, c: 19 - 3 * j + (3 if seed == 1 and j == 2 else 0)
                     - (3 if seed == 1 and j == 1 else 0))(j) for j, name in enumerate(m)}
    rows = _count_rows(levels, seeds=(0, 1, 2))
    readings = benchmark.seed_rank_readings(rows)
    assert list(readings["scores"].unique()) == ["seed 0", "seed 1", "seed 2", "mean over 3 seeds"]
    mean = readings[readings["scores"] == "mean over 3 seeds"].set_index("reading")
    held = mean.loc["twins counted too", "separated in every seed"].split("; ")
    assert f"{m[0]} vs {m[5]}" in held and f"{m[0]} vs {m[4]}" in held, "the extremes are apart in every seed"
    seed_1 = readings[(readings["scores"] == "seed 1") & (readings["reading"] == "twins counted too")]
    assert set(held) <= set(seed_1["separated"].item().split("; "))
    assert (readings.loc[readings["scores"] != "mean over 3 seeds", "separated in every seed"] == "").all()
    ranks = benchmark.seed_average_ranks(rows)
    assert list(ranks.columns) == ["seed 0", "seed 1", "seed 2", "mean over 3 seeds"]
    assert list(ranks.index[:2]) == m[:2] and ranks.loc[m[2], "seed 1"] < ranks.loc[m[1], "seed 1"]


def test_rankable_asks_for_a_complete_table_of_two_independent_settings():
    levels = {name: (lambda i, seed, c: 10) for name in ("fedavg", "ditto", "fedska")}
    two = ["shards q=2", "shards q=5"]
    assert benchmark.rankable(_count_rows(levels, (0,), two))
    assert not benchmark.rankable(_count_rows(levels, (0,), ["shards q=5", "noisy uplink s=0.1, q=5"]))
    assert not benchmark.rankable(_count_rows({k: levels[k] for k in ("fedavg", "ditto")}, (0,), two))
    rows = _count_rows(levels, (0,), two)
    assert not benchmark.rankable(rows[~((rows["variant"] == "fedska") & (rows["setting"] == "shards q=5"))])


def test_seed_figures_draw_each_setting_and_each_seeds_critical_difference():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gflkit import plots

    m = list(benchmark.METHODS)[:4]
    levels = {name: (lambda j: lambda i, seed, c: 18 - 2 * j - (seed == 1) * (j == 0) * 5)(j)
              for j, name in enumerate(m)}
    clients = _count_rows(levels, seeds=(0, 1))
    means = plots.seed_means_by_setting(benchmark.seed_means(clients), order=m, settings=list(benchmark.SETTINGS))
    visible = [ax.get_title() for ax in means.axes if ax.get_visible()]
    assert visible == list(benchmark.SETTINGS), "one panel per setting, in the benchmark's order"
    panels = benchmark.seed_rank_panels(clients)
    assert list(panels) == ["seed 0, independent settings", "seed 1, independent settings",
                            "mean over 2 seeds, independent settings"]
    ranks, cd = panels["seed 1, independent settings"]
    assert ranks[m[0]] == 3.0 and cd == pytest.approx(benchmark.nemenyi_critical_difference(4, 5))
    diagrams = plots.critical_difference_panels(panels)
    assert [ax.get_title() for ax in diagrams.axes] == list(panels)
    with pytest.raises(ValueError, match="at least one panel"):
        plots.critical_difference_panels({})
    plt.close("all")


def _own_table(settings, methods=("fedavg", "ditto", "fedska")):
    """A methods × settings table of own-protocol means, the first method best everywhere."""
    import pandas as pd

    table = pd.DataFrame({s: [90.0 - 5 * j + i for j in range(len(methods))] for i, s in enumerate(settings)},
                         index=pd.Index(list(methods), name="method"))
    return table.rename_axis(columns="setting")


def test_rank_tables_show_the_twin_and_count_it_once():
    own = _own_table(["shards q=2", "shards q=5", "noisy uplink s=0.1, q=5"])
    tables = benchmark.rank_tables(own)
    assert list(tables) == ["ranks.csv", "average_ranks.csv", "rank_readings.csv"]
    assert list(tables["ranks.csv"]["setting"]) == list(own.columns), "every setting shown, twin included"
    summary = tables["average_ranks.csv"]
    assert list(summary.columns) == ["method", "average rank", "average rank, twins counted too"]
    assert list(summary["method"]) == ["fedavg", "ditto", "fedska"] and list(summary["average rank"]) == [1.0, 2.0, 3.0]
    assert list(tables["rank_readings.csv"]["settings"]) == [3, 2]
    one_block = benchmark.rank_tables(_own_table(["shards q=5", "noisy uplink s=0.1, q=5"]))
    assert "rank_readings.csv" not in one_block, "Friedman's test needs two independent settings"


def test_cost_and_pareto_tables_are_ratios_to_fedavg_and_the_front():
    import pandas as pd

    measured = pd.DataFrame({"method": ["fedavg", "ditto", "fedska"], "MB up / client / round": [0.1, 0.1, 0.2],
                             "MB down / client / round": [0.1, 0.1, 0.2], "training_s": [1.0, 2.0, 3.0],
                             "aggregation_s": [1.0, 1.0, 5.0]}).set_index("method")
    cost = benchmark.cost_table(measured)
    assert list(cost["round time vs FedAvg"]) == [1.0, 1.5, 4.0]
    assert list(cost["server time vs FedAvg"]) == [1.0, 1.0, 5.0]
    assert list(cost["server share of the round (%)"]) == pytest.approx([50.0, 100 / 3, 62.5])
    assert "round time vs FedAvg" not in measured, "the measurement is left as it was"
    own = _own_table(["shards q=2", "shards q=5"], ("fedavg", "ditto", "fedska", "local"))
    own.loc["ditto"] = 95.0  # dearer than FedAvg and more accurate: on the front; FedSKA dearer and worse: off it
    pareto = benchmark.pareto_table(own, cost)
    assert list(pareto.index) == ["fedavg", "ditto", "fedska"], "untimed methods left out, cheapest first"
    assert list(pareto["on_front"]) == [True, True, False]


def test_derive_returns_every_file_of_the_notebook_from_its_records():
    import pandas as pd

    from gflkit.profiles import resolve_profile

    settings = ["shards q=2", "dirichlet α=0.5", "noisy uplink s=0.1, q=5"]
    params = resolve_profile(benchmark.PROFILES, "smoke", overrides={"variants": ["fedavg", "ditto", "fedska"]})
    levels = {"fedavg": lambda i, seed, c: 10, "ditto": lambda i, seed, c: 14 + c % 2, "fedska": lambda i, seed, c: 12}
    records = _count_rows(levels, seeds=(0,), settings=settings).assign(method=lambda r: r["variant"])
    records["accuracy_server"] = records["accuracy_own"]
    measured = pd.DataFrame({"method": ["fedavg", "fedska"], "MB up / client / round": [0.1, 0.2],
                             "MB down / client / round": [0.1, 0.2], "training_s": [1.0, 2.0],
                             "aggregation_s": [1.0, 1.0]}).set_index("method")
    tables = benchmark.derive(records, params, measured)
    assert list(tables) == ["methods.csv", "records.csv", "clients.csv", "accuracy_own_protocol.csv",
                            "worst5_own_protocol.csv", "accuracy_server_protocol.csv", "ranks.csv",
                            "average_ranks.csv", "rank_readings.csv", "headline_vs_best_baseline.csv", "cost.csv",
                            "pareto.csv"]
    own = tables["accuracy_own_protocol.csv"]
    assert list(own.columns) == ["method", *settings] and list(own["method"]) == ["fedavg", "ditto", "fedska"]
    assert own.set_index("method").loc["ditto", "shards q=2"] == pytest.approx(100 * 14.5 / 20)
    headline = tables["headline_vs_best_baseline.csv"]
    assert sorted(headline["setting"]) == sorted(settings) and set(headline["deciding baseline"]) == {"ditto"}
    assert list(tables["cost.csv"]["method"]) == ["fedavg", "fedska"] and "on_front" in tables["pareto.csv"]
    assert tables["records.csv"] is records


def test_an_entrant_runs_in_every_setting_and_seed_on_the_profiles_protocol():
    from gflkit.papers.your_method import PROFILES

    params = PROFILES["smoke"]
    entrant = benchmark.Entrant("mine", "fedprox", {"mu": 0.5}, protocol="local")
    runs = benchmark.entrant_runs(params, entrant)
    assert [(r.labels["variant"], r.labels["setting"], r.config.seed) for r in runs] == [
        ("mine", s, seed) for s in params.sweep["settings"] for seed in params.seeds]
    fedavg = benchmark.method_config(params, "fedavg", params.sweep["settings"][0], 0)
    mine = runs[0].config
    assert (mine.method, mine.method_options["mu"], mine.evaluate) == ("fedprox", 0.5, "local")
    assert mine.replace(method="fedavg", method_options={}, evaluate="server") == fedavg, "the same protocol"


@pytest.mark.parametrize("options, message", [
    ({"label": "fedavg"}, "entrant label 'fedavg' is a benchmark method's"),
    ({"label": "mine", "protocol": "global"}, "entrant protocol must be one of"),
])
def test_a_bad_entrant_is_refused(options, message):
    with pytest.raises(ValueError, match=message):
        benchmark.Entrant(**{"method": "fedavg", **options})


def test_an_entrant_is_ordered_after_the_benchmarks_methods_and_decided_against_the_baselines_asked_for():
    import pandas as pd

    assert benchmark.method_order(["mine", "ditto", "fedavg", "mine"]) == ["fedavg", "ditto", "mine"]
    rows = [{"variant": variant, "setting": "shards q=2", "seed": seed, "client": client, "round": 4,
             "accuracy_own": level + seed + (client % 3)}
            for variant, level in (("mine", 90.0), ("ditto", 80.0), ("fedavg", 70.0))
            for seed in range(3) for client in range(10)]
    clients = pd.DataFrame(rows)
    table = benchmark.headline_comparisons(clients, ["mine", "ditto", "fedavg"], headlines={"mine": "yours"},
                                           baselines=["ditto", "fedavg"])
    assert table[["paper", "method", "deciding baseline"]].values.tolist() == [["yours", "mine", "ditto"]]
    assert table["verdict (beats every baseline)"].tolist() == ["reproduced"]
    assert list(benchmark.seed_table(clients).index) == ["fedavg", "ditto", "mine"]
