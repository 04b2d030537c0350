"""Sphinx configuration of gflkit's report: ``make report`` builds it into site/ offline, warnings as errors.

The pages are docs/*.md and docs/papers/*.md; the archived executed notebooks under docs/results/ are
rendered as they are (never executed here); gflkit/report/sphinx.py reads the committed CSVs into tables.
"""
from __future__ import annotations

project = "gflkit"
author = "gflkit developers"
copyright = "2026, gflkit developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",  # Google-style Args: / Attributes: / Raises: sections of the docstrings
    "sphinx.ext.viewcode",
    "sphinx-mathjax-offline",  # MathJax 3 served from the site itself (no CDN)
    "gflkit.report.sphinx",
]
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "**/*.failed.ipynb"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

nb_execution_mode = "off"  # the archive holds executed notebooks; the site shows them, it never runs them
nb_output_stderr = "show"
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

templates_path = ["_templates"]
autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_mock_imports: list[str] = []
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True

html_theme = "furo"
html_title = "gflkit — graph-based federated learning, reproduced"
html_static_path = ["_static"]
html_show_sourcelink = False
