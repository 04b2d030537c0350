"""FedVGAE's file contract: what :func:`gflkit.papers.fedvgae.derive` publishes from the records of the sections
that ran."""
import pandas as pd
import pytest

from gflkit.papers import fedvgae


def records(method, best_round, setting=None, clients=3):
    """Link-prediction records of one run on Cora: the AUC grows with the round and the client, the validation AUC
    peaks at ``best_round``."""
    rows = [{"dataset": "cora", "method": method, "seed": 0, "client": client, "round": round_,
             "auc": 50.0 + 10 * round_ + client, "ap": 40.0 + round_, "val_auc": 90.0 if round_ == best_round else 10.0,
             "val_ap": 50.0, **({"setting": setting} if setting else {})}
            for round_ in (1, 2, 3) for client in range(clients)]
    return pd.DataFrame(rows)


@pytest.fixture
def link():
    return pd.concat([records("fedavg", 2), records("fedvgae", 3)], ignore_index=True)


@pytest.fixture
def components():
    return pd.concat([records("fedvgae", best, name) for name, best in zip(fedvgae.COMPONENTS, (3, 2, 2, 1))],
                     ignore_index=True)


def test_derive_names_the_files_of_the_sections_that_ran_and_always_the_clients_and_claims(link, components):
    tables = fedvgae.derive("smoke", link=link, components=components)
    assert list(tables) == ["table3_records.csv", "table3_paper_vs_measured.csv", "table6_components.csv",
                            "clients.csv", "claims.csv"]
    assert tables["table3_records.csv"] is link
    assert set(tables["clients.csv"]["section"]) == {"table3", "table6"}
    assert len(tables["claims.csv"]) == 5
    assert list(fedvgae.derive("smoke")) == ["clients.csv", "claims.csv"]


def test_table3_is_the_mean_over_clients_at_each_runs_best_validation_round(link):
    table = fedvgae.derive("smoke", link=link)["table3_paper_vs_measured.csv"]
    measured = table.set_index(["method", "metric"])["measured"]
    assert measured[("fedavg", "auc")] == pytest.approx(71.0) and measured[("fedvgae", "auc")] == pytest.approx(81.0)
    assert measured[("fedvgae", "ap")] == pytest.approx(43.0)
    assert list(table.columns) == ["dataset", "method", "metric", "measured", "paper", "difference"]


def test_table6_gives_each_settings_difference_to_the_full_method(components):
    table = fedvgae.derive("smoke", components=components)["table6_components.csv"].set_index("setting")
    assert table.loc["full", "delta"] == 0 and table.loc["without_both", "delta"] == pytest.approx(-20.0)
    assert set(table["dataset"]) == {"cora"} and set(table["method"]) == {"fedvgae"}


def test_degeneracy_checks_are_published_only_when_they_have_rows(link):
    checks = pd.DataFrame([{"task": "link_prediction", "dataset": "cora", "seed": 0, "method": "gcfl",
                            "clusters_at_end": 2, "first_split_round": 2}])
    assert "degeneracy_checks.csv" in fedvgae.derive("smoke", link=link, checks=checks)
    assert "degeneracy_checks.csv" not in fedvgae.derive("smoke", link=link, checks=pd.DataFrame())
