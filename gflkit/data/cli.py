"""``gflkit data list | verify | fetch | clean``: inspect, check, download and un-cache the datasets.

Wired into the ``gflkit`` command by :func:`add_data_commands`; every handler returns an exit code.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from gflkit.data.cache import cache_dir, clean_cache
from gflkit.data.download import fetch_dataset
from gflkit.data.errors import DataError, UnknownDatasetError
from gflkit.data.integrity import FileStatus, verify_dataset
from gflkit.data.registry import DatasetSpec, data_root, dataset_names, get_spec

VERIFY_HELP = """\
Hash every raw file of the named datasets fully and compare with the pinned sha256.

Exit codes:
  0  with NAMEs: every file of every named dataset is present and matches its sha256;
     without NAMEs: no present file has a bad checksum (datasets with no file at all are
     reported as missing, partially present ones list their missing files, neither fails).
  1  with NAMEs: a named dataset is missing a file or has a bad checksum;
     without NAMEs: some present file has a bad checksum.
  2  an unknown dataset name, or a data root that does not exist.
"""


def dataset_state(spec: DatasetSpec, statuses: Sequence[FileStatus]) -> str:
    """``embedded``, ``checksum-bad``, ``missing`` or ``present`` for a dataset's file statuses."""
    if spec.embedded:
        return "embedded"
    if any(s.state == "checksum-bad" for s in statuses):
        return "checksum-bad"
    if any(s.state == "missing" for s in statuses):
        return "missing"
    return "present"


def _usable_groups(spec: DatasetSpec, statuses: Sequence[FileStatus]) -> list[str]:
    by_path = {s.relpath: s for s in statuses}
    return [g for g in spec.groups if all(by_path[r.path].ok for r in spec.files_in(g))]


def _detail(spec: DatasetSpec, statuses: Sequence[FileStatus]) -> str:
    bad = [s for s in statuses if s.state == "checksum-bad"]
    missing = [s for s in statuses if s.state == "missing"]
    parts = []
    if bad:
        parts.append(f"bad {bad[0].kind}: {bad[0].relpath}" + (f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""))
    if missing:
        parts.append(f"missing: {missing[0].relpath}" + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""))
        groups = _usable_groups(spec, statuses)
        if groups and len(spec.groups) > 1:
            parts.append(f"usable: source={'/'.join(groups)}")
        raws = {r.path: r for r in spec.files}
        if all(raws[s.relpath].downloadable for s in missing):
            parts.append(f"run `gflkit data fetch {spec.name}`")
        else:
            parts.append("not downloadable, see `gflkit data fetch " + spec.name + "`")
    if bad and not missing:
        parts.append(f"run `gflkit data verify {spec.name}`")
    return "; ".join(parts) if parts else spec.description


def _missing_root(root: Path) -> str | None:
    """Why ``root`` cannot be a data root to read (it does not exist, or is a file), or None."""
    if root.is_dir():
        return None
    what = "is a file, not a folder" if root.exists() else "does not exist"
    return (f"error: the data root {root} {what}; point GFLKIT_DATA or --root at the folder holding the "
            f"datasets (e.g. ../shared/datasets), or fetch them into it with `gflkit data fetch NAME`")


def _named_specs(names: Sequence[str]) -> list[DatasetSpec] | None:
    """The specs of ``names`` (all registered datasets when empty; duplicates once), or None after printing
    the unknown name and the known ones."""
    try:
        return [get_spec(n) for n in dict.fromkeys(names or dataset_names())]
    except UnknownDatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None


