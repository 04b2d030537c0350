"""The JGESR notebook's file contract: :func:`gflkit.papers.jgesr.derive` and its section helpers, on made-up records."""
import numpy as np
import pandas as pd

from gflkit.outputs import write_outputs
from gflkit.papers import jgesr


def _records() -> pd.DataFrame:
    """Table 1's records as a grid writes them: every method, noise level, seed, client and round."""
    rng = np.random.default_rng(3)
    return pd.DataFrame([{"method": method, "seed": seed, "evaluate": "server", "s": s, "missing": 0.0,
                          "client": client, "round": round_, "accuracy": float(rng.uniform(60, 100)),
                          "accuracy_local": float(rng.uniform(60, 100)), "num_samples": 30}
                         for method in jgesr.METHODS for s in (0.1, 0.2) for seed in (0, 1) for client in range(4)
                         for round_ in (1, 2)])


def _derived(extra=None) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    records = _records()
    pdca = records[(records["method"] == "pdca") & (records["s"] == 0.1)]
    missing = pd.concat([pdca.assign(missing=rate, accuracy=pdca["accuracy"] - 30 * rate) for rate in (0.0, 0.1)])
    objective = pd.DataFrame({"seed": 0, "iteration": range(3), "objective": [3.0, 2.0, 2.0]})
    correlation = pd.DataFrame([{"seed": 0, "pairs": 6, "pearson_r": 0.5}])
    same_matrix = pd.DataFrame([{"solver": label, "F": 1.0} for label in jgesr.SAME_MATRIX_SOLVERS])
    return jgesr.derive(records, missing, objective, correlation, same_matrix, "paper1", extra=extra), records


def test_derive_names_every_file_the_notebook_publishes_in_order():
    tables, records = _derived()
    assert list(tables) == ["table1_records.csv", "table1_clients.csv", "table1.csv", "table1_paper_vs_measured.csv",
                            "table1_protocols.csv", "figure4_missing.csv", "solvers_same_matrix.csv",
                            "figure4_clients.csv", "pdca_objective.csv", "learned_graph_correlation.csv", "claims.csv"]
    assert set(jgesr.CLAIM_FILES.values()) <= set(tables)
    assert tables["table1_records.csv"] is records
    assert list(tables["table1_clients.csv"].columns) == jgesr.CLIENT_COLUMNS
    assert list(tables["figure4_clients.csv"].columns) == jgesr.MISSING_COLUMNS
    assert tables["figure4_missing.csv"]["drop"].tolist() == [0.0, 3.0]
    assert tables["table1_paper_vs_measured.csv"].query("method == 'pdca'")["paper"].notna().all()


def test_the_section_helpers_give_the_frames_derive_publishes():
    tables, records = _derived()
    for name, frame in jgesr.table1_tables(records).items():
        pd.testing.assert_frame_equal(frame, tables[name])


def test_an_extra_dataset_adds_its_comparison_with_the_paper():
    records = _records()
    tables, _ = _derived(extra={"cifar10": records})
    comparison = tables["table1_cifar10_paper_vs_measured.csv"]
    pd.testing.assert_frame_equal(comparison, jgesr.extra_comparison("cifar10", records))
    assert set(comparison["setting"]) == {"s_0.1", "s_0.2"}
    assert comparison.query("method == 'pdca'")["paper"].notna().all()


def test_the_written_claims_are_what_a_committed_folder_decides(tmp_path):
    tables, _ = _derived()
    write_outputs(tmp_path, tables)
    pd.testing.assert_frame_equal(jgesr.decide_from_clients(tmp_path, "paper1"), tables["claims.csv"])
