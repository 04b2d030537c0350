"""FedCG's claims decided on its published tables (``fedcg.decide``) and read back from a committed results
folder's CSVs (``fedcg.decide_from_clients``)."""
from pathlib import Path

import pandas as pd
import pytest

from gflkit.papers import committed_csvs, fedcg

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
#: the one cell of the ci folder's claims that no committed CSV holds: the share of faces whose oracle domain
#: predicts smiling, which the archived notebook prints (87.5 %)
ORACLE_SHARE = "the domain alone predicts smiling on {} % of the faces"


def test_the_ci_claims_are_decided_from_the_committed_csvs_but_for_the_oracle_domains_share():
    folder = RESULTS / "fedcg_ci"
    committed = (folder / "claims.csv").read_text()
    decided = fedcg.decide_from_clients(folder, "ci").to_csv(index=False)
    differing = [(ours, theirs) for ours, theirs in zip(decided.splitlines(), committed.splitlines()) if ours != theirs]
    assert len(decided.splitlines()) == len(committed.splitlines())
    assert [ours.split(",")[0] for ours, _ in differing] == ["attributes_low_correlation"]
    assert differing[0][0].replace(ORACLE_SHARE.format("nan"), ORACLE_SHARE.format("87.5")) == differing[0][1]
    frames = committed_csvs(folder, fedcg.CLAIM_FILES, fedcg.REQUIRED_CLAIM_FILES, "fedcg")
    assert fedcg.decide(frames, "ci", domain_only=87.5).to_csv(index=False) == committed, "given the share, every byte"


def test_table5_may_name_its_methods_by_label_or_by_variant():
    frames = committed_csvs(RESULTS / "fedcg_ci", fedcg.CLAIM_FILES, fedcg.REQUIRED_CLAIM_FILES, "fedcg")
    variants = {label: variant for variant, label in fedcg.LABELS.items()}
    by_variant = {**frames, "table5": frames["table5"].assign(method=frames["table5"]["method"].map(variants))}
    pd.testing.assert_frame_equal(fedcg.decide(by_variant, "ci"), fedcg.decide(frames, "ci"))


def test_the_paper_folder_lacks_the_clients_and_lambda_its_claims_need():
    with pytest.raises(FileNotFoundError, match=r"\['clients.csv', 'lambda.csv'\], which the fedcg notebook writes"):
        fedcg.decide_from_clients(RESULTS / "fedcg_paper", "paper")


@pytest.mark.parametrize("frame", [pd.DataFrame({"value": [1.5, 2.0]}, index=pd.Index(["a", "b"], name="dataset")),
                                   pd.DataFrame({"value": [1.5]}, index=["a"]), pd.DataFrame()])
def test_a_published_table_keeps_its_index_as_its_first_column(frame):
    assert fedcg._with_index(frame).to_csv(index=False) == frame.to_csv()
