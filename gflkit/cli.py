"""Command line: ``gflkit data list|verify|fetch|clean``, ``gflkit notebook NAME --profile P``,
``gflkit precompute NAME --profile P``, ``gflkit archive``, ``gflkit figures FOLDER`` and ``gflkit flower``.

Only the standard library is imported up front: ``gflkit --help`` answers at once, a mistaken name,
profile, parameter, device or results folder is refused before torch is imported (see
:mod:`gflkit.notebooks`), and torch is loaded by the commands that compute.
"""
from __future__ import annotations

import argparse
import ast
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from gflkit.atomic import DiskFullError
from gflkit.data.cli import add_data_commands

if TYPE_CHECKING:
    from gflkit.experiment import RunConfig
    from gflkit.results import ResultStore

DESCRIPTION = """gflkit: graph-based federated learning papers, reproduced in notebooks.

  gflkit data list                       which datasets are present under the data root
  gflkit notebook fedvgae --profile ci   execute a paper notebook (tables under results/fedvgae)
  gflkit precompute fedvgae --profile paper --seeds 0
                                         compute a notebook's runs first, e.g. with nohup in the background

Use --threads 1 when another job shares the CPU cores (or set GFLKIT_THREADS=1).
"""


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
        parameters = {**dict(args.parameter or []), **_grid_parameters(args)}
        output = execute(args.name, args.profile, args.results, parameters)
    except NotebookError as error:
        print(f"gflkit notebook: {error}", file=sys.stderr)
        return 2
    print(f"executed notebook written to {output}")
    return 0


def _figures(args: argparse.Namespace) -> int:
    from gflkit.report.figures import draw_folder

    if args.out is not None and len(args.folders) > 1:
        print(f"gflkit figures: --out takes one FOLDER, got {len(args.folders)}; drop --out to draw each folder's "
              "figures beside its CSVs", file=sys.stderr)
        return 2
    status = 0
    for folder in args.folders:
        try:
            drawn = draw_folder(folder, args.out)
        except (FileNotFoundError, KeyError, ValueError) as error:
            print(f"gflkit figures: {error.args[0] if isinstance(error, KeyError) else error}", file=sys.stderr)
            status = 2
            continue
        for path in drawn.saved:
            print(f"drew {path}")
        for file, why in drawn.skipped:
            print(f"skipped {file} ({why} in {folder})")
    return status


