from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from gflkit.papers import (CLAIM_COLUMNS, Claim, Verdict, available_papers, check_claim, claims_table, paper_vs_measured,
                           reported, standing)
from gflkit.papers.comparison import Difference, every


def test_fedska_table1_holds_the_papers_mnist_numbers():
    table = reported("fedska", "table1")
    assert "fedska" in available_papers()
    assert set(table["method"]) == {"local", "fedavg", "fedprox", "ditto", "ifca", "fedu", "sfl", "fedska"}
    cell = table.query("dataset == 'mnist' and setting == 'shards_2' and method == 'fedavg' and metric == 'mean'")
    assert cell["value"].item() == pytest.approx(90.02)
    # 3 datasets x 3 settings (MNIST, CIFAR) + Shakespeare, 3 metrics, 8 methods
    assert len(table) == (3 + 3 + 1) * 3 * 8
    assert len(reported("fedska", "table2")) == 8 * 3 and len(reported("fedska", "table3")) == 4


def test_jgesr_table1_holds_the_papers_numbers():
    table = reported("jgesr", "table1")
    assert set(table["method"]) == {"pdca", "two_step", "fedavg", "fedprox", "cfl", "fedamp", "pfedgraph"}
    assert len(table) == 7 * 2 * 2  # methods x datasets x noise levels
    cell = table.query("dataset == 'cifar10' and setting == 's_0.2' and method == 'pdca'")
    assert cell["value"].item() == pytest.approx(78.04)


def test_unknown_paper_or_table_is_rejected():
    with pytest.raises(ValueError, match="available"):
        reported("nonexistent")
    with pytest.raises(ValueError, match="no table"):
        reported("fedska", "table99")


def test_paper_vs_measured_keeps_measured_rows_and_computes_difference():
    measured = pd.DataFrame({"method": ["fedavg", "new"], "value": [91.0, 50.0]})
    paper = pd.DataFrame({"method": ["fedavg", "other"], "value": [90.0, 10.0]})
    table = paper_vs_measured(measured, paper, on=["method"])
    assert table["method"].tolist() == ["fedavg", "new"]
    assert table.loc[0, "difference"] == pytest.approx(1.0)
    assert pd.isna(table.loc[1, "paper"])
    assert list(table.columns) == ["method", "measured", "paper", "difference"]


def test_paper_vs_measured_keeps_the_spread_over_seeds_where_the_measurement_has_it():
    measured = pd.DataFrame({"method": ["fedavg"], "value": [91.0], "std": [0.3], "seeds": [3]})
    table = paper_vs_measured(measured, pd.DataFrame({"method": ["fedavg"], "value": [90.0]}), on=["method"])
    assert list(table.columns) == ["method", "measured", "measured_std", "seeds", "paper", "difference"]
    assert table.loc[0, "measured_std"] == 0.3 and table.loc[0, "seeds"] == 3


def test_claims_table_reports_verdicts():
    table = claims_table([Claim("a", "A", Verdict.REPRODUCED, "x", "smoke"),
                          Claim("b", "B", Verdict.NOT_REPRODUCED, "y", "ci"), Claim("c", "C", Verdict.INCONCLUSIVE, "z", "ci")])
    assert table["verdict"].tolist() == ["reproduced", "not reproduced", "inconclusive"]
    assert list(table.columns) == list(CLAIM_COLUMNS) and table["id"].tolist() == ["a", "b", "c"]
    assert table["difference"].tolist() == ["—"] * 3, "claims that compare nothing show no difference"


def test_a_claim_has_one_well_formed_id():
    with pytest.raises(ValueError, match="claim id 'PDCA best' must be lower-case words joined by '_'"):
        check_claim("PDCA best", "PDCA is the best", [], [], lambda: (True, ""), "ci")
    twice = [Claim("pdca_best", statement, Verdict.REPRODUCED, "", "ci") for statement in ("PDCA is best", "reworded")]
    with pytest.raises(ValueError, match=r"claim ids \['pdca_best'\] name more than one claim"):
        claims_table(twice)


def test_a_comparison_claim_shows_its_difference_interval_and_noise_model():
    within_noise = Difference(0.03, -0.4, 0.46, "paired bootstrap over 100 clients, unweighted mean", 100)
    single = check_claim("a_beats_b", "A beats B", ["a", "b"], ["a", "b"], lambda: (within_noise, "A 90.03 vs B 90.00"), "ci")
    assert single.verdict is Verdict.INCONCLUSIVE
    assert single.as_row() == {"id": "a_beats_b", "claim": "A beats B", "verdict": "inconclusive", "difference": "+0.03",
                               "interval": "[−0.40, +0.46]",
                               "noise model": "paired bootstrap over 100 clients, unweighted mean",
                               "evidence": "A 90.03 vs B 90.00", "profile": "ci"}
    clear = Difference(2.0, 1.5, 2.5, "paired bootstrap over 100 clients, unweighted mean", 100)
    settings = check_claim("a_beats_b_everywhere", "A beats B at every q", [], [], lambda: (every({"q=2": clear, "q=5": within_noise}), "…"),
                           "ci")
    row = settings.as_row()
    assert settings.verdict is Verdict.INCONCLUSIVE
    assert row["difference"] == "q=2: +2.00; q=5: +0.03"
    assert row["interval"] == "q=2: [+1.50, +2.50]; q=5: [−0.40, +0.46]"
    assert row["noise model"] == "paired bootstrap over 100 clients, unweighted mean"


