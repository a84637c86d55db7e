"""Every stop signal ends a run as Ctrl-C does (loadgen/commands/stopping.py): SIGTERM, as systemd,
a CI runner or `timeout` send it to the command's process alone, and SIGHUP, as a closed terminal
sends it. The load stops, the traces are flushed, the census counts the backlog, what was captured
is analysed, the exit status names the signal (128 + its number), and no process of the run is
left behind."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import (
    _Planned,
    load_generator_pid,
    run_end_to_end,
    sojourn,
    start_sojourn,
    start_together,
    wait_for_t0,
    write_scenario,
)
from tests.integration.traces import read_rows

SCENARIO = """
name: it-{name}
queue: {{name: sojourn.it.{name}, purge_on_start: true}}
run: {{duration_s: 60, drain_timeout_s: 5}}
producers: [{{name: p, rate: 100}}]
consumers: [{{name: c, prefetch: 50, processing_ms: 15}}]
"""

_RUN_GROUPS: dict[str, int] = {}
"""case -> the process group of its load generator, seen while it ran."""


def _load_generator_group(run_dir: Path) -> int:
    """The process group of the Locust process running into `run_dir`."""
    return os.getpgid(load_generator_pid(run_dir))


def _alive_in_group(pgid: int) -> list[str]:
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(f"{pid} {stat[: stat.rindex(')') + 1]}")
    return alive


def _signal_the_command_alone(signum: int, case: str):
    def during(proc, run_dir: Path) -> None:
        time.sleep(max(0.0, wait_for_t0(proc, run_dir) + 5 - time.time()))
        _RUN_GROUPS[case] = _load_generator_group(run_dir)
        assert _RUN_GROUPS[case] != os.getpgid(proc.pid)  # so the signal below reaches the command only
        os.kill(proc.pid, signum)

    return during


run_end_to_end(
    __name__,
    "sigterm",
    "sojourn-run",
    SCENARIO.format(name="sigterm"),
    during=_signal_the_command_alone(signal.SIGTERM, "sigterm"),
)
_ALONE = {
    "sighup": _Planned(
        __name__, SCENARIO.format(name="sighup"), "sojourn", during=_signal_the_command_alone(signal.SIGHUP, "sighup")
    ),
}
"""Runs started together by `alone`, after the session's batch: beside its dozen runs, start-up on two
cores took longer than some of its one-second runs (a start barrier is issue 18's)."""


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict:
    return start_together(tmp_path_factory.mktemp("signals"), _ALONE)


def _assert_every_message_accounted_for(run_dir: Path) -> int:
    """The publish rows, each acked or left in the broker (none lost on the way out)."""
    publishes = read_rows(run_dir, "publish")
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    left = {r["message_id"] for r in read_rows(run_dir, "leftover")}
    published = {p["message_id"] for p in publishes if p["outcome"] != "failed"}
    assert len(published) > 300  # ~100/s for several seconds
    assert left, "100/s in and at most ~66/s out: the census should have found the backlog"
    assert published <= acked | left, sorted(published - acked - left)[:5]
    return len(publishes)


def test_sigterm_to_the_command_alone_stops_the_run_analyses_it_and_exits_143(end_to_end):
    ran = end_to_end["sigterm"]
    assert ran.returncode == 143, ran.stderr[-3000:]
    assert "interrupted" in ran.stderr
    assert json.loads((ran.run_dir / "run.json").read_text())["status"] == "interrupted"
    published = _assert_every_message_accounted_for(ran.run_dir)
    summary = json.loads((ran.run_dir / "summary.json").read_text())
    assert summary["messages"]["published"] == published
    assert summary["messages"]["unaccounted"] == 0
    assert (ran.run_dir / "report.html").is_file()
    assert _alive_in_group(_RUN_GROUPS["sigterm"]) == []


def test_sighup_stops_the_run_like_ctrl_c_and_exits_129(alone):
    ran = alone["sighup"]
    assert ran.returncode == 129, ran.stderr[-3000:]
    assert json.loads((ran.run_dir / "run.json").read_text())["status"] == "interrupted"
    _assert_every_message_accounted_for(ran.run_dir)
    assert _alive_in_group(_RUN_GROUPS["sighup"]) == []


def _kill_9_everything(proc, run_dir: Path) -> None:
    """kill -9 of every process of the run, the command's and the load generator's groups alike."""
    time.sleep(max(0.0, wait_for_t0(proc, run_dir) + 5 - time.time()))
    _RUN_GROUPS["kill-9"] = _load_generator_group(run_dir)
    for pgid in (_RUN_GROUPS["kill-9"], os.getpgid(proc.pid)):
        os.killpg(pgid, signal.SIGKILL)


_ALONE["kill-9"] = _Planned(__name__, SCENARIO.format(name="kill-9"), "sojourn", during=_kill_9_everything)


def test_after_kill_9_analyze_says_the_run_did_not_finish_and_counts_what_it_can_not_place_apart(alone):
    ran = alone["kill-9"]
    assert ran.returncode == -signal.SIGKILL
    assert json.loads((ran.run_dir / "run.json").read_text())["status"] == "running"
    result = sojourn("analyze", str(ran.run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the run did not finish (run.json still says running: it was killed); no census was taken" in result.stdout
    summary = json.loads((ran.run_dir / "summary.json").read_text())
    m = summary["messages"]
    assert m["published"] > 100 and m["left_in_broker"] == 0  # ~100/s for 5 s, what was flushed; no census ran
    assert m["unaccounted"] == 0
    placed = m["acked"] + m["discarded_total"] + m["unknown_after_crash"]
    assert placed == m["published"], m  # every publish row is acked, discarded or not placeable
    assert "run did not finish" in (ran.run_dir / "report.html").read_text()
    assert _alive_in_group(_RUN_GROUPS["kill-9"]) == []


def _sigterm_once_running(proc, case: str, run_dir: Callable[[], Path]) -> tuple[str, str]:
    """SIGTERM to the command alone 5 s after the run in `run_dir()` started; its output once it
    has ended (killed, group and all, if it outlives the test)."""
    try:
        _signal_the_command_alone(signal.SIGTERM, case)(proc, run_dir())
        return proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_sigterm_to_a_sweep_analyses_the_runs_it_made_and_exits_143(tmp_path):
    """A sweep stopped in its first run: that run is stopped like `sojourn run`'s, analysed and
    tabled as partial, the second value never starts, and nothing of the run is left behind."""
    path = write_scenario(tmp_path / "sweep.yaml", SCENARIO.format(name="sweep-sigterm"))
    out = tmp_path / "sweep"
    proc = start_sojourn("sweep", path, "--vary", "consumers.c.prefetch=50,10", "--out", str(out))
    first = out / "prefetch-50"
    _stdout, stderr = _sigterm_once_running(proc, "sweep", lambda: first)
    assert proc.returncode == 143, stderr[-3000:]
    assert "sweep interrupted after 1 of 2 runs" in stderr
    sweep = json.loads((out / "sweep.json").read_text())
    assert sweep["interrupted"] is True
    assert {row["value"] for row in sweep["rows"]} == {"50"}
    assert "Interrupted after 1 of 2 runs" in (out / "sweep.md").read_text()
    assert not (out / "prefetch-10").exists()
    published = _assert_every_message_accounted_for(first)
    assert json.loads((first / "summary.json").read_text())["messages"]["published"] == published
    assert _alive_in_group(_RUN_GROUPS["sweep"]) == []


def _first_run_dir(proc, runs: Path, timeout: float = 60) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(runs.glob("*-first")) if runs.is_dir() else []
        if found:
            return found[0]
        assert proc.poll() is None, f"nightly ended (exit {proc.returncode}) before its first run"
        time.sleep(0.05)
    raise AssertionError(f"no run directory under {runs} after {timeout} s")


def test_sigterm_to_nightly_analyses_the_stopped_entry_keeps_it_out_of_baselines_and_exits_143(tmp_path):
    """A night stopped in its first entry (as systemd or a CI runner stops a job): that entry's load
    stops like `sojourn run`'s, what it captured is analysed and reported, its JUnit case fails as
    interrupted, history.json lists it as interrupted with no regression judged, the second entry
    never starts, and nothing of the run is left behind."""
    write_scenario(tmp_path / "sc.yaml", SCENARIO.format(name="nightly-sigterm"))
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "name: stopped\nslo: ['messages.unaccounted == 0']\n"
        "scenarios:\n  - {scenario: sc.yaml, name: first}\n  - {scenario: sc.yaml, name: second}\n"
    )
    out = tmp_path / "results"
    proc = start_sojourn("nightly", str(suite), "--out", str(out))
    stdout, stderr = _sigterm_once_running(proc, "nightly", lambda: _first_run_dir(proc, out / "runs"))
    first = _first_run_dir(proc, out / "runs")
    assert proc.returncode == 143, stderr[-3000:]
    assert "interrupted" in stdout and "analyzing what first captured before the stop" in stderr
    assert [p.name.split("-", 1)[1] for p in (out / "runs").iterdir()] == ["first"]
    published = _assert_every_message_accounted_for(first)
    summary = json.loads((first / "summary.json").read_text())
    assert summary["run"]["status"] == "interrupted"
    assert summary["messages"]["published"] == published and summary["messages"]["unaccounted"] == 0
    assert (first / "report.html").is_file()
    (run,) = json.loads((out / "history.json").read_text())["runs"]
    assert (run["status"], run["verdict"], run["regressions"]) == ("interrupted", "error", [])
    junit = (out / "junit.xml").read_text()
    assert 'classname="stopped.first"' in junit and "interrupted" in junit
    assert "stopped.second" not in junit
    assert _alive_in_group(_RUN_GROUPS["nightly"]) == []
