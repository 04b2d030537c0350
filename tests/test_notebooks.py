"""Notebook-level checks that nbval cannot express: parameter validation and the ci profile on real MNIST.

(nbval itself executes every notebook on its default smoke parameters: see `make test`.)
"""
import pandas as pd
import pytest

papermill = pytest.importorskip("papermill")

from gflkit.notebooks import execute


@pytest.mark.parametrize("profile, parameters, message", [
    ("turbo", {}, "unknown profile 'turbo'"),
    ("smoke", {"overrides": {"dataset": "imagenet"}}, "unknown dataset 'imagenet'"),
    ("smoke", {"overrides": {"methods": ["fedavg", "fedsgd"]}}, "unknown method 'fedsgd'"),
    ("smoke", {"overrides": {"rounds": 0}}, "rounds must be a positive"),
])
def test_bad_parameters_fail_in_the_validation_cell(tmp_path, profile, parameters, message):
    with pytest.raises(papermill.PapermillExecutionError) as failure:
        execute("quickstart", profile, tmp_path, parameters)
    assert message in str(failure.value)
    assert failure.value.exec_count <= 3, "the error must come from the validation cell, before any experiment"


@pytest.mark.integration
def test_quickstart_ci_profile_on_real_mnist(tmp_path, real_data_root):
    execute("quickstart", "ci", tmp_path, {"data_root": str(real_data_root)})
    table = pd.read_csv(tmp_path / "table.csv")
    assert len(table) == 9 and set(table["method"]) == {"local", "fedavg", "fedprox"}
    records = pd.read_csv(tmp_path / "records.csv")
    assert records["client"].nunique() == 100, "the ci profile federates 100 MNIST clients"
    per_run_round = records.groupby(["q", "method", "round"])["num_samples"].sum()
    assert (per_run_round == 14_000).all(), "pooled 70,000 MNIST samples, 20 % of each client's 700 held out"
    assert table["mean"].between(10, 100).all()
    comparison = pd.read_csv(tmp_path / "paper_vs_measured.csv")
    assert comparison["paper"].notna().all(), "every MNIST cell has a paper number beside it"
    for figure in ("learning_curves.png", "client_distribution.png", "partition.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_dataset_available_names_the_missing_file_and_the_fix(tmp_path, monkeypatch):
    from gflkit.notebooks import dataset_available

    monkeypatch.setenv("GFLKIT_CACHE", str(tmp_path / "cache"))
    available, message = dataset_available("cifar10", tmp_path)
    assert not available
    assert "cifar-10-python.tar.gz is missing" in message and "gflkit data fetch cifar10" in message
    assert dataset_available("digits", tmp_path)[0], "embedded datasets need no files"


@pytest.mark.integration
def test_fedska_ci_profile_on_real_mnist(tmp_path, real_data_root):
    execute("fedska", "ci", tmp_path, {"data_root": str(real_data_root)})
    table1 = pd.read_csv(tmp_path / "table1_paper_vs_measured.csv")
    methods = {"local", "fedavg", "fedprox", "ditto", "ifca", "fedu", "sfl", "fedska"}
    assert set(table1["method"]) == methods
    assert set(table1["setting"]) == {"shards_2", "shards_5", "shards_10"}
    assert len(table1) == 8 * 3 * 3 and table1["paper"].notna().all()
    assert table1["measured"].between(0, 100).all()
    records = pd.read_csv(tmp_path / "table1_records.csv")
    assert records["client"].nunique() == 100
    table3 = pd.read_csv(tmp_path / "table3.csv")
    assert set(table3["setting"]) == {"given_graph", "learned_graph", "learned_graph_features_init",
                                      "no_structure_term"}
    assert sorted(pd.read_csv(tmp_path / "figure4_k.csv")["k"]) == [5, 30, 80]
    protocols = pd.read_csv(tmp_path / "table1_protocols.csv")
    assert len(protocols) == 24 and protocols[["server", "local"]].notna().all().all()
    assert dict(zip(protocols["method"], protocols["protocol"]))["ifca"] == "local"
    overlap = pd.read_csv(tmp_path / "overlap.csv")
    assert set(overlap["method"]) == {"local", "fedavg", "fedska"}
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) == 10 and set(claims["verdict"]) <= {"reproduced", "not reproduced"}
    for figure in ("figure3_learning_curves.png", "figure4_k_sensitivity.png", "figure5_learned_graph.png"):
        assert (tmp_path / figure).stat().st_size > 10_000


def test_jgesr_notebook_writes_table1_figures_and_claims(tmp_path):
    execute("jgesr", "smoke", tmp_path, {"overrides": {"rounds": 2}})
    table1 = pd.read_csv(tmp_path / "table1_paper_vs_measured.csv")
    assert set(table1["method"]) == {"pdca", "two_step", "fedavg", "fedprox", "cfl", "fedamp", "pfedgraph"}
    assert set(table1["setting"]) == {"s_0.1", "s_0.2"} and table1["paper"].notna().all()
    assert sorted(pd.read_csv(tmp_path / "figure4_missing.csv")["missing"]) == [0.0, 0.1]
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) == 5 and set(claims["verdict"]) <= {"reproduced", "not reproduced"}
    for figure in ("figure3_accuracy_per_round.png", "figure4_missing_rates.png", "learned_graph_vs_labels.png",
                   "pdca_objective.png"):
        assert (tmp_path / figure).stat().st_size > 10_000
