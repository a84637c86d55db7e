"""docs/cli.md against the command itself: every command, flag and locustfile option the CLI has is
documented there, and everything documented there still exists. The flags come from the CLI's own
argument parsers (loadgen.cli.build_parser, and the locustfile's option group in a process of its
own); the environment variables from the string literals the code reads them by."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "cli.md"

INTERNAL_VARIABLES = {
    "SOJOURN_ALIVE_FD",  # a pipe a run hands its trace writer, not the user's
    "SOJOURN_RUN_JSON",  # `sojourn run` hands its Locust child the resolved scenario
    "SOJOURN_RUN_BROKER_URL",  # ... and the broker it resolved
    "SOJOURN_TEST_FAULT",  # the tests' fault injection (loadgen.run.guarded)
}

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], set[str]]:
    """Each runnable command (a path of subcommand names) and its option strings, --help left out."""
    found: dict[tuple[str, ...], set[str]] = {}
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subparsers:
        for name, sub in action.choices.items():
            found.update(_commands(sub, (*path, name)))
    if not subparsers:
        found[path] = {s for a in parser._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    return found


def _sections(text: str) -> dict[str, str]:
    """The page's level-2 sections by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {heading.strip(): body for heading, body in zip(parts[1::2], parts[2::2])}


def _documented_flags(body: str) -> set[str]:
    """The flags a section documents: those in the first cell of its tables' rows."""
    flags = set()
    for line in body.splitlines():
        if line.startswith("| `--"):
            flags |= set(_FLAG.findall(line.split("|")[1]))
    return flags


def _command_sections(text: str) -> dict[tuple[str, ...], str]:
    """`sojourn broker up|status|down` sections, by each command they cover."""
    found = {}
    for heading, body in _sections(text).items():
        match = re.fullmatch(r"`sojourn ([a-z]+)(?: ([a-z|]+))?(?: [^`]*)?`", heading)
        if not match:
            continue
        group, subs = match.groups()
        for sub in subs.split("|") if subs else [None]:
            found[(group, sub) if sub else (group,)] = body
    return found


def test_every_command_has_a_section_and_every_section_a_command():
    commands = set(_commands(build_parser()))
    documented = set(_command_sections(PAGE.read_text()))
    assert commands - documented == set(), "commands without a section in docs/cli.md"
    assert documented - commands == set(), "sections of docs/cli.md for commands the CLI does not have"


def test_every_flag_is_documented_and_every_documented_flag_exists():
    commands = _commands(build_parser())
    sections = _command_sections(PAGE.read_text())
    shared: dict[str, set[tuple[str, ...]]] = {}
    for command, body in sections.items():
        shared.setdefault(body, set()).add(command)
    problems = []
    for body, covered in shared.items():  # `broker up|status|down`: one table for the three
        has = set().union(*(commands[c] for c in covered))
        documented = _documented_flags(body)
        names = " / ".join(" ".join(c) for c in sorted(covered))
        problems += [f"sojourn {names}: {flag} is not in docs/cli.md" for flag in sorted(has - documented)]
        problems += [
            f"sojourn {names}: docs/cli.md documents {flag}, which it lacks" for flag in sorted(documented - has)
        ]
    assert problems == []


def _locustfile_options() -> set[str]:
    """The locustfile's own options, read in a process of its own: importing it loads Locust (and
    with --help in the arguments it wants no scenario)."""
    code = (
        "import argparse, sys\n"
        "sys.argv = ['locust', '--help']\n"
        "import loadgen.locustfile as locustfile\n"
        "parser = argparse.ArgumentParser(add_help=False)\n"
        "locustfile._add_options(parser)\n"
        "print(' '.join(s for a in parser._actions for s in a.option_strings))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


def test_the_locustfiles_options_are_documented_and_exist():
    documented = _documented_flags(_sections(PAGE.read_text())["The locustfile's options"])
    assert documented == _locustfile_options()


def _variables_read() -> set[str]:
    names = set()
    for package in ("loadgen", "analysis"):
        for path in (REPO / package).rglob("*.py"):
            names |= set(re.findall(r"[\"'](SOJOURN_[A-Z_]+)[\"']", path.read_text(encoding="utf-8")))
    return names - INTERNAL_VARIABLES


def test_every_environment_variable_the_code_reads_is_documented_and_no_other():
    table = _sections(PAGE.read_text())["Environment variables"]
    documented = set(re.findall(r"^\| `([A-Z_]+)`", table, flags=re.M))
    sojourn = {name for name in documented if name.startswith("SOJOURN_")}
    assert _variables_read() - sojourn == set(), "read by the code, missing from docs/cli.md"
    assert sojourn - _variables_read() == set(), "in docs/cli.md, read by no code"


@pytest.mark.parametrize(
    "broken",
    [
        (
            "| `--processes N` | Locust worker processes for the run",
            "| `--procs N` | Locust worker processes for the run",
        ),
        ("## `sojourn compare RUN_DIR RUN_DIR ...`", "## `sojourn comparison RUN_DIR RUN_DIR ...`"),
        ("| `SOJOURN_TLS_INSECURE` |", "| `SOJOURN_TLS_UNSAFE` |"),
    ],
)
def test_the_checks_find_a_flag_a_command_or_a_variable_broken_on_purpose(broken, monkeypatch, tmp_path):
    page = tmp_path / "cli.md"
    old, new = broken
    text = PAGE.read_text()
    assert old in text
    page.write_text(text.replace(old, new, 1))
    monkeypatch.setattr(sys.modules[__name__], "PAGE", page)
    with pytest.raises(AssertionError):
        test_every_command_has_a_section_and_every_section_a_command()
        test_every_flag_is_documented_and_every_documented_flag_exists()
        test_every_environment_variable_the_code_reads_is_documented_and_no_other()