def _cmd_list(args: argparse.Namespace) -> int:
    root = data_root(args.root)
    if (problem := _missing_root(root)) is not None:
        print(problem, file=sys.stderr)
        return 2
    print(f"data root: {root}")
    rows = []
    for name in dataset_names():
        spec = get_spec(name)
        statuses = verify_dataset(name, root, full=False)
        ok = sum(s.ok for s in statuses)
        files = "-" if spec.embedded else f"{ok}/{len(statuses)}"
        rows.append((name, dataset_state(spec, statuses), files, _detail(spec, statuses)))
    widths = [max(len(r[i]) for r in rows + [("name", "state", "files", "")]) for i in range(3)]
    print(f"{'name':<{widths[0]}}  {'state':<{widths[1]}}  {'files':>{widths[2]}}  detail")
    for name, state, files, detail in rows:
        print(f"{name:<{widths[0]}}  {state:<{widths[1]}}  {files:>{widths[2]}}  {detail}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    root = data_root(args.root)
    if (specs := _named_specs(args.names)) is None:
        return 2
    if (problem := _missing_root(root)) is not None:
        print(problem, file=sys.stderr)
        return 2
    print(f"data root: {root}")
    failed = False
    for spec in specs:
        if spec.embedded:
            print(f"{spec.name}: embedded (no files to verify)")
            continue
        statuses = verify_dataset(spec.name, root, full=True)
        present = [s for s in statuses if s.state != "missing"]
        if not args.names and not present:
            print(f"{spec.name}: missing (no file of {len(statuses)} under {spec.raw_dir(root)}; not verified)")
            continue
        state = dataset_state(spec, statuses)
        ok = sum(s.ok for s in statuses)
        print(f"{spec.name}: {state} ({ok}/{len(statuses)} files ok)")
        for s in statuses:
            if s.state == "checksum-bad":
                print(f"  BAD      {s.relpath}: expected {s.kind} {s.expected_sha256}, got {s.actual_sha256}")
            elif s.state == "missing":
                print(f"  MISSING  {s.relpath} ({s.path})")
        if any(s.state == "checksum-bad" for s in statuses) or (args.names and state != "present"):
            failed = True
    return 1 if failed else 0


def _cmd_fetch(args: argparse.Namespace) -> int:
    root = data_root(args.root)
    if (specs := _named_specs(args.names)) is None:
        return 2
    code = 0
    for spec in specs:
        if spec.embedded:
            print(f"{spec.name}: embedded, nothing to fetch")
            continue
        try:
            statuses = fetch_dataset(spec.name, root, timeout=args.timeout, progress=not args.quiet)
        except DataError as exc:
            print(f"{spec.name}: fetch failed: {exc}", file=sys.stderr)
            code = 1
            continue
        state = dataset_state(spec, statuses)
        ok = sum(s.ok for s in statuses)
        print(f"{spec.name}: {state} ({ok}/{len(statuses)} files ok) in {spec.raw_dir(root)}")
        for s in statuses:
            if s.state == "checksum-bad":
                print(f"  BAD      {s.relpath}: expected {s.kind} {s.expected_sha256}, got {s.actual_sha256}")
            elif s.state == "missing":
                print(f"  MISSING  {s.relpath} (no download URL)")
        if state != "present":
            usable = _usable_groups(spec, statuses)
            if usable and len(spec.groups) > 1:
                print(f"  usable now: source={'/'.join(usable)}")
            if any(s.state == "missing" for s in statuses) and spec.obtain:
                print(f"  how to obtain the missing files: {spec.obtain}")
            code = 1
    return code


def _cmd_clean(args: argparse.Namespace) -> int:
    if (specs := _named_specs(args.names)) is None:
        return 2
    root = data_root(args.root)
    total = 0
    for spec in specs:
        removed = clean_cache(spec.name, root)
        total += len(removed)
        if removed or args.names:
            where = sorted({str(p.parent) for p in removed}) or [str(cache_dir(spec.name, root))]
            print(f"{spec.name}: removed {len(removed)} cached file(s) from {', '.join(where)}")
    print(f"{total} cached file(s) removed; raw files are untouched")
    return 0


def add_data_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``data list | verify | fetch | clean`` to the ``gflkit`` command; handlers return an exit code."""
    data = subparsers.add_parser("data", help="list, verify and download datasets",
                                 description="Raw files live under <root>/<name>/raw/ (root: --root, else "
                                             "$GFLKIT_DATA, else the checkout's data/).")
    commands = data.add_subparsers(dest="data_command", required=True, metavar="{list,verify,fetch,clean}")

    def root_option(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--root", type=Path, default=None,
                            help="data root (default: $GFLKIT_DATA, else the checkout's data/)")

    lst = commands.add_parser("list", help="one row per dataset: state, files ok / expected, what is missing",
                              description="One row per dataset: present / missing / checksum-bad / embedded. "
                                          "Uses sizes and cached hashes of unchanged files; "
                                          "`gflkit data verify` hashes everything. Always exits 0.")
    root_option(lst)
    lst.set_defaults(func=_cmd_list)

    ver = commands.add_parser("verify", help="hash every file fully; non-zero exit on a missing or bad file",
                              description=VERIFY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ver.add_argument("names", nargs="*", metavar="NAME", help="datasets to verify (default: all present ones)")
    root_option(ver)
    ver.set_defaults(func=_cmd_verify)

    fetch = commands.add_parser("fetch", help="download the missing files of datasets and verify them",
                                description="Download missing files from their canonical source, check each "
                                            "against its pinned sha256 and move it into <root>/<name>/raw/. "
                                            "Exit 0 when every file of every named dataset is then present and "
                                            "valid, 1 otherwise (e.g. LEAF json, which has no download URL), "
                                            "2 for an unknown name.")
    fetch.add_argument("names", nargs="+", metavar="NAME", help="datasets to fetch")
    root_option(fetch)
    fetch.add_argument("--timeout", type=float, default=60.0, help="network timeout in seconds (default 60)")
    fetch.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    fetch.set_defaults(func=_cmd_fetch)

    clean = commands.add_parser("clean", help="delete converted-tensor caches and hash indexes (raw files stay)",
                                description="Delete gflkit's derived files (converted tensors, sha256 index) of "
                                            "the named datasets, or of all, from every cache location: "
                                            "$GFLKIT_CACHE, the per-user cache (~/.cache/gflkit) and "
                                            "<root>/<folder>/processed. They are rebuilt on the next load.")
    clean.add_argument("names", nargs="*", metavar="NAME", help="datasets to clean (default: all)")
    root_option(clean)
    clean.set_defaults(func=_cmd_clean)
