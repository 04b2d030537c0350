"""Open the built report in headless Chromium and list what a reader would find broken.

On every page: a console error (a script error, a resource that failed to load), an image that did not load
(``naturalWidth == 0``), an internal link whose file or ``#anchor`` does not exist. On the pages that must
show them (a paper's page, :mod:`gflkit.report.pages`): no claims table, no figure. On the pages a reader
reads (the landing page and the paper pages), at each window width of :data:`WIDTHS`: an element wider than
the content column (outside a box that scrolls), a verdict badge cut off by its cell, a figure without a
caption; a screenshot of each such page at each width is kept where the caller asks. Uses Debian's ``chromium`` and
``chromium-driver`` through Selenium, with no network: the site must be complete on its own.
"""
from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"
ANCHOR = re.compile(r"""\sid=["']([^"']+)["']""")

LINKS_AND_IMAGES = """
return {
  links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href')),
  broken: [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                              .map(i => (i.getAttribute('alt') || '') + ' ' + (i.getAttribute('src') || '').slice(0, 80)),
  claims: document.querySelectorAll('table.gflkit-claims').length,
  figures: [...document.querySelectorAll('figure.gflkit-figure img')].filter(i => i.naturalWidth > 0).length,
};
"""

#: pixels an element may reach past the content column: the theme's headings bleed 8 px on each side by
#: design (room for their anchor link), which a reader does not see as overflow
BLEED = 10
#: the tables that must fit the column, never scroll: the landing table and the claims tables
MUST_FIT = ("table.gflkit-summary", "table.gflkit-claims")
#: what a reader would see cut off or unlabelled: elements past the content column's right edge by more than
#: :data:`BLEED` (unless a scrolling or clipping box holds them, except for :data:`MUST_FIT`), badges wider
#: than their text box or their cell, captionless figures
LAYOUT = f"const BLEED = {BLEED};\nconst FIT = '{', '.join(MUST_FIT)}';\n" + """
const main = document.querySelector('article') || document.body;
const edge = main.getBoundingClientRect().right + BLEED;
const held = e => {
  for (let p = e.parentElement; p && p !== main; p = p.parentElement) {
    if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true;
  }
  return false;
};
const name = e => e.tagName.toLowerCase() + (e.className && typeof e.className === 'string' ? '.' + e.className.split(' ')[0] : '')
                   + ' "' + (e.textContent || '').trim().slice(0, 40) + '"';
return {
  overflow: [...main.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > edge
                                                     && (!held(e) || e.matches(FIT))).map(name),
  badges: [...document.querySelectorAll('.gflkit-verdict')].filter(b => {
    const cell = b.closest('td, th');
    const r = b.getBoundingClientRect();
    const c = cell ? cell.getBoundingClientRect() : r;
    return b.scrollWidth > b.clientWidth + 1 || r.right > c.right + 1 || r.left < c.left - 1;
  }).map(b => b.textContent),
  uncaptioned: [...document.querySelectorAll('figure.gflkit-figure')]
                 .filter(f => !(f.querySelector('figcaption') || {textContent: ''}).textContent.trim()).length,
};
"""
#: the window widths the layout is checked at: a laptop screen and a narrow window
WIDTHS = (1400, 800)


def browser_paths() -> tuple[str, str] | None:
    """``(chromium, chromedriver)`` when both are installed, else None."""
    browser = next((path for name in CHROMIUM for path in [shutil.which(name)] if path), None)
    driver = shutil.which(DRIVER)
    return (browser, driver) if browser and driver else None