def test_a_check_may_return_a_verdict_for_a_claim_that_is_no_comparison():
    claim = check_claim("descends", "the objective is non-increasing", [], [], lambda: (True, "12 iterations"), "smoke")
    assert claim.verdict is Verdict.REPRODUCED and claim.differences == ()
    assert check_claim("x", "x", [], [], lambda: (Verdict.INCONCLUSIVE, "why"), "smoke").verdict is Verdict.INCONCLUSIVE


def test_a_claim_whose_methods_did_not_run_is_listed_as_not_run_and_never_checked():
    def must_not_run():
        raise KeyError("fedprox")  # what indexing a table without the method's row does

    skipped = check_claim("beats_fedprox", "FedSKA beats FedProx", ["fedska", "fedprox"], ["fedavg", "fedska"], must_not_run, "smoke")
    checked = check_claim("beats_fedavg", "FedSKA beats FedAvg", ["fedska", "fedavg"], ["fedavg", "fedska"],
                          lambda: (True, "91 vs 88"), "smoke")
    table = claims_table([skipped, checked])
    assert table["verdict"].tolist() == ["not run", "reproduced"]
    assert table["evidence"].tolist() == ["needs ['fedprox'], which this run did not include", "91 vs 88"]


def test_fedvgae_tables_hold_the_papers_numbers():
    link = reported("fedvgae", "table3")
    assert set(link["dataset"]) == {"cora_full", "cora", "pubmed", "citeseer", "polblogs"}
    assert len(link) == 8 * 5 * 2  # methods x datasets x (AUC, AP)
    cell = link.query("dataset == 'citeseer' and method == 'gcfl' and metric == 'ap'")
    assert cell["value"].item() == pytest.approx(0.8741)
    nodes = reported("fedvgae", "table4")
    assert len(nodes) == 8 * 4 and nodes.query("dataset == 'flickr' and method == 'local'")["value"].item() == 0.4920
    shared = reported("fedvgae", "table5").query("dataset == 'cora' and method == 'fedvgae'")
    assert shared.set_index("setting")["value"].to_dict() == {"encoder": 0.8306, "all": 0.7112}
    assert len(reported("fedvgae", "table6")) == 3 * 4
    assert len(reported("fedvgae", "table7")) == 3 * 7 and len(reported("fedvgae", "table8")) == 3 * 6


def test_standing_ranks_a_method_or_says_it_did_not_run():
    scores = pd.Series({"fedavg": 80.0, "fedska": 91.2, "local": 85.0})
    assert standing(scores, "fedska") == "ranks 1 of 3 (91.20 %)"
    assert standing(scores, "local", unit="") == "ranks 2 of 3 (85.00)"
    assert standing(scores, "sfl") == "did not run"


def test_a_check_may_say_what_ran_cannot_decide_the_claim():
    claim = check_claim("a_beats_b", "A beats B", ["a", "b"], ["a", "b"], lambda: (None, "no method learned"), "ci")
    assert claim.as_row()["verdict"] == "not run" and claim.as_row()["evidence"] == "no method learned"


