"""The FedSKA files whose tables were written with their index: the flat frames of ``fedska`` write the same CSV."""
import numpy as np
import pandas as pd

from gflkit.papers import fedska


def test_table2_files_write_the_indexed_tables_csv():
    rng = np.random.default_rng(0)
    traffic = pd.DataFrame({"method": rng.choice(["fedavg", "fedska", "local"], 40), "round": rng.integers(0, 3, 40),
                            "mae": rng.random(40), "mape": rng.random(40), "rmse": rng.random(40)})
    traffic.loc[3, "mae"] = np.nan
    last = traffic[traffic["round"] == traffic["round"].max()]
    measured = fedska.table2_files(traffic)
    assert list(measured) == ["table2_metr_la.csv"]
    assert measured["table2_metr_la.csv"].to_csv(index=False) == \
        last.groupby("method")[["mae", "mape", "rmse"]].mean().to_csv()
    paper = fedska.table2_files(None)
    assert list(paper) == ["table2_metr_la_paper.csv"]
    assert paper["table2_metr_la_paper.csv"].to_csv(index=False) == fedska.table2_paper().to_csv()


def test_overlap_table_writes_the_indexed_tables_csv():
    rows = [{"q": q, "method": m, "partition": p, "seed": 0, "client": c, "round": r, "accuracy": float(c + r + len(p)),
             "num_samples": 10, "evaluate": "local"}
            for q in (2, 5) for m in ("fedavg", "local") for p in ("shards", "shards_overlapping")
            for c in range(4) for r in (0, 1)]
    overlap = pd.DataFrame(rows)
    summary = fedska.metrics.final_summary(overlap, value="accuracy", by=("q", "method", "partition"))
    indexed = summary.pivot_table(index=["q", "method"], columns="partition", values="mean")
    indexed["overlapping - disjoint"] = indexed["shards_overlapping"] - indexed["shards"]
    assert fedska.overlap_table(overlap).to_csv(index=False) == indexed.to_csv()
