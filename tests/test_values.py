"""Numbers in the report's prose: read from a committed CSV, or marked as the paper's, never typed by hand."""
import re
from pathlib import Path

import pytest

from gflkit.report.values import ValueReference, diary_lines, hand_typed_numbers


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "jgesr_paper1"
    folder.mkdir()
    (folder / "table1.csv").write_text("s,method,mean\n0.1,pdca,89.2345\n0.2,pdca,83.6\n0.1,fedavg,72.07\n")
    (folder / "claims.csv").write_text("id,verdict\npdca_best,inconclusive\n")
    (folder / "ranks.csv").write_text("setting,seed 0\nshards q=2,3.5\n")
    return tmp_path


def test_a_reference_reads_one_cell_with_its_rounding(results):
    assert ValueReference.parse("jgesr_paper1/table1.csv mean s=0.1 method=pdca").read(results) == "89.23"
    assert ValueReference.parse("jgesr_paper1/table1.csv mean s=0.2 method=pdca :.1f").read(results) == "83.6"
    assert ValueReference.parse("jgesr_paper1/claims.csv verdict id=pdca_best").read(results) == "inconclusive"
    assert ValueReference.parse('jgesr_paper1/ranks.csv "seed 0" setting="shards q=2" :.1f').read(results) == "3.5"


@pytest.mark.parametrize("text, message", [
    ("jgesr_paper1/table1.csv mean s=0.1", "selects 2 rows"),
    ("jgesr_paper1/table1.csv mean s=0.3 method=pdca", "selects 0 rows"),
    ("jgesr_paper1/table1.csv median s=0.1 method=pdca", r"no column\(s\) \['median'\]"),
    ("jgesr_paper1/table9.csv mean s=0.1", "no such committed CSV"),
])
def test_a_reference_that_names_no_single_cell_says_why(results, text, message):
    with pytest.raises(ValueError, match=message):
        ValueReference.parse(text).read(results)


@pytest.mark.parametrize("text", ["table1.csv", "mean s=0.1", "jgesr_paper1/table1.csv mean s0.1",
                                  'jgesr_paper1/table1.csv "mean s=0.1'])
def test_a_malformed_reference_shows_the_form_to_write(text):
    with pytest.raises(ValueError, match="write 'FOLDER/FILE.csv|column=value|close every quote"):
        ValueReference.parse(text)


def test_only_decimals_outside_code_math_roles_and_blocks_are_hand_typed():
    page = "\n".join([
        "PDCA reaches 89.23 % here,",                                     # 2: typed by hand
        "{gflkit-value}`jgesr_paper1/table1.csv mean s=0.1 method=pdca` and {gflkit-paper}`95.17`,",
        "with `lr = 0.01` and $\\alpha = 0.05$, see [the note](v1.2.html).",
        "```{gflkit-table} jgesr_paper1/table1.csv",
        "12.5",
        "```",
        "| fedavg | 72.07 |",                                                # 8: typed by hand
        "version 2 of 3, −3.20 points",                                     # 9: typed by hand
    ])
    assert hand_typed_numbers("\n" + page) == [(2, "89.23"), (8, "72.07"), (9, "−3.20")]


def test_a_dated_or_narrated_line_is_history():
    page = "PDCA is inconclusive.\nRe-measured on 2026-11-26 in the tenth session.\n`2026-11-26` in code is fine."
    assert [line for line, _ in diary_lines(page)] == [2, 2, 2]


DOCS = Path(__file__).resolve().parents[1] / "docs"
PAGES = sorted(DOCS.glob("papers/*.md")) + [DOCS / "changelog.md", DOCS / "index.md"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_a_page_types_no_measured_number_and_tells_no_history(page):
    """Every decimal of a page is read from a committed CSV or marked as the paper's, and every reference
    resolves; dated history belongs in the changelog page, which quotes no measured number either."""
    text = page.read_text()
    assert hand_typed_numbers(text) == [], f"{page.name}: hand-typed numbers (line, number)"
    if page.name != "changelog.md":  # the one page whose entries are dated
        assert diary_lines(text) == [], f"{page.name}: history (line, word) belongs in docs/changelog.md"
    for reference in re.findall(r"\{gflkit-value\}`([^`]*)`", text):
        ValueReference.parse(reference).read(DOCS / "results")