def test_fedska_claims_from_committed_per_client_csvs_equal_the_notebooks(tmp_path):
    from gflkit import metrics
    from gflkit.papers import fedska

    rng = np.random.default_rng(0)
    rows = []
    for method in fedska.METHODS:
        for q in (2, 10):
            for seed in (0, 1, 2):
                for client in range(6):
                    for round_ in (5, 10):
                        rows.append({"method": method, "seed": seed, "evaluate": "local", "q": q, "client": client,
                                     "round": round_, "accuracy": float(rng.uniform(80, 100)), "num_samples": 20})
    records = pd.DataFrame(rows)
    ablation = records[(records["method"] == "fedska") & (records["q"] == 2)].drop(columns="method")
    ablation = pd.concat([ablation.assign(setting=s) for s in fedska.VARIANTS])
    ablation["accuracy"] += rng.normal(0, 1, len(ablation))
    k_records = records[(records["method"] == "fedska") & (records["q"] == 2)].drop(columns="method")
    k_records = pd.concat([k_records.assign(k=k, accuracy=k_records["accuracy"] + rng.normal(0, 0.1, len(k_records)))
                           for k in (5, 30)])
    area = records.groupby(["q", "method", "seed", "client"], as_index=False)["accuracy"].mean()
    edge_weights = pd.DataFrame([{"q": q, "seed": seed, "mean_edge_weight": 0.01 * q + rng.normal(0, 0.001)}
                                 for q in (2, 10) for seed in (0, 1, 2)])
    figures = {"area": area, "k_records": k_records, "edge_weights": edge_weights}
    notebook = claims_table(fedska.claims(records, ablation, list(fedska.METHODS), "paper1", **figures))
    keep = ["seed", "evaluate", "q", "client", "round", "accuracy", "num_samples"]
    metrics.reported_rows(records, ["q", "method", "seed"])[["method", *keep]].to_csv(tmp_path / "table1_clients.csv",
                                                                                      index=False)
    metrics.reported_rows(ablation, ["setting", "seed"])[["setting", *keep]].to_csv(tmp_path / "table3_clients.csv",
                                                                                   index=False)
    without_figures = fedska.decide_from_clients(tmp_path, "paper1")
    assert without_figures["verdict"].tolist()[7:] == ["not run"] * 3
    pd.testing.assert_frame_equal(without_figures.head(7), notebook.head(7))
    metrics.reported_rows(k_records, ["q", "k", "seed"])[["k", *keep]].to_csv(tmp_path / "k_clients.csv", index=False)
    area.to_csv(tmp_path / "area_clients.csv", index=False)
    edge_weights.to_csv(tmp_path / "edge_weights.csv", index=False)
    committed = fedska.decide_from_clients(tmp_path, "paper1")
    pd.testing.assert_frame_equal(committed, notebook)
    assert len(notebook) == 10 and notebook["noise model"].str.contains("Student t over 3 seeds").all()
    assert notebook["verdict"].iloc[-2:].tolist() == ["reproduced", "reproduced"], "k: ±0.1 noise; q=2 edges weaker"
    later = {name: frame[frame["seed"] > 0] for name, frame in figures.items()}  # seed 0's figures not kept
    partial = claims_table(fedska.claims(records, ablation, list(fedska.METHODS), "paper1", **later))
    assert partial["evidence"].iloc[-3:].str.endswith("seeds 1, 2 only (the other seeds' per-round scores and "
                                                      "graphs were not kept)").all()
    assert not notebook["evidence"].str.contains("only").any()


def test_jgesr_claims_from_committed_per_client_csvs_equal_the_notebooks(tmp_path):
    from gflkit import metrics
    from gflkit.papers import jgesr

    rng = np.random.default_rng(1)
    rows = [{"method": method, "seed": seed, "evaluate": "server", "s": s, "missing": 0.0, "client": client,
             "round": round_, "accuracy": float(rng.uniform(70, 100)), "num_samples": 30}
            for method in jgesr.METHODS for s in (0.1, 0.2) for seed in (0, 1, 2) for client in range(5)
            for round_ in (15, 30)]
    records = pd.DataFrame(rows)
    pdca = records[(records["method"] == "pdca") & (records["s"] == 0.1)]
    missing = pd.concat([pdca.assign(missing=rate, accuracy=pdca["accuracy"] - 20 * rate) for rate in (0.0, 0.1)])
    objective = pd.DataFrame({"seed": 0, "iteration": range(4), "objective": [10.0, 7.5, 7.5, 7.0]})
    correlation = pd.DataFrame([{"seed": 0, "pairs": 10, "pearson_r": 0.42}])
    notebook = claims_table(jgesr.claims(records, list(jgesr.METHODS), "paper1", missing=missing, objective=objective,
                                         correlation=correlation))
    metrics.reported_rows(records, ["s", "method", "seed"]).to_csv(tmp_path / "table1_clients.csv", index=False)
    assert jgesr.decide_from_clients(tmp_path, "paper1")["verdict"].tolist()[2:] == ["not run"] * 3
    metrics.reported_rows(missing, ["missing", "seed"]).to_csv(tmp_path / "figure4_clients.csv", index=False)
    objective.to_csv(tmp_path / "pdca_objective.csv", index=False)
    correlation.to_csv(tmp_path / "learned_graph_correlation.csv", index=False)
    committed = jgesr.decide_from_clients(tmp_path, "paper1")
    pd.testing.assert_frame_equal(committed, notebook)
    assert len(notebook) == 5 and notebook["noise model"].iloc[:3].str.contains("Student t over 3 seeds").all()
    assert notebook["evidence"].iloc[:2].str.endswith("(3 seed(s))").all()
    assert notebook["verdict"].iloc[2:].tolist() == ["reproduced"] * 3
    assert notebook["evidence"].iloc[2] == "largest drop 2.00 points over missing rates [0.0, 0.1]"
    assert notebook["evidence"].iloc[3:].tolist() == ["last round: 3 iterations", "Pearson r = 0.420"]


