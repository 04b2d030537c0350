"""Open the built report in headless Chromium and list what a reader would find broken.

On every page: a console error (a script error, a resource that failed to load), an image that did not load
(``naturalWidth == 0``), an internal link whose file or ``#anchor`` does not exist. On the pages that must
show them (a paper's page, :mod:`gflkit.report.pages`): no claims table, no figure. Uses Debian's ``chromium`` and
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


def check_site(site: Path, claims_pages: Iterable[str] = (), figure_pages: Iterable[str] = (),
               pages: Iterable[Path] | None = None) -> list[str]:
    """Every problem found on the site's pages (all ``*.html`` under ``site`` unless ``pages`` are given);
    ``claims_pages`` / ``figure_pages`` (paths relative to ``site``) must show a claims table / a figure."""
    site = site.resolve()
    claims, figures = set(claims_pages), set(figure_pages)
    chosen = sorted(pages) if pages is not None else sorted(site.rglob("*.html"))
    problems = [f"{page}: page missing" for page in sorted(claims | figures) if not (site / page).is_file()]
    with headless_chromium() as driver:
        for page in chosen:
            report = visit(driver, site, page)
            problems += report.problems(report.page in claims, report.page in figures)
    return problems
