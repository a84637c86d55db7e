"""A plain `locust -f loadgen/locustfile.py --headless` run ends as `sojourn run` does: converted
traces, Locust's report and statistics in the run directory, the end of the run in run.json,
and last lines that name the run directory and the command that analyses it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, write_scenario
from tests.integration.traces import published_on_schedule, read_rows

pytestmark = pytest.mark.integration

DURATION_S, DRAIN_TIMEOUT_S, RATE = 3, 10, 40
SHAPE_TICK_S = 1.0  # Locust's shape looks once a second whether the run has drained

SCENARIO = f"""
name: it-plain-locust
queue:
  name: sojourn.it.plain-locust-{{tag}}
  purge_on_start: true
  delete_on_end: true
run:
  duration_s: {DURATION_S}
  warmup_s: 1
  drain_timeout_s: {DRAIN_TIMEOUT_S}
producers:
  - name: p
    rate: {RATE}
    arrival: constant
consumers:
  - name: c
    prefetch: 10
    processing_ms: 1
"""


def plain_locust(scenario: str, run_dir: Path, *extra: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The locustfile as a user starts it, stdout and stderr in one stream in the order a
    terminal shows them (unbuffered)."""
    return subprocess.run(
        [sys.executable, "-m", "locust", "-f", "loadgen/locustfile.py", "--scenario", scenario, "--headless"]
        + ["--run-dir", str(run_dir), *extra],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def last_lines(output: str, n: int) -> list[str]:
    return [line for line in output.splitlines() if line.strip()][-n:]


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("plain-locust")
    run_dir = tmp / "run"
    result = plain_locust(write_scenario(tmp / "s.yaml", SCENARIO.format(tag="headless")), run_dir)
    assert result.returncode == 0, result.stdout[-3000:]
    return run_dir, result.stdout


def test_the_traces_are_converted_not_left_as_spilled_batches(plain_run):
    run_dir, _ = plain_run
    traces = run_dir / "traces"
    assert [p.name for p in traces.rglob("*.raw")] == []
    assert [p.name for p in traces.rglob(".*.tmp")] == []
    # a constant 40 msg/s for 3 s: sends at 0, 25 ms, ..., 2.975 s
    published_on_schedule(read_rows(run_dir, "publish"), RATE, DURATION_S)


def test_locusts_report_and_statistics_are_in_the_run_directory(plain_run):
    run_dir, _ = plain_run
    report = (run_dir / "locust.html").read_text(encoding="utf-8")
    assert "publish:(default):sojourn.it.plain-locust-headless" in report
    stats = (run_dir / "locust_stats.csv").read_text(encoding="utf-8")
    assert "publish:(default):sojourn.it.plain-locust-headless" in stats
    assert "consume:sojourn.it.plain-locust-headless" in stats
    assert (run_dir / "locust_failures.csv").is_file() and (run_dir / "locust_exceptions.csv").is_file()


def test_run_json_ends_when_the_shape_ended(plain_run):
    run_dir, _ = plain_run
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "completed"
    ran_s = (run["ended_ns"] - run["t0_ns"]) / 1e9
    # the load lasts the scenario's duration; the drain at most its timeout, seen within a shape tick
    assert DURATION_S <= ran_s <= DURATION_S + DRAIN_TIMEOUT_S + SHAPE_TICK_S + 0.5, ran_s
    events = read_rows(run_dir, "event")
    assert max(e["ts_ns"] for e in events) - run["ended_ns"] < 3e9  # only the census and the close follow


def test_the_last_lines_name_the_run_directory_and_the_analyze_command(plain_run):
    run_dir, output = plain_run
    where = run_dir.resolve()
    status, holds, command = last_lines(output, 3)
    assert status.endswith(f"completed: {where}"), status
    assert "locust.html" in holds and "traces/" in holds, holds
    assert command == f"[sojourn] analyze it with: sojourn analyze {where}", command


def test_analyze_runs_the_analysis_once_the_run_has_ended(tmp_path):
    run_dir = tmp_path / "run"
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO.format(tag="analyze"))
    result = plain_locust(scenario, run_dir, "--analyze", timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["messages"]["published"] == published_on_schedule(read_rows(run_dir, "publish"), RATE, DURATION_S)
    assert (run_dir / "report.html").is_file()
    assert f"report: {run_dir.resolve() / 'report.html'}" in last_lines(result.stdout, 1)[0]