def _graph_claims(objective, r):
    from gflkit.papers import jgesr

    records = pd.DataFrame([{"method": "pdca", "seed": 0, "s": 0.2, "client": c, "round": 30, "accuracy": 90.0,
                             "num_samples": 30} for c in range(3)])
    correlation = pd.DataFrame({"seed": range(len(r)), "pairs": 190, "pearson_r": r})
    return claims_table(jgesr.claims(records, ["pdca"], "paper1", objective=objective, correlation=correlation)).iloc[3:]


def test_jgesr_learned_graph_claim_over_seeds_is_decided_by_t_over_the_seeds_r():
    from scipy import stats

    descending = pd.concat([pd.DataFrame({"seed": seed, "iteration": range(3), "objective": [9.0, 8.0, 8.0]})
                            for seed in range(3)])
    r = [0.31, 0.35, 0.29]  # every seed near the threshold: a rerun could land on either side
    objective_claim, graph = (row for _, row in _graph_claims(descending, r).iterrows())
    half = stats.t.ppf(0.975, 2) * np.std(r, ddof=1) / np.sqrt(3)
    assert graph["verdict"] == "inconclusive" and graph["noise model"] == "Student t over 3 seeds of the learned graph's Pearson r"
    assert graph["difference"] == f"+{np.mean(r) - 0.3:.2f}"
    assert graph["interval"] == f"[{np.mean(r) - 0.3 - half:+.2f}, +{np.mean(r) - 0.3 + half:.2f}]".replace("-", "−")
    assert graph["evidence"] == "Pearson r − 0.3; seed 0: 0.310, seed 1: 0.350, seed 2: 0.290 (mean 0.317)"
    assert _graph_claims(descending, [0.5, 0.52, 0.55])["verdict"].tolist() == ["reproduced", "reproduced"]
    assert _graph_claims(descending, [0.1, 0.12, 0.15])["verdict"].iloc[1] == "not reproduced"
    assert objective_claim["evidence"] == "last round of seeds [0, 1, 2]: [2, 2, 2] iterations; non-increasing on 3 of 3 seeds"


def test_jgesr_objective_claim_over_seeds_fails_when_one_seed_rises():
    traces = [[9.0, 8.0, 8.0], [9.0, 8.0, 8.5], [7.0, 6.0]]
    rising = pd.concat([pd.DataFrame({"seed": seed, "iteration": range(len(t)), "objective": t})
                        for seed, t in enumerate(traces)])
    objective_claim = _graph_claims(rising, [0.5, 0.52, 0.55]).iloc[0]
    assert objective_claim["verdict"] == "not reproduced"
    assert objective_claim["evidence"] == "last round of seeds [0, 1, 2]: [2, 2, 1] iterations; non-increasing on 2 of 3 seeds"


def test_jgesr_graph_checks_read_every_stored_seed_of_the_pdca_run(tmp_path):
    from gflkit.executors import run_grid
    from gflkit.papers import jgesr
    from gflkit.profiles import resolve_profile
    from gflkit.results import ResultStore
    from gflkit.runtime import Runtime

    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    params = resolve_profile(jgesr.PROFILES, "smoke", seeds=[0, 1])
    with pytest.raises(ValueError, match=r"no PDCA run at s = 0.2 of seeds \[0, 1\] is stored"):
        jgesr.graph_checks(params, runtime)
    run_grid([jgesr.channel_run(params, "pdca", 0.2, 1)], runtime)  # seed 0's run is not stored
    objective, correlation = jgesr.graph_checks(params, runtime)
    assert set(objective["seed"]) == {1} and objective["iteration"].tolist() == list(range(len(objective)))
    assert jgesr.non_increasing(objective["objective"])
    assert correlation["seed"].tolist() == [1] and correlation["pairs"].item() == 20 * 19 // 2
    assert -1.0 <= correlation["pearson_r"].item() <= 1.0


def test_label_similarity_and_edge_correlation():
    import torch

    from gflkit.papers import jgesr

    counts = torch.tensor([[10, 0], [5, 0], [0, 3]])
    similarity = jgesr.label_similarity(counts)
    assert torch.allclose(similarity, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64))
    learned = torch.tensor([[0.0, 2.0, 0.5], [2.0, 0.0, 0.1], [0.5, 0.1, 0.0]])
    expected = np.corrcoef([2.0, 0.5, 0.1], [1.0, 0.0, 0.0])[0, 1]
    assert jgesr.edge_correlation(learned, similarity) == pytest.approx(expected)


