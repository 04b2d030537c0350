"""Sphinx directives that put the committed CSVs and the archived notebooks' figures on the report's pages.

Every number these directives show is read from ``docs/results/`` when the site is built, so a page and the
CSVs cannot disagree:

* ``gflkit-summary`` (optional argument: a page name) — the landing table (:mod:`gflkit.report.pages`):
  per result folder (named after its paper and profile, linking to its page), its seeds, mean absolute difference ours − paper and verdict counts;
* ``gflkit-claims FOLDER`` — a folder's claims CSV, the verdict of each claim as a coloured badge;
* ``gflkit-paper-vs-measured FOLDER`` — each paper-vs-measured CSV of a folder, folded, with its mean gap;
* ``gflkit-figures FOLDER`` — every figure the folder's archived notebook drew, captioned with the file name
  the notebook saved it under; for a folder without an archived notebook (a paper-budget folder), the figures
  its paper declares (:data:`gflkit.catalog.PAPERS`), drawn from its CSVs by ``gflkit figures``;
* ``gflkit-table FILE`` (option ``:percent: a, b``) — one CSV under ``docs/results/`` as a table;

and two roles for numbers in prose (:mod:`gflkit.report.values`):

* ``{gflkit-value}`FOLDER/FILE.csv COLUMN key=value ... [:.2f]``` — one cell of a committed CSV;
* ``{gflkit-paper}`95.17``` — a number the paper reports, shown marked as the paper's.
"""
from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
from docutils import nodes
from docutils.parsers.rst import Directive, directives

from gflkit.report.pages import (PAGES, VERDICTS, Summary, all_summaries, claims_file, committed_figures,
                                 paper_gaps, summarize, verdict_column, verdict_css)
from gflkit.report.values import ValueReference

#: where a notebook names a figure it saves: ``figures["name.png"] = fig`` (handed to
#: :func:`gflkit.outputs.write_outputs`), or ``save_figure(fig, results / "name.png")`` in older archives
SAVED_FIGURE = re.compile(r"(?:\bfigures\[\s*|save_figure\([^,]+,\s*results\s*/\s*)(?:f?\"([^\"]+)\"|f?'([^']+)')")


def _raw(markup: str) -> list[nodes.Node]:
    return [nodes.raw("", markup, format="html")]


def _badge(verdict: str) -> str:
    css = verdict_css(verdict) if verdict in VERDICTS else "other"
    return f'<span class="gflkit-verdict gflkit-{css}">{html.escape(verdict)}</span>'


def _html_table(frame: pd.DataFrame, classes: str = "gflkit-table", html_columns: tuple[str, ...] = (),
                scroll: bool = True) -> str:
    head = "".join(f"<th>{column if column in html_columns else html.escape(_label(column))}</th>"
                   for column in frame.columns)
    rows = []
    for _, row in frame.iterrows():
        cells = "".join(f"<td>{value if column in html_columns else html.escape(_text(value))}</td>"
                        for column, value in row.items())
        rows.append(f"<tr>{cells}</tr>")
    table = f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    return f'<div class="gflkit-scroll">{table}</div>' if scroll else table


def _label(column: Any) -> str:
    return "" if str(column).startswith("Unnamed: ") else str(column)  # a CSV's unnamed index column


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return "—"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


class _FolderDirective(Directive):
    """A directive whose argument names something under ``docs/results/`` (the ``results`` folder beside
    the Sphinx source's pages)."""

    required_arguments = 1

    def path(self, relative: str) -> Path:
        env = self.state.document.settings.env
        path = Path(env.srcdir) / "results" / relative
        if not path.exists():
            raise self.error(f"{self.name}: {path} does not exist (is the result folder committed?)")
        env.note_dependency(str(path))
        return path


class SummaryDirective(Directive):
    """The landing table: one row per committed result folder (of one page when a page name is given)."""

    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        env = self.state.document.settings.env
        results = Path(env.srcdir) / "results"
        rows = [row for row in all_summaries(results) if not self.arguments or row.page == self.arguments[0]]
        if not rows:
            raise self.error(f"gflkit-summary: no result folder for page {self.arguments}")
        for folder in results.iterdir():
            env.note_dependency(str(folder))
        frame = pd.DataFrame([_summary_row(row, env.docname) for row in rows])
        return _raw(_html_table(frame, classes="gflkit-table gflkit-summary",
                                html_columns=("result folder", *(_badge(v) for v in VERDICTS),
                                              "other (not run)", "commit")))


