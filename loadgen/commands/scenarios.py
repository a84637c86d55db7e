"""`sojourn scenarios list|copy`: the example scenarios sojourn ships (loadgen/examples.py), listed or copied
out to edit and run; `sojourn locustfile`: the installed locustfile's path, for `locust -f`."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from pathlib import Path

from loadgen.commands.common import EXIT_INPUT, EXIT_OK, LOCUSTFILE, CliError
from loadgen.examples import SCHEDULING

__all__ = ["add_parsers", "cmd_scenarios", "cmd_locustfile"]


def add_parsers(sub) -> None:
    """`scenarios` (list, copy) and `locustfile`, on the `sojourn` parser's subcommands."""
    sc = sub.add_parser(
        "scenarios",
        help="list the example scenarios sojourn ships, or copy one out to edit and run",
        description="The example scenarios and suite that come with sojourn (the repository's scenarios/, "
        "inside the installed package too). Without ACTION: list.",
    )
    actions = sc.add_subparsers(dest="scenarios_action", metavar="ACTION")
    actions.add_parser(
        "list",
        help="each example with its description",
        description="List each example scenario and suite with its description and the files a copy takes with it.",
    )
    cp = actions.add_parser(
        "copy",
        help="copy an example (and the files it refers to) into a directory",
        usage="sojourn scenarios copy [-h] [--force] (NAME | --all) [DIR]",
        description="Copy the example NAME into DIR, with every file it refers to (a replay trace, a "
        "suite's scenarios) at the same path relative to it, so the copy runs as it is: "
        "sojourn scenarios copy quickstart && sojourn run quickstart.yaml. An existing file is "
        "not overwritten without --force (exit 2, nothing copied).",
    )
    cp.add_argument("name", nargs="?", metavar="NAME", help="the example, as `sojourn scenarios list` names it")
    cp.add_argument("dir", nargs="?", metavar="DIR", help="where to (default: the current directory; made if missing)")
    cp.add_argument("--all", action="store_true", help="copy every example")
    cp.add_argument("--force", action="store_true", help="overwrite files that exist")
    sub.add_parser(
        "locustfile",
        help="print the path of sojourn's locustfile, for locust -f",
        description="Print the absolute path of the locustfile installed with sojourn, for: "
        'locust -f "$(sojourn locustfile)" --scenario quickstart.yaml',
    )


def cmd_locustfile(args) -> int:
    print(LOCUSTFILE)
    return EXIT_OK


def cmd_scenarios(args) -> int:
    from loadgen.examples import ExamplesError, catalogue, examples_dir

    try:
        root = examples_dir()
        examples = catalogue(root)
        if getattr(args, "scenarios_action", None) == "copy":
            return _copy(args, root, examples)
    except ExamplesError as exc:
        raise CliError(str(exc), EXIT_INPUT) from None
    return _list(root, examples)


def _list(root: Path, examples: list) -> int:
    width = max(len(e.name) for e in examples) + 2
    headings = (("scenario", f"Example scenarios ({root}):"), ("suite", "Suites:"), (SCHEDULING, "Scheduling:"))
    for kind, heading in headings:
        chosen = [e for e in examples if e.kind == kind]
        if not chosen:
            continue
        print(heading)
        for e in chosen:
            files = [*([e.path] if kind != "scenario" else []), *e.needs]
            print(f"  {e.name:<{width}}{e.description}{f' [{_with(e, files)}]' if files else ''}")
    print("\nCopy one to edit and run: sojourn scenarios copy NAME [DIR], then sojourn run NAME.yaml")
    return EXIT_OK


def _with(example, files: list[str]) -> str:
    if example.kind == SCHEDULING:
        return ", ".join(files)
    if example.kind == "suite":
        return f"{files[0]}, with {', '.join(files[1:])}" if len(files) > 1 else files[0]
    return f"with {', '.join(files)}"


def _copy(args: argparse.Namespace, root: Path, examples: list) -> int:
    from loadgen.examples import files_for, find

    if args.all:
        if args.dir is not None:
            raise CliError(f"scenarios copy --all takes one DIR, got {args.name!r} and {args.dir!r}", EXIT_INPUT)
        chosen, dest = examples, args.name or "."
    elif args.name is None:
        raise CliError("scenarios copy: name an example (sojourn scenarios list shows them) or give --all", EXIT_INPUT)
    else:
        chosen, dest = [find(examples, args.name)], args.dir or "."
    files = list(dict.fromkeys(f for e in chosen for f in files_for(e)))
    if os.path.exists(dest) and not os.path.isdir(dest):
        raise CliError(f"{dest}: exists and is not a directory", EXIT_INPUT)
    targets = [(root / f, Path(os.path.normpath(os.path.join(dest, f)))) for f in files]
    _refuse_existing([t for _, t in targets], args.force)
    for src, target in targets:
        try:
            if target.exists() and target.samefile(src):
                print(f"{target}: is the example itself, left as it is")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
        except OSError as exc:
            raise CliError(f"{target}: can not write it: {exc.strerror or exc}", EXIT_INPUT) from None
        print(f"copied {target}")
    if len(chosen) == 1 and chosen[0].kind == SCHEDULING:
        print("next: edit the paths and the schedule in them (docs/nightly.md, Scheduling)")
    elif len(chosen) == 1:
        first = shlex.quote(str(targets[0][1]))
        run = f"sojourn nightly {first} --out RESULTS_DIR" if chosen[0].kind == "suite" else f"sojourn run {first}"
        print(f"next: sojourn validate {first}, then {run}")
    return EXIT_OK


def _refuse_existing(targets: list[Path], force: bool) -> None:
    """Before anything is written: no directory where a file goes, and no file overwritten unless forced."""
    for t in targets:
        if t.is_dir():
            raise CliError(f"{t}: is a directory; the example's file can not go there", EXIT_INPUT)
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        what = f"{existing[0]} exists" if len(existing) == 1 else f"{', '.join(existing)} exist"
        raise CliError(f"{what}: not overwritten, nothing copied (--force overwrites)", EXIT_INPUT)