def test_jgesr_claims_on_an_incomplete_later_seed_read_the_seeds_each_comparison_shares():
    from gflkit.papers import jgesr

    rng = np.random.default_rng(2)
    complete = [(method, s, 0) for method in jgesr.PAPER_METHODS for s in (0.1, 0.2)]
    later = [("pdca", 0.1, 1), ("two_step", 0.1, 1), ("pdca", 0.2, 1)]  # a background grid still running
    records = pd.DataFrame([{"method": method, "seed": seed, "s": s, "client": client, "round": 30,
                             "accuracy": float(rng.uniform(70, 100)), "num_samples": 30}
                            for method, s, seed in complete + later for client in range(6)])
    verdicts = claims_table(jgesr.claims(records, list(jgesr.PAPER_METHODS), "paper1"))
    best, two_step = verdicts.iloc[0], verdicts.iloc[1]
    # the ranking claim compares each candidate on the seeds it shares with PDCA (Two-step at s = 0.1 on two)
    assert best["evidence"].endswith("(each method with PDCA on the seeds both ran; s=0.1: 2 seeds: pdca, two_step; "
                                     "1 seed: cfl, fedamp, fedavg, fedprox, pfedgraph; s=0.2: 2 seeds: pdca; "
                                     "1 seed: cfl, fedamp, fedavg, fedprox, pfedgraph, two_step)")
    from gflkit.papers.comparison import compare_with_best_other
    other, difference = compare_with_best_other(records[records["s"] == 0.1], "pdca")
    assert best["difference"].startswith(f"s=0.1 vs {other}: {difference.estimate_text};")
    assert two_step["evidence"].endswith("(s=0.1: 2 seed(s), s=0.2: 1 seed(s))")
    seed_model = claims_table([jgesr.claims(records[records["s"] == 0.1], list(jgesr.PAPER_METHODS), "paper1")[1]])
    # two seeds show their interval's estimate but decide nothing: no noise model is claimed
    assert seed_model["verdict"].item() == "inconclusive" and seed_model["noise model"].item() == "—"
    assert seed_model["interval"].item() == "s=0.1: undecided: 2 seeds (a verdict over reruns needs 3)"


def test_jgesr_stored_clients_read_only_the_runs_a_store_holds(tmp_path):
    from gflkit.executors import run_grid
    from gflkit.papers import jgesr
    from gflkit.profiles import resolve_profile
    from gflkit.results import ResultStore
    from gflkit.runtime import Runtime

    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    with pytest.raises(ValueError, match=r"no Table 1 run of seeds \[0\] is stored"):
        jgesr.stored_clients("smoke", [0], runtime)
    table1 = jgesr.grids(resolve_profile(jgesr.PROFILES, "smoke"), ["table1"])["table1"]
    first = table1[0]
    run_grid([first], runtime)
    rows = jgesr.stored_clients("smoke", [0], runtime)
    assert list(rows.columns) == jgesr.CLIENT_COLUMNS and set(rows["method"]) == {first.config.method}
    assert (rows["round"] == first.config.rounds).all() and rows["client"].nunique() == first.config.num_clients


def test_jgesr_figure4_rows_take_the_complete_run_from_table1(tmp_path):
    from gflkit import metrics
    from gflkit.executors import run_grid
    from gflkit.papers import jgesr
    from gflkit.profiles import resolve_profile
    from gflkit.results import ResultStore
    from gflkit.runtime import Runtime

    runtime = Runtime(device="cpu", store=ResultStore(tmp_path / "runs"))
    params = resolve_profile(jgesr.PROFILES, "smoke")
    complete, lossy = jgesr.grids(params, ["figure4"])["figure4"]  # missing rates 0.0 and 0.1, seed 0
    with pytest.raises(ValueError, match=r"no Figure 4 run of seeds \[0\] with missing entries is stored"):
        jgesr.stored_missing_clients("smoke", [0], runtime, pd.DataFrame(columns=jgesr.CLIENT_COLUMNS))
    run_grid([lossy], runtime)
    with pytest.raises(ValueError, match=r"holds no complete PDCA run at s = 0.1 of the seeds \[0\]"):
        jgesr.stored_missing_clients("smoke", [0], runtime, pd.DataFrame(columns=jgesr.CLIENT_COLUMNS))
    table1_run = next(run for run in jgesr.grids(params, ["table1"])["table1"]
                      if run.config.method == "pdca" and run.config.channel["noise_scale"] == jgesr.FIGURE4_NOISE)
    run_grid([table1_run], runtime)
    rows = jgesr.stored_missing_clients("smoke", [0], runtime, jgesr.stored_clients("smoke", [0], runtime))
    assert list(rows.columns) == jgesr.MISSING_COLUMNS and set(rows["missing"]) == {0.0, 0.1}
    direct = metrics.reported_rows(run_grid([complete, lossy], runtime), ["missing", "seed"])[jgesr.MISSING_COLUMNS]
    pd.testing.assert_frame_equal(rows, direct.sort_values(["seed", "missing", "client"], ignore_index=True))


def test_jgesr_objective_check_tolerates_rounding_only():
    from gflkit.papers import jgesr

    assert jgesr.non_increasing([5.0, 5.0 * (1 + 1e-12), 4.0])
    assert not jgesr.non_increasing([5.0, 5.001, 4.0])