@contextmanager
def headless_chromium() -> Iterator[Any]:
    """A Selenium driver for headless Chromium that records the browser console."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = browser_paths()
    if paths is None:
        raise RuntimeError("headless Chromium needs Debian's chromium and chromium-driver: "
                           "apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--allow-file-access-from-files"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(paths[1]), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@dataclass(frozen=True)
class PageReport:
    """What one page showed the browser."""

    page: str
    console_errors: list[str]
    broken_images: list[str]
    broken_links: list[str]
    claims_tables: int
    figures: int

    def problems(self, needs_claims: bool = False, needs_figure: bool = False) -> list[str]:
        """Each problem of this page as a line (``needs_claims`` / ``needs_figure``: the page must show a
        claims table / a loaded figure)."""
        lines = [f"{self.page}: console error {message}" for message in self.console_errors]
        lines += [f"{self.page}: image not loaded: {image}" for image in self.broken_images]
        lines += [f"{self.page}: broken link {link}" for link in self.broken_links]
        if needs_claims and not self.claims_tables:
            lines.append(f"{self.page}: no claims table")
        if needs_figure and not self.figures:
            lines.append(f"{self.page}: no figure")
        return lines


def visit(driver: Any, site: Path, page: Path) -> PageReport:
    """Load ``page`` of the site in ``driver`` and report it."""
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(page.resolve().as_uri())
    found = driver.execute_script(LINKS_AND_IMAGES)
    errors = [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    return PageReport(str(page.relative_to(site)), errors, found["broken"],
                      [link for link in found["links"] if not link_resolves(page, link)],
                      found["claims"], found["figures"])


def link_resolves(page: Path, href: str) -> bool:
    """Whether an internal ``href`` of ``page`` names an existing file (and anchor); external links pass."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
        return True
    target = (page.parent / unquote(parts.path)).resolve() if parts.path else page.resolve()
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return False
    return not parts.fragment or unquote(parts.fragment) in _anchors(target)


@lru_cache(maxsize=None)
def _anchors(page: Path) -> frozenset[str]:
    return frozenset(ANCHOR.findall(page.read_text(errors="replace")))


def layout_problems(driver: Any, site: Path, page: Path, screenshots: Path | None = None) -> list[str]:
    """What :data:`LAYOUT` finds on ``page`` at each width of :data:`WIDTHS`, one line each; with
    ``screenshots``, a PNG of the page at each width is saved there (``<page>-<width>.png``)."""
    problems = []
    name = str(page.relative_to(site))
    for width in WIDTHS:
        driver.set_window_size(width, 1000)
        driver.get(page.resolve().as_uri())
        found = driver.execute_script(LAYOUT)
        problems += [f"{name} at {width} px: wider than the content column: {e}" for e in found["overflow"][:5]]
        problems += [f"{name} at {width} px: verdict badge cut off: {b!r}" for b in found["badges"][:5]]
        if found["uncaptioned"]:
            problems.append(f"{name} at {width} px: {found['uncaptioned']} figure(s) without a caption")
        if screenshots is not None:
            screenshots.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(screenshots / f"{name.replace('/', '_')[:-5]}-{width}.png"))
    return problems


def check_site(site: Path, claims_pages: Iterable[str] = (), figure_pages: Iterable[str] = (),
               pages: Iterable[Path] | None = None, read_pages: Iterable[str] = (),
               screenshots: Path | None = None) -> list[str]:
    """Every problem found on the site's pages (all ``*.html`` under ``site`` unless ``pages`` are given);
    ``claims_pages`` / ``figure_pages`` (paths relative to ``site``) must show a claims table / a figure; the
    layout of ``read_pages`` is checked at every width (:func:`layout_problems`, screenshots into ``screenshots``)."""
    site = site.resolve()
    claims, figures, read = set(claims_pages), set(figure_pages), set(read_pages)
    chosen = sorted(pages) if pages is not None else sorted(site.rglob("*.html"))
    problems = [f"{page}: page missing" for page in sorted(claims | figures | read) if not (site / page).is_file()]
    with headless_chromium() as driver:
        for page in chosen:
            report = visit(driver, site, page)
            problems += report.problems(report.page in claims, report.page in figures)
        for page in sorted(read):
            if (site / page).is_file():
                problems += layout_problems(driver, site, site / page, screenshots)
    return problems