def _archive(args: argparse.Namespace) -> int:
    from gflkit.notebooks import NotebookError
    from gflkit.report.archive import main as archive

    try:
        written = archive(args.entries)
    except NotebookError as error:
        print(f"gflkit archive: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(f"archived {path}")
    return 0


def _flower(args: argparse.Namespace) -> int:
    from flwr.common.config import parse_config_args  # Flower's own reader of --run-config

    from gflkit.flower.local import FlowerRunError, LocalDeployment, check_app_run

    try:
        overrides = parse_config_args([args.run_config]) if args.run_config else {}
        check_app_run(args.app, overrides)
    except ValueError as error:  # Flower's parser and ours (an unsupported method included) raise ValueError
        print(f"gflkit flower: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    try:
        with LocalDeployment(args.supernodes, simulation=True) as simulation:
            done = simulation.run(args.app, overrides, timeout=args.timeout)
    except FlowerRunError as error:
        sys.stderr.write(error.output)
        print(f"gflkit flower: {error}", file=sys.stderr)
        return 1
    print(done.stdout, end="")
    return 0


def _grid_parameters(args: argparse.Namespace) -> dict[str, str]:
    """The notebook parameters ``device`` / ``executor`` / ``ray_address`` that ``--device`` / ``--executor`` /
    ``--ray-address`` set."""
    given = {"device": args.device, "executor": args.executor, "ray_address": args.ray_address}
    return {name: value for name, value in given.items() if value is not None}


def _precompute(args: argparse.Namespace) -> int:
    """``gflkit precompute``: check everything, then compute the runs not stored yet; a mistake is one line
    on stderr and exit status 2."""
    from gflkit.notebooks import NotebookError

    try:
        store, todo = _precompute_plan(args)
    except NotebookError as error:
        print(f"gflkit precompute: {error}", file=sys.stderr)
        return 2
    from gflkit.executors import run_grid
    from gflkit.experiment import run
    from gflkit.runtime import Runtime

    runtime = Runtime(device=args.device or "auto", store=store, executor=args.executor or "serial",
                      ray_address=args.ray_address)
    if runtime.executor == "ray":  # one Ray task per run, on every core or on the cluster
        if todo:
            run_grid(todo, runtime)
    else:
        for number, config in enumerate(todo, 1):
            print(f"[{number}/{len(todo)}] {config.method} {config.partition} {config.partition_options} "
                  f"seed={config.seed} evaluate={config.evaluate}", flush=True)
            run(config, runtime)
    print(f"{len(todo)} runs of {args.name} ({args.profile}) are in {store.root}")
    return 0


def _precompute_plan(args: argparse.Namespace) -> tuple[ResultStore, list[RunConfig]]:
    """The result store and the runs ``gflkit precompute`` computes, each shared run once; every argument
    checked first, without torch where possible (:func:`_check_precompute`). Raises ``NotebookError``."""
    results = _check_precompute(args)
    import importlib  # torch is imported from here on

    from gflkit.notebooks import NotebookError
    from gflkit.profiles import resolve_profile
    from gflkit.results import ResultStore, config_key

    from gflkit.runtime import check_executor

    paper = importlib.import_module(f"gflkit.papers.{args.name}")
    try:
        check_executor(args.executor or "serial", args.ray_address)
        sections = paper.grids(resolve_profile(paper.PROFILES, args.profile, seeds=args.seeds), args.section)
    except ValueError as error:
        raise NotebookError(f"{error}") from None
    chosen = [run.config for runs in sections.values() for run in runs if not args.method or run.config.method in args.method]
    todo = list({config_key(c.to_dict()): c for c in chosen}.values())  # a run shared by sections once
    return ResultStore(results / "runs"), todo


def _check_precompute(args: argparse.Namespace) -> Path:
    """The results folder of ``gflkit precompute``, after the checks made before torch is imported (a CUDA
    device excepted): the notebook, that its paper module publishes ``grids``, the profile, the results
    folder and the device."""
    from gflkit.notebooks import (NotebookError, check_device, check_profile_name, check_results_folder,
                                  notebook_path, publishes_grids, results_folder)

    notebook_path(args.name)
    if not publishes_grids(args.name):
        raise NotebookError(f"notebook {args.name!r} does not publish its experiment grids (gflkit/papers/"
                            f"{args.name}.py needs a grids(profile) function); run it with `gflkit notebook`")
    check_profile_name(args.name, args.profile)
    results = results_folder(args.name, args.results)
    check_results_folder(results)
    check_device(args.device or "auto")
    return results


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, e.g. 1; got {text!r}")
    return value


def _notebook_epilog() -> str:
    from gflkit.notebooks import NOTEBOOK_DIR, profile_names

    rows = [f"  {path.stem:<12} profiles: {', '.join(profile_names(path.stem)) or '-'}"
            for path in sorted(NOTEBOOK_DIR.glob("*.ipynb"))]
    return "\n".join([
        "notebooks:", *rows, "",
        "examples:",
        "  gflkit notebook quickstart                              the smoke profile, about a minute",
        "  gflkit notebook fedvgae --profile ci -p seeds=0         one seed instead of the profile's",
        "  gflkit notebook fedska -p 'overrides={\"rounds\": 3}'     change a run setting (a Python dict)",
        "  gflkit --threads 1 notebook fedska --profile ci         one CPU thread (another job is running)",
        "  gflkit notebook quickstart --profile ci --executor ray  one Ray task per run, on every core",
    ])


def _add_threads_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--threads", type=_positive_int, default=default, metavar="N",
                        help="CPU threads for torch (default: $GFLKIT_THREADS, else all cores); use 1 when "
                             "another job shares the cores")


def _add_runtime_options(parser: argparse.ArgumentParser) -> None:
    """Where and how the runs compute (:class:`~gflkit.runtime.Runtime`), the same for every command that runs."""
    parser.add_argument("--device", default=None,
                        help="auto (a CUDA GPU when present, else the CPU) | cpu | cuda | cuda:N (default: auto)")
    parser.add_argument("--executor", default=None, metavar="{serial,ray}",
                        help="how the runs are computed: serial (default) or ray (one Ray task per run; "
                             "pip install -e .[ray])")
    parser.add_argument("--ray-address", default=None, metavar="ADDRESS",
                        help="the Ray cluster for --executor ray, e.g. ray://host:10001 (default: a local instance "
                             "on this machine's cores); results and data must be on paths every worker sees")


def build_parser() -> argparse.ArgumentParser:
    """The ``gflkit`` argument parser."""
    parser = argparse.ArgumentParser(prog="gflkit", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gflkit {metadata.version('gflkit')}")
    _add_threads_option(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{archive,data,figures,flower,notebook,precompute}")
    add_data_commands(commands)
    nb = commands.add_parser("notebook", help="execute a notebook with papermill (results under --results)",
                             description="Execute notebooks/NAME.ipynb with papermill. Name, profile and\n"
                                         "parameters are checked before a kernel starts; the executed notebook\n"
                                         "replaces the previous one only on success.",
                             epilog=_notebook_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    nb.add_argument("name", help="notebook name (listed below)")
    nb.add_argument("--profile", default="smoke", help="a profile of that notebook (default: smoke)")
    nb.add_argument("--results", default=None, help="output folder (default: results/<name>)")
    nb.add_argument("-p", "--parameter", action="append", type=_parse_parameter, metavar="KEY=VALUE",
                    help="notebook parameter (repeatable), a Python literal: -p seeds=0, -p 'seeds=[0, 1]'")
    _add_runtime_options(nb)
    nb.set_defaults(func=_notebook)
    pre = commands.add_parser("precompute", help="compute a notebook's runs into its result store (resumable)",
                              description="Compute the runs a notebook reads into its result store, e.g. in "
                                          "the background with nohup; interrupted runs resume from their "
                                          "checkpoints, finished ones are skipped.")
    pre.add_argument("name", help="notebook name whose gflkit/papers/<name>.py has grids(), e.g. fedska")
    pre.add_argument("--profile", default="smoke", help="a profile of that notebook (default: smoke)")
    pre.add_argument("--results", default=None, help="the notebook's results folder (default: results/<name>)")
    pre.add_argument("--section", action="append", help="only this grid section (repeatable), e.g. table1")
    pre.add_argument("--method", action="append", help="only runs of this method (repeatable)")
    pre.add_argument("--seeds", type=int, nargs="+", default=None,
                     help="these seeds instead of the profile's, e.g. --seeds 0 (a first seed of every cell)")
    _add_runtime_options(pre)
    pre.set_defaults(func=_precompute)
    arc = commands.add_parser("archive", help="execute reported notebooks from their stores into docs/results/",
                              description="Execute each archived notebook (each paper's `archived` profiles in gflkit/catalog.py)\n"
                                          "from its result store results/NAME_PROFILE and write it, outputs,\n"
                                          "figures and CSVs included, under docs/results/NAME_PROFILE/.",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    arc.add_argument("entries", nargs="*", metavar="NAME:PROFILE",
                     help="the entries to archive, e.g. quickstart:ci (default: all)")
    arc.set_defaults(func=_archive)
    flw = commands.add_parser("flower", help="run the Flower app in Flower's simulation, isolated on this machine",
                              description="Run a Flower app project (default: flower_app/) with `flwr run` on a\n"
                                          "private simulation SuperLink (free ports, its own FLWR_HOME, stopped\n"
                                          "afterwards). The run config is checked first; a failed run exits 1\n"
                                          "with the cause in its last line.",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    flw.add_argument("app", nargs="?", default="flower_app", help="the app project folder (default: flower_app)")
    flw.add_argument("--supernodes", type=_positive_int, default=6, metavar="N",
                     help="simulated nodes, one per client (default: 6, the app's num-clients)")
    flw.add_argument("--run-config", default="", metavar="'KEY=VALUE ...'",
                     help="overrides of [tool.flwr.app.config], as for flwr run: \"method='sfl' rounds=5\"")
    flw.add_argument("--timeout", type=float, default=3600.0, help="seconds before the run is stopped (default 3600)")
    flw.set_defaults(func=_flower)
    fig = commands.add_parser("figures", help="redraw a results folder's figures from its committed CSVs",
                              description="Draw every figure a results folder's paper declares (gflkit/catalog.py's\n"
                                          "PAPERS) from the folder's CSVs alone, no store and no training, and save\n"
                                          "them beside the CSVs (or under --out).",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    fig.add_argument("folders", nargs="+", metavar="FOLDER", help="results folders, e.g. docs/results/jgesr_paper1")
    fig.add_argument("--out", default=None, help="save the figures here instead (one folder for one FOLDER)")
    fig.set_defaults(func=_figures)
    for command in (nb, pre, arc):  # also accepted after the command; SUPPRESS keeps a value given before it
        _add_threads_option(command, default=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gflkit`` command."""
    args = build_parser().parse_args(argv)
    if args.threads is not None:
        from gflkit.threads import limit_threads

        limit_threads(args.threads)
    try:
        return int(args.func(args) or 0)
    except DiskFullError as error:  # e.g. storing a run: one line, not torch's zip-writer traceback
        print(f"gflkit {args.command}: {error.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
