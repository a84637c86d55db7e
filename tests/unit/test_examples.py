"""The scheduling examples (scenarios/scheduling/) work as written: every `sojourn` command line in
them is one the CLI takes, the files it names are in the repository, the CI workflow installs what
the command needs, and no example holds a broker password (issue 50)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from loadgen.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "scenarios" / "scheduling"
WORKFLOW = EXAMPLES / "ci" / "nightly.yml"
SERVICE = EXAMPLES / "systemd" / "sojourn-nightly.service"
CRONTAB = EXAMPLES / "crontab"


def _workflow_runs() -> list[str]:
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["nightly"]["steps"]
    return [step["run"] for step in steps if "run" in step]


def _sojourn_commands(lines: list[str]) -> list[list[str]]:
    """Every `sojourn ...` command in `lines` (shell lines; `sojourn` or a path ending in
    `/bin/sojourn`), as its arguments, up to a redirection or the end of the command."""
    commands = []
    for line in lines:
        if line.lstrip().startswith("#"):
            continue
        for match in re.finditer(r"(?:^|[\s=])(?:[^\s=]*/bin/)?sojourn\s+([^;&|>]*)", line):
            commands.append(shlex.split(match.group(1)))
    return commands


def _every_command() -> list[tuple[str, list[str]]]:
    found = [(WORKFLOW.name, args) for run in _workflow_runs() for args in _sojourn_commands(run.splitlines())]
    service = [line for line in SERVICE.read_text(encoding="utf-8").splitlines() if line.startswith("ExecStart=")]
    found += [(SERVICE.name, args) for args in _sojourn_commands(service)]
    found += [(CRONTAB.name, args) for args in _sojourn_commands(CRONTAB.read_text(encoding="utf-8").splitlines())]
    return found


def test_each_example_runs_sojourn():
    assert {where for where, _args in _every_command()} == {WORKFLOW.name, SERVICE.name, CRONTAB.name}


@pytest.mark.parametrize("where,args", _every_command(), ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_each_sojourn_command_is_one_the_cli_takes_and_its_files_are_there(where, args):
    parsed = build_parser().parse_args(args)  # an unknown command or flag exits 2 here
    assert parsed.command == "nightly"
    assert (ROOT / parsed.suite).is_file(), f"{where}: {parsed.suite}"


def test_the_workflow_installs_the_analysis_extra_and_java_the_nightly_needs():
    installs = [run for run in _workflow_runs() if "pip install" in run]
    assert installs and all(re.search(r"\.\[[^]]*\banalysis\b[^]]*\]", run) for run in installs), installs
    steps = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))["jobs"]["nightly"]["steps"]
    java = [s for s in steps if str(s.get("uses", "")).startswith("actions/setup-java")]
    assert java and str(java[0]["with"]["java-version"]) == "17"


@pytest.mark.parametrize("path", sorted(p for p in EXAMPLES.rglob("*") if p.is_file()), ids=lambda p: p.name)
def test_no_example_holds_a_broker_password_outside_a_comment(path):
    live = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in live if re.search(r"amqps?://[^/\s:@]+:[^@\s]+@", line)]


def test_the_service_reads_the_broker_url_from_an_environment_file():
    lines = SERVICE.read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("EnvironmentFile=") for line in lines)
    assert not any(line.startswith("Environment=") and "SOJOURN_AMQP_URL" in line for line in lines)