def test_fedvgae_claims_from_the_committed_clients_csv_equal_the_notebooks(tmp_path):
    from gflkit.papers import fedvgae

    rng = np.random.default_rng(2)
    methods = list(fedvgae.PROFILES["paper"].sweep["methods"])
    named = {"table5_node_classification": ("node_classification", ("cora", "citeseer"), ("fedavg", "fedvgae"),
                                            ("encoder", "first_layer", "all")),
             "table6": ("link_prediction", ("cora",), ("fedvgae",), tuple(fedvgae.COMPONENTS)),
             "tables7_8": ("link_prediction", ("cora",), ("fedvgae",), ("lambda_1.0", "phi_0.1", "phi_0.5"))}
    sections = {"table3": ("link_prediction", ("cora", "citeseer", "polblogs"), methods, (None,)),
                "table4": ("node_classification", ("cora", "citeseer"), methods, (None,)), **named}
    frames = {}
    for section, (task, datasets, section_methods, settings) in sections.items():
        score = fedvgae.SCORES[task]
        frames[section] = (pd.DataFrame([
            {"dataset": d, "method": m, **({"setting": s} if s else {}), "seed": seed, "client": k, "round": r,
             score: float(rng.uniform(60, 90)), f"val_{score}": float(rng.uniform(60, 90))}
            for d in datasets for m in section_methods for s in settings for seed in (0, 1, 2) for k in range(4)
            for r in (1, 2, 3)]), task)
    clients = fedvgae.reported_clients(frames)
    assert (clients.groupby(["section", "dataset", "method", "setting", "seed", "client"]).size() == 1).all()
    ran = [*methods, *sections]
    notebook = claims_table(fedvgae.claims(clients, methods, ran, "paper"))
    clients.to_csv(tmp_path / "clients.csv", index=False)
    committed = fedvgae.decide_from_clients(tmp_path, "paper")
    pd.testing.assert_frame_equal(committed, notebook)
    assert len(notebook) == 5 and notebook["noise model"].str.contains("Student t over 3 seeds").all()
    assert set(notebook["verdict"]) <= {"reproduced", "not reproduced", "inconclusive"}
    assert notebook["evidence"].str.endswith("(3 seed(s))").all()
    without_ablations = claims_table(fedvgae.claims(clients, methods, [*methods, "table3", "table4"], "paper"))
    assert without_ablations["verdict"].tolist()[2:] == ["not run"] * 3


def test_fedvgae_phi_claim_is_decided_against_the_noise_of_the_spread_over_phi():
    from gflkit.papers import fedvgae

    def clients(levels, noise):
        rng = np.random.default_rng(3)
        return pd.DataFrame([{"section": "tables7_8", "dataset": "cora", "method": "fedvgae", "task": "link_prediction",
                              "setting": setting, "seed": seed, "client": k, "round": 5,
                              "auc": level + rng.normal(0, noise)}
                             for setting, level in levels.items() for seed in (0, 1, 2) for k in range(10)])

    def verdict(levels, noise):
        claims = claims_table(fedvgae.claims(clients(levels, noise), [], ["tables7_8"], "paper"))
        return claims.set_index("claim")["verdict"].iloc[-1]

    assert verdict({"phi_0.1": 80.0, "phi_0.9": 81.0}, noise=0.5) == "reproduced"
    assert verdict({"phi_0.1": 80.0, "phi_0.5": 83.0, "phi_0.9": 88.0}, noise=0.5) == "not reproduced"
    assert verdict({"phi_0.1": 80.0, "phi_0.9": 84.0}, noise=15.0) == "inconclusive", "a range of 4 in wide noise"


def test_fedvgae_committed_claims_are_decided_from_the_committed_clients():
    from gflkit.papers import fedvgae

    folder = Path(__file__).resolve().parents[1] / "docs" / "results" / "fedvgae_paper"
    decided = fedvgae.decide_from_clients(folder, "paper")
    committed = pd.read_csv(folder / "claims.csv")
    pd.testing.assert_frame_equal(decided.astype(str), committed.astype(str))


def quickstart_records(local: dict, fedavg: dict, fedprox: dict, clients: int = 12) -> pd.DataFrame:
    """Last-round per-client rows of the quickstart's grid: per method, {q: mean accuracy}; each client's score is
    the mean plus a client effect shared by the methods (so pairs are tight) and a little noise."""
    rng = np.random.default_rng(0)
    effect = rng.normal(0, 3, clients)
    rows = [{"method": method, "seed": 0, "q": q, "client": k, "round": 10,
             "accuracy": level + effect[k] + rng.normal(0, 0.2), "num_samples": 100}
            for method, levels in (("local", local), ("fedavg", fedavg), ("fedprox", fedprox))
            for q, level in levels.items() for k in range(clients)]
    return pd.DataFrame(rows)