def _summary_row(row: Summary, docname: str) -> dict[str, Any]:
    link = "../" * docname.count("/") + f"papers/{row.page}.html"
    gap = f"{row.gap[0]:.2f} ({row.gap[1]} cells)" if row.gap else "—"
    if row.superseded_by:  # its claims are decided again, over more seeds, by the folder that continues it
        counts = {_badge(verdict): "—" for verdict in VERDICTS}
        other = f"superseded by <code>{_breakable(row.superseded_by)}</code>"
    else:
        counts = {_badge(verdict): _count(verdict, row.verdicts[verdict]) for verdict in VERDICTS}
        other = str(row.other_verdicts)
    commit = f"<code>{row.commit[0]}</code><br>{row.commit[1]}" if row.commit else "—"
    return {"result folder": f'<a href="{link}">{_breakable(row.folder)}</a>',
            "seeds": row.seeds or "—", "mean |ours − paper| (points)": gap,
            **counts, "other (not run)": other, "commit": commit}


def _breakable(name: str) -> str:
    """``name`` as HTML that may break after each ``_`` in a narrow column."""
    return "_<wbr>".join(html.escape(part) for part in name.split("_"))


def _count(verdict: str, count: int) -> str:
    css = verdict_css(verdict)
    return f'<span class="gflkit-count gflkit-{css}-count">{count}</span>' if count else "0"


class ClaimsDirective(_FolderDirective):
    """A folder's claims with their verdicts as badges, in four columns that fit the page: the claim (its id,
    and its noise model and evidence folded under it), the verdict, the difference and its interval (one line
    per setting of a claim decided in several)."""

    def run(self) -> list[nodes.Node]:
        folder = self.path(self.arguments[0])
        path = claims_file(folder)
        if path is None:
            raise self.error(f"gflkit-claims: {folder} has no claims CSV")
        self.state.document.settings.env.note_dependency(str(path))
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        column = verdict_column(frame)
        lines = lambda text: html.escape(text).replace("; ", "<br>")  # noqa: E731
        table = pd.DataFrame({
            "claim": [_claim_cell(row, column) for _, row in frame.iterrows()],
            "verdict": frame[column].map(_badge),
            **{name: frame[name].map(lines) for name in ("difference", "interval") if name in frame.columns},
        })
        counts = summarize(folder).verdicts
        caption = (f"<p class=\"gflkit-caption\">{html.escape(path.name)} of <code>docs/results/{folder.name}</code>: "
                   + ", ".join(f"{count} {verdict}" for verdict, count in counts.most_common()) + "</p>")
        return _raw(caption + _html_table(table, classes="gflkit-table gflkit-claims", html_columns=tuple(table.columns),
                                          scroll=False))


def _claim_cell(row: pd.Series, verdict: str) -> str:
    """A claims table's first cell: the statement, then its id and the remaining columns (noise model, evidence,
    …) folded under it."""
    # the benchmark's rows name a method and a setting instead of a sentence
    statement = row["claim"] if "claim" in row else " at ".join(str(row[c]) for c in ("method", "setting") if c in row)
    shown = {"id", "claim", verdict, "difference", "interval", "profile"}
    if "claim" not in row:
        shown |= {"method", "setting"}
    details = [(name, value) for name, value in row.items() if name not in shown and value]
    key = f' <code class="gflkit-claim-id">{html.escape(row["id"])}</code>' if row.get("id") else ""
    folded = "".join(f"<dt>{html.escape(str(name))}</dt><dd>{html.escape(str(value))}</dd>" for name, value in details)
    return (f"{html.escape(str(statement))}{key}"
            + (f"<details><summary>evidence</summary><dl>{folded}</dl></details>" if folded else ""))


class PaperVsMeasuredDirective(_FolderDirective):
    """Each ``*paper_vs_measured.csv`` of a folder as a folded table (two decimals), with its mean gap."""

    def run(self) -> list[nodes.Node]:
        folder = self.path(self.arguments[0])
        paths = sorted(folder.glob("*paper_vs_measured.csv"))
        if not paths:
            raise self.error(f"gflkit-paper-vs-measured: {folder} has no *paper_vs_measured.csv")
        parts = []
        for path in paths:
            self.state.document.settings.env.note_dependency(str(path))
            frame = pd.read_csv(path)
            gaps = paper_gaps(frame)
            gap = gaps.mean() if len(gaps) else float("nan")
            parts.append(f"<details><summary><code>docs/results/{folder.name}/{path.name}</code>: {len(frame)} rows, "
                         f"mean |ours − paper| {_text(gap)} over {len(gaps)} cells with a paper number</summary>"
                         f"{_html_table(frame)}</details>")
        return _raw("".join(parts))


