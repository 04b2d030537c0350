"""The layers of docs/architecture.md hold: import-linter's contract in pyproject.toml is kept, it names every
module of gflkit, and it does fail when a lower layer imports a higher one."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import gflkit

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(config: Path, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(config), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def contract_layers() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = config["contracts"]
    return [name.strip() for layer in contract["layers"] for name in layer.split("|")]


def test_the_layer_contract_is_kept():
    result = lint_imports(REPO / "pyproject.toml", REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_module_of_gflkit_sits_in_exactly_one_layer():
    package = Path(gflkit.__file__).parent
    modules = {f"gflkit.{path.stem}" for path in package.glob("*.py") if path.stem != "__init__"}
    modules |= {f"gflkit.{path.parent.name}" for path in package.glob("*/__init__.py")}
    layers = contract_layers()
    assert len(layers) == len(set(layers)), "a module is named in two layers"
    assert set(layers) == modules


def test_the_contract_fails_when_a_lower_layer_imports_a_higher_one(tmp_path):
    package = tmp_path / "toy"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text("")
    (package / "low.py").write_text("import toy.high\n")
    config = tmp_path / "contract.toml"
    config.write_text('[tool.importlinter]\nroot_package = "toy"\n\n[[tool.importlinter.contracts]]\n'
                      'name = "toy layers"\ntype = "layers"\nlayers = ["toy.high", "toy.low"]\n')
    result = lint_imports(config, tmp_path, pythonpath=tmp_path)
    assert result.returncode != 0 and "toy.low -> toy.high" in result.stdout, result.stdout + result.stderr
