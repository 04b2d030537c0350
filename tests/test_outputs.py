"""A notebook's one write: its tables and figures, checked before anything is written."""
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from PIL import Image

from gflkit.outputs import png_bytes, write_outputs


@pytest.fixture
def figure():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    yield fig
    plt.close(fig)


def test_tables_and_figures_are_written_under_their_names(tmp_path, figure):
    tables = {"table.csv": pd.DataFrame({"method": ["fedavg"], "mean": [81.25]}),
              "claims.csv": pd.DataFrame({"id": ["a"], "verdict": ["reproduced"]})}
    written = write_outputs(tmp_path / "new", tables, {"curve.png": figure})
    assert [p.name for p in written] == ["table.csv", "claims.csv", "curve.png"]
    assert (tmp_path / "new" / "table.csv").read_text() == "method,mean\nfedavg,81.25\n"
    assert (tmp_path / "new" / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("tables, figures, message", [
    ({"../table.csv": pd.DataFrame()}, {}, "plain file name ending in '.csv'"),
    ({"table.txt": pd.DataFrame()}, {}, "ending in '.csv'"),
    ({".hidden.csv": pd.DataFrame()}, {}, "not hidden"),
    ({"table.csv": pd.DataFrame()}, {"sub/curve.png": None}, "plain file name ending in '.png'"),
])
def test_a_bad_name_writes_nothing(tmp_path, figure, tables, figures, message):
    figures = {name: figure for name in figures}
    with pytest.raises(ValueError, match=message):
        write_outputs(tmp_path, tables, figures)
    assert list(tmp_path.iterdir()) == []


def test_a_replaced_table_keeps_no_temporary_file(tmp_path):
    write_outputs(tmp_path, {"table.csv": pd.DataFrame({"a": [1]})})
    write_outputs(tmp_path, {"table.csv": pd.DataFrame({"a": [2]})})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]
    assert (tmp_path / "table.csv").read_text() == "a\n2\n"


def test_the_same_figure_gives_the_same_bytes_and_keeps_its_source(figure):
    assert png_bytes(figure, "digest") == png_bytes(figure, "digest")
    assert Image.open(io.BytesIO(png_bytes(figure, "digest"))).text["Source"] == "digest"
