"""The SFL notebook's file contract (:func:`gflkit.papers.sfl.derive` and its section helpers), checked against
the committed ``ci`` results folder, which the notebook wrote."""
from pathlib import Path

import pandas as pd
import pytest

from gflkit.papers import sfl

CI = Path(__file__).resolve().parents[1] / "docs" / "results" / "sfl_ci"


@pytest.mark.parametrize("file", ["table3_paper_vs_measured.csv", "table4_paper_vs_measured.csv", "graph_mixing.csv"])
def test_the_labelled_tables_are_the_committed_files_byte_for_byte(file):
    """The tables whose rows are named by their first, unnamed column (``to_csv`` with the index, as the notebook
    wrote them) come out of the helpers as the same bytes from the committed per-client rows."""
    tables = {**sfl.table3_tables(pd.read_csv(CI / "table3_clients.csv"), sfl.TABLE3),
              **sfl.table4_tables(pd.read_csv(CI / "table4_clients.csv"), sfl.TABLE4),
              **sfl.mixing_tables(pd.read_csv(CI / "graph_mixing_clients.csv"))}
    assert tables[file].to_csv(index=False) == (CI / file).read_text()


def test_derive_adds_the_claims_decided_as_a_committed_folder_is():
    frames = {file: pd.read_csv(CI / file) for file in sfl.CLAIM_FILES.values()}
    tables = sfl.derive(frames, "ci")
    assert list(tables) == [*frames, "claims.csv"]
    pd.testing.assert_frame_equal(tables["claims.csv"], sfl.decide_from_clients(CI, "ci"))
    assert tables["claims.csv"].to_csv(index=False) == (CI / "claims.csv").read_text()


def test_a_section_left_out_has_no_files_and_its_claims_are_not_run():
    tables = sfl.derive(sfl.table3_tables(pd.read_csv(CI / "table3_clients.csv"), sfl.TABLE3), "ci")
    assert set(tables) == {"table3_records.csv", "table3_clients.csv", "table3_paper_vs_measured.csv", "claims.csv"}
    verdicts = tables["claims.csv"].set_index("claim")["verdict"]
    assert verdicts[verdicts.index.str.contains("Table 4|Table 5|authors' code")].eq("not run").all()


def test_timing_has_the_committed_columns_and_ratios_to_fedavg():
    rounds = pd.DataFrame({"training_s": [1.0, 2.0, 3.0], "aggregation_s": [0.01, 0.02, 0.03]})
    timing = sfl.timing_tables([("fedavg", None, rounds), ("sfl", 3, rounds.assign(aggregation_s=[0.5, 0.1, 0.2]))])
    timing = timing["table5_timing.csv"]
    assert list(timing.columns) == list(pd.read_csv(CI / "table5_timing.csv").columns)
    sfl_row = timing.set_index("method").loc["sfl"]
    assert sfl_row["aggregation_s"] == 0.2 and sfl_row["aggregation_vs_fedavg"] == pytest.approx(10.0)
    assert sfl_row["aggregation_share_min_%"] == pytest.approx(100 * 0.1 / 2.1)
    assert sfl_row["aggregation_share_max_%"] == pytest.approx(100 * 0.5 / 1.5)


def test_table2_without_traffic_runs_is_the_papers_numbers():
    assert sfl.table2_tables(None)["table2_paper.csv"].to_csv(index=False) == (CI / "table2_paper.csv").read_text()


def test_by_label_undoes_index_column():
    frame = pd.DataFrame({"paper": [1.0, 2.0]}, index=["SFL", "SFL*"])
    pd.testing.assert_frame_equal(sfl.by_label(sfl.index_column(frame)), frame)