class TableDirective(_FolderDirective):
    """A CSV under ``docs/results/`` as a table, numbers with two decimals and the columns named in ``:percent:``
    (shares in [0, 1]) in per cent: what a page shows of a simulation or a summary is read from its CSV when the
    site is built, never typed."""

    option_spec = {"percent": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        path = self.path(self.arguments[0])
        frame = pd.read_csv(path)
        for column in (c.strip() for c in self.options.get("percent", "").split(",") if c.strip()):
            if column not in frame.columns:
                raise self.error(f"gflkit-table: {path.name} has no column {column!r}")
            frame[column] = frame[column].map(lambda share: f"{100 * share:.2f} %")
        return _raw(_html_table(frame))


class FiguresDirective(_FolderDirective):
    """Every figure of a folder's archived notebook, in the order the notebook drew them; for a folder without
    one (a paper-budget folder), the figures its paper declares, drawn from its CSVs by ``gflkit figures``."""

    def run(self) -> list[nodes.Node]:
        folder = self.path(self.arguments[0])
        notebook = summarize(folder).notebook
        if notebook is not None:
            figures = notebook_figures(json.loads(notebook.read_text()))
            if not figures:
                raise self.error(f"gflkit-figures: the archived {notebook.name} in {folder} drew no figure")
        else:
            figures = [(caption, base64.b64encode(path.read_bytes()).decode("ascii"))
                       for caption, path in committed_figures(folder)]
            if not figures:
                raise self.error(f"gflkit-figures: {folder} has neither an archived notebook nor a figure its "
                                 f"paper declares (run `gflkit figures {folder}`)")
        return _raw("".join(f'<figure class="gflkit-figure"><img alt="{html.escape(caption)}" '
                            f'src="data:image/png;base64,{png}"><figcaption>{html.escape(caption)}</figcaption></figure>'
                            for caption, png in figures))


def notebook_figures(notebook: dict[str, Any]) -> list[tuple[str, str]]:
    """``(caption, base64 PNG)`` of every figure a notebook's outputs hold: the caption is the heading of the
    notebook section that drew it, then the file it was saved under (in cell order; ``{dataset}`` and the like
    left as the notebook names them, shown as "…"), else the figure's number in its section."""
    figures = []
    section = "figure"
    for cell in notebook["cells"]:
        source = "".join(cell.get("source", ""))
        if cell["cell_type"] == "markdown":
            headings = [line.lstrip("#").strip() for line in source.splitlines() if line.startswith("#")]
            section = headings[-1] if headings else section
            continue
        pngs = [output["data"]["image/png"] for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
        names = [re.sub(r"\{[^}]*\}", "…", a or b) for a, b in SAVED_FIGURE.findall(source)]
        for i, png in enumerate(pngs):
            caption = f"{section} ({names[i]})" if i < len(names) else f"{section} (figure {i + 1} of its cell)"
            figures.append((caption, "".join(png) if isinstance(png, list) else png.strip()))
    return figures


def value_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: dict[str, Any] | None = None, content: list[str] | None = None) -> tuple[list[Any], list[Any]]:
    """``{gflkit-value}`FILE COLUMN key=value ...``` — the cell of a committed CSV under ``docs/results/`` the
    reference names (:class:`gflkit.report.values.ValueReference`), read when the site is built; a reference
    that selects no single cell is a build error."""
    env = inliner.document.settings.env
    results = Path(env.srcdir) / "results"
    try:
        reference = ValueReference.parse(text)
        value = reference.read(results)
    except ValueError as error:
        message = inliner.reporter.error(f"gflkit-value: {error}", line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    env.note_dependency(str(results / reference.file))
    title = html.escape(f"read from docs/results/{reference.file}", quote=True)
    return _raw(f'<span class="gflkit-value" title="{title}">{html.escape(value.replace("-", "−"))}</span>'), []


def paper_role(name: str, rawtext: str, text: str, lineno: int, inliner: Any,
               options: dict[str, Any] | None = None, content: list[str] | None = None) -> tuple[list[Any], list[Any]]:
    """``{gflkit-paper}`95.17``` — a number the paper reports, marked as the paper's."""
    return _raw(f'<span class="gflkit-paper" title="the paper\'s number">{html.escape(text)}'
                '<sup>paper</sup></span>'), []


def drop_unreadable_sources(app: Any) -> list[Any]:
    """Forget the modules whose source viewcode could not read (e.g. ``builtins``) before it writes its pages:
    its index would otherwise link to a source page it never writes."""
    modules = getattr(app.env, "_viewcode_modules", None) or {}
    for name in [name for name, entry in modules.items() if not entry]:
        del modules[name]
    return []


def setup(app: Any) -> dict[str, Any]:
    """Register the directives, the report's style sheet and the viewcode fix."""
    app.add_directive("gflkit-summary", SummaryDirective)
    app.add_directive("gflkit-claims", ClaimsDirective)
    app.add_directive("gflkit-paper-vs-measured", PaperVsMeasuredDirective)
    app.add_directive("gflkit-figures", FiguresDirective)
    app.add_directive("gflkit-table", TableDirective)
    app.add_role("gflkit-value", value_role)
    app.add_role("gflkit-paper", paper_role)
    app.add_css_file("gflkit.css")
    app.add_js_file("gflkit.js")
    app.connect("html-collect-pages", drop_unreadable_sources, priority=400)  # before viewcode's (500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
