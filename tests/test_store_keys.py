"""Every stored run of today's profiles keeps its key: refactoring or adding an option never recomputes hours
of stored runs. The digests below were taken before the runtime / run-label refactoring (2026-11-27);
a change here means every stored run of that profile would be computed again — declare the new field's
earlier value keyless instead (``KEYLESS_DEFAULTS``, a method option's ``keyless`` metadata)."""
from __future__ import annotations

import hashlib
import importlib
from unittest import mock

import pytest

from gflkit.experiment import stored_key
from gflkit.profiles import resolve_profile
from gflkit.results import config_key

#: ``notebook:profile`` → (number of distinct runs, sha256 prefix of their sorted keys), every dataset present.
PINNED = {
    "quickstart:smoke": (9, "151febc672c48e3c"),
    "quickstart:ci": (9, "3f1fd2751c41481c"),
    "quickstart:paper": (27, "7cfd97f2c36cd2c2"),
    "flower:smoke": (1, "8d93f0c69b533403"),
    "flower:ci": (1, "7bef48011f1cc6e5"),
    "flower:paper": (3, "bd69875cd15e7cbd"),
    "fedska:smoke": (25, "d7f604210cede3b1"),
    "fedska:ci": (32, "a16a583be22ac47b"),
    "fedska:paper1": (31, "6aca4b31cb10122a"),
    "fedska:paper": (198, "02671815fd6e271d"),
    "sfl:smoke": (17, "e019b469ad24750a"),
    "sfl:ci": (18, "84cbadd2ea3b24bd"),
    "sfl:authors_code": (5, "942b3f3901f69051"),
    "sfl:authors_code_ci": (5, "18961cb895f9230e"),
    "sfl:paper": (39, "dae97ef7cae358aa"),
    "jgesr:smoke": (17, "e675399246fc3697"),
    "jgesr:ci": (17, "dff1463cc23f2933"),
    "jgesr:paper1": (18, "c4b2f46fee6d3b85"),
    "jgesr:paper": (260, "cc522644bdfeda7c"),
    "fedcg:smoke": (10, "cb46c7226c40cac8"),
    "fedcg:ci": (22, "7fbf2fd515cb3f56"),
    "fedcg:paper": (37, "e5542a9e39923672"),
    "fedvgae:smoke": (33, "fc026de7440d1300"),
    "fedvgae:ci": (71, "fca6bc41c638f286"),
    "fedvgae:paper": (570, "94c1af0287f56621"),
    "benchmark:smoke": (57, "42a8a10e8c6c5df4"),
    "benchmark:ci": (52, "90db631a2b23a017"),
    "benchmark:paper1": (114, "5fdbdc5f6f98aed1"),
    "benchmark:paper": (342, "27fcfc615ae8f0ae"),
    "your_method:smoke": (45, "caeb0c3419f1033d"),  # the baselines' runs; the notebook adds its own method's
    "your_method:ci": (45, "6b84d35ef3a623a6"),
}


def profile_runs(notebook: str, profile: str) -> list:
    """Every run config of ``notebook``'s ``profile``, as its notebook builds them, with every dataset present
    (the flower notebook, which publishes no grids, runs each sweep method and seed on the base)."""
    paper = importlib.import_module(f"gflkit.papers.{notebook}")
    params = resolve_profile(paper.PROFILES, profile)
    if not hasattr(paper, "grids"):
        return [params.config(method=m, seed=s) for m in params.sweep["methods"] for s in params.seeds]
    with mock.patch("gflkit.data.dataset_available", lambda *args, **kwargs: (True, "")):
        return [run.config for runs in paper.grids(params).values() for run in runs]


@pytest.mark.parametrize("entry", sorted(PINNED))
def test_stored_keys_of_every_profile_are_unchanged(entry):
    runs = profile_runs(*entry.split(":"))
    keys = sorted({config_key(stored_key(config, "cpu")) for config in runs})
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    assert (len(keys), digest) == PINNED[entry], f"{entry}: the stored keys changed (first keys now {keys[:3]})"


def test_every_profile_of_every_notebook_is_pinned():
    from gflkit.notebooks import NOTEBOOK_DIR, profile_names

    profiles = {f"{path.stem}:{p}" for path in NOTEBOOK_DIR.glob("*.ipynb") for p in profile_names(path.stem)}
    assert profiles == set(PINNED)
