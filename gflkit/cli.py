"""Command line: ``gflkit data list|verify|fetch`` and ``gflkit notebook NAME --profile P``."""
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
    from gflkit.notebooks import execute

    output = execute(args.name, args.profile, args.results, dict(args.parameter or []))
    print(f"executed notebook written to {output}")
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gflkit`` command."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
