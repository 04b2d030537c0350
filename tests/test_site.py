"""The report site: built offline with warnings as errors, then read in headless Chromium as a reader would."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gflkit.report.browser import browser_paths, check_site, link_resolves
from gflkit.report.pages import PAGES, VERDICTS, all_summaries
from gflkit.report.provenance import table_cells

REPO = Path(__file__).resolve().parents[1]
needs_browser = pytest.mark.skipif(browser_paths() is None,
                                   reason="Debian's chromium and chromium-driver are not installed (.ci/run installs them)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as `make report` builds it (sphinx -W: any warning fails the build)."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "docs", str(out)],
                           cwd=REPO, capture_output=True, text=True)
    assert build.returncode == 0, f"the site does not build:\n{build.stderr[-4000:]}"
    return out


def test_every_page_is_built(site):
    for page in PAGES:
        assert (site / page.html).is_file(), page.html
    assert (site / "index.html").is_file() and (site / "api.html").is_file() and (site / "architecture.html").is_file()
    assert list((site / "_static" / "mathjax").glob("tex-chtml.js")), "MathJax must be served by the site itself"


def test_landing_page_counts_and_seeds_equal_the_csvs(site):
    """Each folder's seeds and verdict counts on the landing page are its CSVs'; a superseded folder shows no
    verdicts of its own but names the folder that decides them."""
    (cells,) = [t for t in table_cells((site / "index.html").read_text()) if "quickstart_ci" in t]
    width = 3 + len(VERDICTS) + 2  # folder, seeds, gap, the verdicts, other, commit
    shown = {row[0]: [row[1], *row[3:-1]] for row in (cells[i:i + width] for i in range(0, len(cells), width))}
    expected = {row.folder: [str(row.seeds)] + ([str(row.verdicts[v]) for v in VERDICTS] + [str(row.other_verdicts)]
                                                if row.superseded_by is None else
                                                ["—"] * len(VERDICTS) + [f"superseded by {row.superseded_by}"])
                for row in all_summaries()}
    assert shown == expected
    assert shown["benchmark_paper"][0] == "3" and shown["benchmark_paper1"][-1] == "superseded by benchmark_paper"


def test_api_reference_renders_equations_and_links_to_source(site):
    page = (site / "_api" / "gflkit.graphs.gcn.html").read_text()
    assert 'class="math' in page and "_modules/gflkit/graphs/gcn.html" in page


def test_link_check_flags_missing_files_and_anchors(tmp_path):
    (tmp_path / "a.html").write_text('<h1 id="top">x</h1>')
    page = tmp_path / "b.html"
    page.write_text("")
    assert link_resolves(page, "a.html#top") and link_resolves(page, "https://example.org/x")
    assert not link_resolves(page, "a.html#nowhere") and not link_resolves(page, "missing.html")


@needs_browser
def test_browser_finds_a_missing_figure_and_a_console_error(tmp_path):
    (tmp_path / "papers").mkdir()
    page = tmp_path / "papers" / "x.html"
    page.write_text('<table class="gflkit-claims"></table><figure class="gflkit-figure"><img src="gone.png"></figure>'
                    '<script>console.error("boom")</script><a href="nowhere.html">n</a>')
    problems = check_site(tmp_path, ["papers/x.html"], ["papers/x.html"])
    assert any("image not loaded" in p for p in problems) and any("no figure" in p for p in problems)
    assert any("boom" in p for p in problems) and any("broken link nowhere.html" in p for p in problems)


@needs_browser
def test_browser_finds_what_is_cut_off_or_unlabelled(tmp_path):
    page = tmp_path / "index.html"
    page.write_text('<article style="width: 600px"><div style="width: 3000px">wide</div>'
                    '<div style="overflow-x: auto"><div style="width: 3000px">scrolls</div></div>'
                    '<div style="overflow-x: auto"><table class="gflkit-claims" style="width: 3000px"><tr><td>claims'
                    '</td></tr></table></div><h2 style="margin-right: -8px">a heading bleeding into the margin</h2>'
                    '<table style="width: 100px; table-layout: fixed"><tr><td style="overflow: hidden">'
                    '<span class="gflkit-verdict" style="white-space: nowrap; display: inline-block">not reproduced at all'
                    '</span></td></tr></table><figure class="gflkit-figure"><img src="x.png"></figure></article>')
    problems = check_site(tmp_path, pages=[], read_pages=["index.html"], screenshots=tmp_path / "shots")
    assert [p for p in problems if "wider than the content column" in p and '"wide"' in p]
    assert not [p for p in problems if '"scrolls"' in p], "a box that scrolls holds its content"
    assert [p for p in problems if '"claims"' in p], "but a claims table must fit, not scroll"
    assert not [p for p in problems if '"a heading' in p], "the theme's heading bleed is no overflow"
    assert [p for p in problems if "badge cut off" in p] and [p for p in problems if "without a caption" in p]
    assert sorted(shot.name for shot in (tmp_path / "shots").iterdir()) == ["index-1400.png", "index-800.png"]


@needs_browser
def test_every_page_reads_cleanly_in_chromium(site, tmp_path_factory):
    """No console error, broken image or link anywhere; on the landing and paper pages, at 1400 and 800 px,
    nothing wider than the content column, no verdict badge cut off, no figure without a caption (screenshots
    of each are kept under pytest's temporary folder, ``screenshots*``)."""
    screenshots = tmp_path_factory.mktemp("screenshots")
    problems = check_site(site, [page.html for page in PAGES if page.claims],
                          [page.html for page in PAGES if page.figures],
                          read_pages=["index.html", *(page.html for page in PAGES)], screenshots=screenshots)
    assert not problems, "\n".join(problems[:40])
    assert len(list(screenshots.glob("*.png"))) == 2 * (1 + len(PAGES))