def test_quickstart_claims_are_decided_in_its_module_without_the_notebook():
    from gflkit.papers import quickstart

    records = quickstart_records(local={2: 90, 10: 80}, fedavg={2: 60, 10: 85}, fedprox={2: 62, 10: 84})
    claims = claims_table(quickstart.claims(records, ["local", "fedavg", "fedprox"], "ci"))
    assert claims["claim"].tolist() == ["with q = 2 shards, Local beats FedAvg and FedProx",
                                        "with q = 10 shards, FedAvg matches or beats Local (no more than 1 point below)",
                                        "Local's accuracy falls as q grows (more classes per client)"]
    assert claims["verdict"].tolist() == ["reproduced"] * 3
    assert "Local against fedprox" in claims["evidence"].iloc[0], "decided against the better of the two"
    reversed_ = quickstart_records(local={2: 55, 10: 90}, fedavg={2: 60, 10: 70}, fedprox={2: 58, 10: 69})
    verdicts = claims_table(quickstart.claims(reversed_, ["local", "fedavg", "fedprox"], "ci"))["verdict"]
    assert verdicts.tolist() == ["not reproduced"] * 3
    subset = claims_table(quickstart.claims(records[records["method"] != "fedprox"], ["local", "fedavg"], "ci"))
    assert subset["verdict"].tolist() == ["not run", "reproduced", "reproduced"]


def test_quickstart_committed_claims_are_decided_from_the_committed_clients():
    from gflkit.papers import quickstart

    folder = Path(__file__).resolve().parents[1] / "docs" / "results" / "quickstart_ci"
    decided = quickstart.decide_from_clients(folder, "ci")
    pd.testing.assert_frame_equal(decided.astype(str), pd.read_csv(folder / "claims.csv").astype(str))


@pytest.mark.parametrize("paper, folder, profile", [
    ("fedska", "fedska_ci", "ci"), ("jgesr", "jgesr_ci", "ci"), ("fedvgae", "fedvgae_ci", "ci"),
])
def test_archived_claims_are_what_the_module_decides_from_the_archived_csvs(paper, folder, profile):
    """Every claim an archived notebook shows is the paper module's decision on the CSVs committed beside it."""
    import importlib

    module = importlib.import_module(f"gflkit.papers.{paper}")
    path = Path(__file__).resolve().parents[1] / "docs" / "results" / folder
    decided = module.decide_from_clients(path, profile)
    pd.testing.assert_frame_equal(decided.astype(str), pd.read_csv(path / "claims.csv").astype(str))
    assert "not run" not in set(decided["verdict"]), "every claim has what it needs in the committed CSVs"


def test_committed_csvs_reads_what_is_there_and_names_a_missing_required_file(tmp_path):
    from gflkit.papers import committed_csvs

    pd.DataFrame({"a": [1]}).to_csv(tmp_path / "one.csv", index=False)
    frames = committed_csvs(tmp_path, {"one": "one.csv", "two": "two.csv"}, ["one"], "demo")
    assert frames["one"]["a"].tolist() == [1] and frames["two"] is None
    with pytest.raises(FileNotFoundError, match=r"lacks \['two.csv'\], which the demo notebook writes"):
        committed_csvs(tmp_path, {"one": "one.csv", "two": "two.csv"}, ["one", "two"], "demo")


def _client_rows(seed, scores, method="pdca"):
    return pd.DataFrame({"method": method, "seed": seed, "client": range(len(scores)), "accuracy": scores})


def test_append_seeds_adds_later_seeds_once_and_keeps_the_committed_rows_first():
    from gflkit.papers import append_seeds

    committed = pd.concat([_client_rows(0, [90.0, 80.0]), _client_rows(1, [85.0, 75.0])], ignore_index=True)
    # the later run reran seed 1 (a CSV round trip away: within the tolerance) and ran seed 2
    later = pd.concat([_client_rows(1, [85.0 + 1e-8, 75.0]), _client_rows(2, [70.0, 60.0])], ignore_index=True)
    merged = append_seeds(committed, later[["accuracy", "client", "seed", "method"]], ["method", "seed", "client"])
    assert list(merged.columns) == list(committed.columns)
    assert merged["seed"].tolist() == [0, 0, 1, 1, 2, 2]
    assert merged["accuracy"].tolist()[:4] == committed["accuracy"].tolist(), "the committed rows are kept as they are"
    assert merged["accuracy"].tolist()[4:] == [70.0, 60.0]


def test_append_seeds_refuses_a_rerun_that_disagrees_and_frames_that_do_not_fit():
    from gflkit.papers import append_seeds

    committed = _client_rows(0, [90.0, 80.0])
    keys = ["method", "seed", "client"]
    with pytest.raises(ValueError, match=r"method=pdca, seed=0, client=1 differs .*\(80.0\) .*\(80.5\) runs in 'accuracy'"):
        append_seeds(committed, _client_rows(0, [90.0, 80.5]), keys)
    with pytest.raises(ValueError, match=r"seed=0, client=0 differs .*\(a\) .*\(b\) runs in 'setting'"):
        append_seeds(committed.assign(setting="a"), _client_rows(0, [90.0, 80.0]).assign(setting="b"),
                     ["seed", "client"])
    with pytest.raises(ValueError, match="columns"):
        append_seeds(committed, _client_rows(1, [1.0, 2.0]).assign(extra=1), keys)
    with pytest.raises(ValueError, match=r"keys \['round'\] are not columns"):
        append_seeds(committed, _client_rows(1, [1.0, 2.0]), ["round"])
    with pytest.raises(ValueError, match="later rows repeat the key"):
        append_seeds(committed, pd.concat([_client_rows(1, [1.0]), _client_rows(1, [2.0])]), keys)


