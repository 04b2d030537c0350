"""Per-client metrics and their summaries, on hand-computed cases."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from gflkit.metrics import (
    accuracy,
    best_fraction,
    final_summary,
    identical_methods,
    long_summary,
    mean_and_spread,
    protocol_table,
    reported_rows,
    summarize_clients,
    summarize_records,
    with_both_protocols,
    worst_fraction,
)


def test_accuracy_in_percent() -> None:
    logits = torch.tensor([[2.0, 1.0], [0.0, 3.0], [5.0, 0.0], [0.0, 1.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1, 0])) == pytest.approx(50.0)
    assert accuracy(logits, torch.tensor([0, 1, 0, 1])) == pytest.approx(100.0)


def test_best_and_worst_fraction() -> None:
    twenty = np.arange(20.0)  # 5 % of 20 clients = 1 client
    assert best_fraction(twenty) == 19.0 and worst_fraction(twenty) == 0.0
    forty = np.arange(40.0)  # 5 % of 40 clients = 2 clients
    assert best_fraction(forty) == pytest.approx(38.5) and worst_fraction(forty) == pytest.approx(0.5)
    sixty = list(range(60))  # 0.05 * 60 = 3.0000000000000004 in floats: still 3 clients
    assert best_fraction(sixty) == pytest.approx(58.0) and worst_fraction(sixty) == pytest.approx(1.0)
    assert best_fraction([3.0, 1.0, 2.0]) == 3.0  # ceil(0.05 * 3) = 1
    assert best_fraction([3.0, 1.0, 2.0, 6.0], fraction=0.5) == pytest.approx(4.5)
    assert worst_fraction([3.0, 1.0, 2.0, 6.0], fraction=1.0) == pytest.approx(3.0)


@pytest.mark.parametrize("kind", [list, np.array, torch.tensor, pd.Series])
def test_summarize_clients_accepts_any_sequence(kind) -> None:
    summary = summarize_clients(kind([10.0, 20.0, 30.0, 40.0]))
    assert summary == {
        "mean": 25.0,
        "weighted_mean": 25.0,
        "best5": 40.0,
        "worst5": 10.0,
        "std": pytest.approx(math.sqrt(125.0)),  # population std over clients
        "num_clients": 4,
    }


def test_weighted_and_unweighted_mean() -> None:
    values, counts = [100.0, 50.0], [3, 1]
    summary = summarize_clients(values, counts)
    assert summary["mean"] == 75.0
    assert summary["weighted_mean"] == pytest.approx((3 * 100 + 1 * 50) / 4)
    assert summarize_clients(values, [0, 2])["weighted_mean"] == 50.0  # a client without samples has no weight
    assert summarize_clients(values, [0, 0])["weighted_mean"] == 75.0  # no samples at all: the plain mean


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: best_fraction([1.0, 2.0], fraction=0.0), "fraction"),
        (lambda: worst_fraction([1.0, 2.0], fraction=1.5), "fraction"),
        (lambda: summarize_clients([]), "values"),
        (lambda: summarize_clients([1.0, float("nan")]), "values"),
        (lambda: summarize_clients([[1.0, 2.0]]), "values"),
        (lambda: summarize_clients([1.0, 2.0], [1, 2, 3]), "num_samples"),
        (lambda: summarize_clients([1.0, 2.0], [1, -2]), "num_samples"),
        (lambda: accuracy(torch.zeros(3), torch.zeros(3, dtype=torch.long)), "logits"),
        (lambda: accuracy(torch.zeros(3, 2), torch.zeros(2, dtype=torch.long)), "targets"),
        (lambda: accuracy(torch.zeros(0, 2), torch.zeros(0, dtype=torch.long)), "n = 0"),
        (lambda: summarize_records(pd.DataFrame({"round": [1]}), "accuracy"), "accuracy"),
        (lambda: final_summary(pd.DataFrame({"round": [1], "accuracy": [1.0], "method": ["a"]})), "seed"),
    ],
)
def test_bad_parameters_raise(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


def make_records() -> pd.DataFrame:
    """Two methods x two seeds x rounds {1, 2} x 2 clients (method "b", seed 1 stops at round 1)."""
    rows = []
    acc = {  # (method, seed, round) -> (client 0, client 1) accuracies
        ("a", 0, 1): (10.0, 20.0), ("a", 0, 2): (60.0, 80.0),
        ("a", 1, 1): (30.0, 30.0), ("a", 1, 2): (70.0, 90.0),
        ("b", 0, 1): (40.0, 40.0), ("b", 0, 2): (50.0, 50.0),
        ("b", 1, 1): (20.0, 60.0),
    }
    for (method, seed, rnd), values in acc.items():
        for client, value in enumerate(values):
            rows.append({"method": method, "seed": seed, "round": rnd, "client": client,
                         "num_samples": [1, 3][client], "accuracy": value, "loss": 1.0 / rnd})
    return pd.DataFrame(rows)


def test_summarize_records_per_round() -> None:
    records = make_records()
    per_round = summarize_records(records[records["method"] == "a"], by=["round"])
    assert list(per_round.columns) == ["round", "mean", "weighted_mean", "best5", "worst5", "std", "num_clients",
                                      "num_unscored"]
    assert per_round["round"].tolist() == [1, 2]
    # round 1 pools 4 client rows (2 seeds): 10, 20, 30, 30 with weights 1, 3, 1, 3
    first = per_round.iloc[0]
    assert first["mean"] == pytest.approx(22.5)
    assert first["weighted_mean"] == pytest.approx((10 + 60 + 30 + 90) / 8)
    assert first["best5"] == 30.0 and first["worst5"] == 10.0 and first["num_clients"] == 4


def test_summarize_records_by_run_and_round() -> None:
    per_run = summarize_records(make_records(), "accuracy", by=["method", "seed", "round"])
    assert len(per_run) == 7
    row = per_run.set_index(["method", "seed", "round"]).loc[("a", 0, 2)]
    assert row["mean"] == 70.0 and row["weighted_mean"] == pytest.approx(75.0)
    assert row["best5"] == 80.0 and row["worst5"] == 60.0 and row["std"] == pytest.approx(10.0)
    loss = summarize_records(make_records(), "loss", by=("round",))
    assert loss["mean"].tolist() == pytest.approx([1.0, 0.5])


def test_summarize_records_without_num_samples_is_unweighted() -> None:
    records = make_records().drop(columns="num_samples")
    per_round = summarize_records(records, by=["round"])
    assert (per_round["mean"] == per_round["weighted_mean"]).all()


def test_final_summary_last_round_then_seeds() -> None:
    table = final_summary(make_records(), value="accuracy", by=("method",))
    assert list(table.columns) == [
        "method", "mean", "mean_std", "weighted_mean", "weighted_mean_std", "best5", "best5_std",
        "worst5", "worst5_std", "std", "std_std", "num_seeds",
    ]
    a, b = table.set_index("method").loc["a"], table.set_index("method").loc["b"]
    # method a: last round 2 in both seeds, run means 70 and 80
    assert a["mean"] == pytest.approx(75.0) and a["mean_std"] == pytest.approx(np.std([70, 80], ddof=1))
    assert a["weighted_mean"] == pytest.approx((75.0 + 85.0) / 2)
    assert a["best5"] == pytest.approx(85.0) and a["worst5"] == pytest.approx(65.0)
    # method b: seed 0 ends at round 2 (mean 50), seed 1 at round 1 (mean 40)
    assert b["mean"] == pytest.approx(45.0) and b["worst5"] == pytest.approx((50 + 20) / 2)
    assert a["num_seeds"] == 2 and b["num_seeds"] == 2


def test_long_summary_carries_the_spread_over_seeds_and_their_number() -> None:
    table = long_summary(final_summary(make_records(), value="accuracy", by=("method",)), ["method"])
    assert list(table.columns) == ["method", "metric", "value", "std", "seeds"]
    a_mean = table[(table["method"] == "a") & (table["metric"] == "mean")].iloc[0]
    assert a_mean["value"] == pytest.approx(75.0) and a_mean["std"] == pytest.approx(np.std([70, 80], ddof=1))
    assert a_mean["seeds"] == 2 and sorted(set(table["metric"])) == ["best5", "mean", "worst5"]
    with pytest.raises(ValueError, match="num_seeds"):
        long_summary(pd.DataFrame({"method": ["a"], "mean": [1.0], "best5": [1.0], "worst5": [1.0]}), ["method"])


def test_mean_and_spread_names_the_seeds() -> None:
    assert mean_and_spread(97.4512, 0.1234, 3) == "97.45 ± 0.12 (3 seeds)"
    assert mean_and_spread(97.4512, float("nan"), 1) == "97.45 (1 seed)"


def test_best_val_reports_the_round_with_the_best_mean_validation_score() -> None:
    records = make_records()
    # validation peaks at round 1 for method "a" seed 0 only; every other run peaks at its last round
    records["val_accuracy"] = records["round"] * 10.0
    records.loc[(records["method"] == "a") & (records["seed"] == 0) & (records["round"] == 1), "val_accuracy"] = 99.0
    rows = reported_rows(records, ["method", "seed"], "best_val", "accuracy")
    chosen = rows.groupby(["method", "seed"])["round"].unique().map(list).to_dict()
    assert chosen == {("a", 0): [1], ("a", 1): [2], ("b", 0): [2], ("b", 1): [1]}
    table = final_summary(records, "accuracy", ("method",), report="best_val").set_index("method")
    assert table.loc["a", "mean"] == pytest.approx((15.0 + 80.0) / 2)  # seed 0 at round 1, seed 1 at round 2
    # the loss is reported at the round the accuracy's validation picked
    losses = final_summary(records, "loss", ("method",), report="best_val", select_by="accuracy").set_index("method")
    assert losses.loc["a", "mean"] == pytest.approx((1.0 + 0.5) / 2)


def test_best_val_ties_keep_the_first_round_and_bad_reports_are_explained() -> None:
    records = make_records().assign(val_accuracy=5.0)
    assert set(reported_rows(records, ["method", "seed"], "best_val", "accuracy")["round"]) == {1}
    with pytest.raises(ValueError, match="unknown report 'best'"):
        reported_rows(records, ["method", "seed"], "best")
    with pytest.raises(ValueError, match="needs the validation column 'val_loss'.*run them again"):
        final_summary(records, "loss", report="best_val")
    with pytest.raises(ValueError, match="needs select_by"):
        reported_rows(records, ["method", "seed"], "best_val")


def test_final_summary_single_seed_has_nan_std_and_several_by_columns() -> None:
    records = make_records().assign(q=lambda d: np.where(d["method"] == "a", 2, 10))
    table = final_summary(records[records["seed"] == 0], by=("q", "method"))
    assert table[["q", "method"]].values.tolist() == [[2, "a"], [10, "b"]]
    assert table["mean"].tolist() == pytest.approx([70.0, 50.0])
    assert table["mean_std"].isna().all() and (table["num_seeds"] == 1).all()


def _two_protocol_records():
    # run A scored on the server's model (local scores beside), run B the other way round
    return pd.DataFrame({
        "method": ["a", "a", "b", "b"], "seed": 0, "round": 1, "client": [0, 1, 0, 1],
        "evaluate": ["server", "server", "local", "local"],
        "accuracy": [50.0, 70.0, 90.0, 80.0],
        "accuracy_local": [60.0, 80.0, float("nan"), float("nan")],
        "accuracy_server": [float("nan"), float("nan"), 89.5, 80.0],
    })


def test_with_both_protocols_puts_each_score_under_its_protocol():
    both = with_both_protocols(_two_protocol_records())
    assert both["accuracy_server"].tolist() == [50.0, 70.0, 89.5, 80.0]
    assert both["accuracy_local"].tolist() == [60.0, 80.0, 90.0, 80.0]


def test_protocol_table_flags_protocols_more_than_a_point_apart():
    table = protocol_table(_two_protocol_records(), by=["method"]).set_index("method")
    assert table.loc["a", "protocol"] == "server" and table.loc["b", "protocol"] == "local"
    assert table.loc["a", ["server", "local"]].tolist() == [60.0, 70.0]
    assert table.loc["b", ["server", "local"]].tolist() == [84.75, 85.0]
    assert table["differs"].tolist() == [True, False]


def test_identical_methods_finds_a_column_that_equals_another():
    rows = []
    for q in (2, 5):
        for method, offset in (("fedavg", 0.0), ("gcfl", 0.0), ("local", 1.0)):
            for client in range(3):
                rows.append({"q": q, "method": method, "seed": 0, "round": 5, "client": client,
                             "accuracy": 50.0 + client + (offset if q == 2 or method != "gcfl" else 0.5)})
                rows.append({"q": q, "method": method, "seed": 0, "round": 1, "client": client, "accuracy": 0.0})
    found = identical_methods(pd.DataFrame(rows), by=["q"])
    assert found.to_dict("records") == [{"q": 2, "method": "fedavg", "same_as": "gcfl"}]
    assert identical_methods(pd.DataFrame(rows).query("method != 'gcfl'"), by=["q"]).empty


def test_clients_without_a_test_sample_are_left_out_of_every_summary_and_counted():
    import math

    records = pd.DataFrame({"method": "m", "seed": 0, "round": 1, "client": range(4),
                            "accuracy": [80.0, 60.0, math.nan, 0.0], "num_samples": [10, 30, 0, 0]})
    summary = summarize_records(records, by=["method"]).iloc[0]
    assert summary["mean"] == 70.0 and summary["weighted_mean"] == 65.0 and summary["worst5"] == 60.0
    assert (summary["num_clients"], summary["num_unscored"]) == (2, 2), "a stored 0 % of an empty client too"
    table = final_summary(records, by=("method",))
    assert table["mean"].item() == 70.0 and table["scored"].item() == "2 of 4 clients"
    complete = final_summary(records[records["num_samples"] > 0], by=("method",))
    assert "scored" not in complete.columns, "a table whose clients are all scored is as before"
    nobody = summarize_records(records[records["num_samples"] == 0], by=["method"]).iloc[0]
    assert math.isnan(nobody["mean"]) and (nobody["num_clients"], nobody["num_unscored"]) == (0, 2)
