"""Command line: ``gflkit data list|verify|fetch``, ``gflkit notebook NAME --profile P`` and
``gflkit precompute NAME --profile P`` (compute a notebook's runs into its result store, e.g. in the
background with ``nohup``; interrupted runs resume from their checkpoints, finished ones are skipped)."""
from __future__ import annotations

import argparse
import ast
import sys
from typing import Sequence

from gflkit.data.cli import add_data_commands


def _parse_parameter(text: str) -> tuple[str, object]:
    """``key=value`` with a Python-literal value (``rounds=5``, ``seeds=[0,1]``); plain strings allowed."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def _notebook(args: argparse.Namespace) -> int:
    from gflkit.notebooks import NotebookError, execute

    try:
        output = execute(args.name, args.profile, args.results, dict(args.parameter or []))
    except NotebookError as error:
        print(f"gflkit notebook: {error}", file=sys.stderr)
        return 2
    print(f"executed notebook written to {output}")
    return 0


def _precompute(args: argparse.Namespace) -> int:
    import importlib
    from pathlib import Path

    from gflkit.experiment import run
    from gflkit.notebooks import default_results_dir
    from gflkit.profiles import resolve_profile
    from gflkit.results import ResultStore, config_key

    try:
        paper = importlib.import_module(f"gflkit.papers.{args.name}")
    except ModuleNotFoundError:
        paper = None
    if paper is None or not hasattr(paper, "grids"):
        raise SystemExit(f"gflkit precompute: notebook {args.name!r} does not publish its experiment grids "
                         "(gflkit/papers/<name>.py needs a grids(profile) function); run it with `gflkit notebook`")
    try:
        params = resolve_profile(paper.PROFILES, args.profile, seeds=args.seeds)
    except ValueError as error:
        raise SystemExit(f"gflkit precompute: {error}") from None
    try:
        sections = paper.grids(params, args.section)
    except ValueError as error:
        raise SystemExit(f"gflkit precompute: {error}") from None
    store = ResultStore(Path(args.results or default_results_dir(args.name)) / "runs")
    chosen = [c for configs in sections.values() for c in configs if not args.method or c.method in args.method]
    todo = list({config_key(c.to_dict()): c for c in chosen}.values())  # a run shared by sections once
    for number, config in enumerate(todo, 1):
        print(f"[{number}/{len(todo)}] {config.method} {config.partition} {config.partition_options} "
              f"seed={config.seed} evaluate={config.evaluate}", flush=True)
        run(config, store=store, device=args.device)
    print(f"{len(todo)} runs of {args.name} ({args.profile}) are in {store.root}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``gflkit`` argument parser."""
    parser = argparse.ArgumentParser(prog="gflkit", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    add_data_commands(commands)
    nb = commands.add_parser("notebook", help="execute a notebook with papermill (results under --results)")
    nb.add_argument("name", help="notebook name, e.g. quickstart or fedska")
    nb.add_argument("--profile", default="smoke", help="smoke | ci | paper (default: smoke)")
    nb.add_argument("--results", default=None, help="output folder (default: results/<name>)")
    nb.add_argument("-p", "--parameter", action="append", type=_parse_parameter,
                    help="extra notebook parameter key=value (repeatable), e.g. -p seeds=[0,1]")
    nb.set_defaults(func=_notebook)
    pre = commands.add_parser("precompute", help="compute a notebook's runs into its result store (resumable)")
    pre.add_argument("name", help="notebook name whose gflkit/papers/<name>.py has grids(), e.g. fedska")
    pre.add_argument("--profile", default="smoke", help="a profile of that notebook (default: smoke)")
    pre.add_argument("--results", default=None, help="the notebook's results folder (default: results/<name>)")
    pre.add_argument("--section", action="append", help="only this grid section (repeatable), e.g. table1")
    pre.add_argument("--method", action="append", help="only runs of this method (repeatable)")
    pre.add_argument("--seeds", type=int, nargs="+", default=None,
                     help="these seeds instead of the profile's, e.g. --seeds 0 (a first seed of every cell)")
    pre.add_argument("--device", default="auto", help="auto | cpu | cuda")
    pre.set_defaults(func=_precompute)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gflkit`` command."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