def test_fedska_append_to_folder_rebuilds_the_committed_paper1_folder_from_a_seed_split(tmp_path):
    """Split the committed ``fedska_paper1`` rows into an earlier folder (without seed 3) and a later notebook
    run (seeds 2–3): appending the second to the first gives back every committed table and the claims."""
    import shutil
    from pathlib import Path

    import pandas as pd

    from gflkit.papers import fedska

    committed = Path(__file__).parent.parent / "docs" / "results" / "fedska_paper1"
    earlier, later = tmp_path / "earlier", tmp_path / "later"
    shutil.copytree(committed, earlier)
    later.mkdir()
    for name in fedska.CLAIM_FILES.values():
        rows = pd.read_csv(committed / name)
        rows[rows["seed"] != 3].to_csv(earlier / name, index=False)
        rows[rows["seed"].isin([2, 3])].to_csv(later / name, index=False)
    verdicts = fedska.append_to_folder(earlier, later, "paper1")
    for name in ["table1.csv", "table1_paper_vs_measured.csv", "table3.csv", "figure4_k.csv", "claims.csv"]:
        pd.testing.assert_frame_equal(pd.read_csv(earlier / name), pd.read_csv(committed / name), check_dtype=False,
                                      rtol=1e-9, obj=name)
    for key, name in fedska.CLAIM_FILES.items():  # the same rows, the later seeds' last
        rebuilt, rows = (pd.read_csv(folder / name).sort_values(fedska.CLAIM_KEYS[key], ignore_index=True)
                         for folder in (earlier, committed))
        pd.testing.assert_frame_equal(rebuilt, rows, obj=name)
    pd.testing.assert_frame_equal(verdicts, fedska.decide_from_clients(committed, "paper1"))
    table1 = pd.read_csv(later / "table1_clients.csv")
    table1.loc[table1.index[0], "accuracy"] += 1.0
    table1.to_csv(later / "table1_clients.csv", index=False)
    with pytest.raises(ValueError, match="differs"):  # a rerun must give the committed rows of its seeds
        fedska.append_to_folder(earlier, later, "paper1")


def test_jgesr_figure4_compares_each_missing_rate_on_the_seeds_it_shares_with_the_complete_run():
    from gflkit.papers import jgesr

    rng = np.random.default_rng(3)
    complete = [(0.0, seed) for seed in (0, 1, 2)]
    lossy = [(0.1, seed) for seed in (0, 1, 2)] + [(0.05, 0)]  # a grid whose 0.05 rate has reached seed 0 only
    missing = pd.DataFrame([{"method": "pdca", "seed": seed, "missing": rate, "client": client, "round": 30,
                             "accuracy": float(rng.uniform(85, 95)) - 30 * rate, "num_samples": 30}
                            for rate, seed in complete + lossy for client in range(8)])
    records = missing[missing["missing"] == 0.0].assign(s=0.1)
    drop = claims_table(jgesr.claims(records, ["pdca"], "paper1", missing=missing)).iloc[2]
    assert drop["interval"].startswith("missing=0.05: undecided: 0.05 has 1 seed (a verdict over reruns needs 3); "
                                       "missing=0.1: [")
    assert drop["noise model"].startswith("Student t over 3 seeds of the client mean")


def test_no_committed_claim_mixes_interval_kinds_or_decides_on_fewer_than_three_seeds():
    """Every committed claims table: a claim's noise model is one kind (over seeds, or one seed's clients or test
    images), and a verdict over seeds rests on at least three."""
    import re
    from pathlib import Path

    from gflkit.report.pages import claims_file, verdict_column

    results = Path(__file__).resolve().parents[1] / "docs" / "results"
    checked = 0
    for folder in sorted(path for path in results.iterdir() if path.is_dir()):
        path = claims_file(folder)
        if path is None:
            continue
        claims = pd.read_csv(path, dtype=str, keep_default_na=False)
        for _, claim in claims.iterrows():
            model = claim["noise model"]
            over_seeds = [int(n) for n in re.findall(r"Student t over (\d+) seeds", model)]
            one_seed = "of one seed" in model
            assert not (over_seeds and one_seed), f"{path.name} of {folder.name} mixes interval kinds: {model}"
            if claim[verdict_column(claims)] in ("reproduced", "not reproduced") and over_seeds:
                assert min(over_seeds) >= 3, f"{folder.name}: a verdict over {min(over_seeds)} seeds: {model}"
            checked += 1
    assert checked > 50
