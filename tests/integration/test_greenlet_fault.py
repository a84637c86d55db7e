"""A guarded greenlet made to raise in a worker process ends the run at once, cleanly (issue 48's
fault table): exit status 6, run.json status failed naming the greenlet, an `internal_error` event
in the traces, every message accounted for, and the end long before the drain timeout.

`sojourn run --processes 1` (a Locust master and one worker process). The test-only hook
SOJOURN_TEST_FAULT (loadgen/run/guarded.py) makes the drain monitor raise 4 s after it started at t0;
the drain monitor runs in the worker only (a master runs no participants). Without the guard the
drain monitor died silently: publishing never stopped, `drained` was never set, and the run went on
until the shape's overall timeout (start timeout + duration + drain timeout + grace: 170 s here).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from loadgen.run.guarded import FAULT_ENV
from tests.integration.conftest import sojourn, write_scenario
from tests.integration.traces import independent_outcomes, read_rows

QUEUE = "sojourn.it.greenlet-fault"
DURATION_S, DRAIN_TIMEOUT_S, FAULT_AT_S = 20, 60, 4
SCENARIO = f"""
name: it-greenlet-fault
queue: {{name: {QUEUE}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {DURATION_S}, drain_timeout_s: {DRAIN_TIMEOUT_S}}}
producers: [{{name: p, rate: 100}}]
consumers: [{{name: c, prefetch: 20, processing_ms: 5}}]
"""
S = 1_000_000_000


def test_a_drain_monitor_that_raises_in_a_worker_ends_the_run_at_once_with_everything_accounted(tmp_path: Path):
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO)
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = sojourn(
        "run",
        scenario,
        "--out",
        str(run_dir),
        "--processes",
        "1",
        env={FAULT_ENV: f"drain_monitor@{FAULT_AT_S}"},
        timeout=240,
    )
    took_s = time.monotonic() - started
    said = result.stderr + result.stdout
    assert result.returncode == 6, said[-4000:]
    assert "internal error: the drain_monitor greenlet of the worker process" in result.stderr
    assert "InjectedFault" in result.stderr and "Traceback" in result.stderr  # the traceback, logged
    assert "ended early by an internal error" in result.stderr

    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed"
    assert run["internal_error"]["part"] == "drain_monitor"
    assert run["internal_error"]["process"].startswith("worker process ")
    assert run["error"].startswith("internal error: the drain_monitor greenlet of the worker process")
    t0_ns = run["t0_ns"]
    ended_s = (run["ended_ns"] - t0_ns) / S
    # Ended within seconds of the fault: before the run's own duration, long before duration + drain timeout.
    assert FAULT_AT_S - 1.5 <= ended_s < FAULT_AT_S + 8, ended_s
    assert took_s < DURATION_S + DRAIN_TIMEOUT_S, took_s  # the whole command, analysis included

    events = read_rows(run_dir, "event")
    (fault,) = [e for e in events if e["kind"] == "internal_error"]
    assert fault["name"] == "drain_monitor" and fault["source"] == "runner"
    detail = json.loads(fault["detail"])
    assert detail["process"] == run["internal_error"]["process"]
    assert "InjectedFault" in detail["error"] and "_drain_monitor" in detail["traceback"]
    # FAULT_AT_S after the drain monitor started: when the worker heard t0, up to 1 s ahead of it
    # (loadgen.rules.barrier.START_MARGIN_DISTRIBUTED_S).
    assert FAULT_AT_S - 1.5 <= (fault["ts_ns"] - t0_ns) / S < FAULT_AT_S + 2
    assert not [e for e in events if e["kind"] == "drain_start"]  # the drain never began: the fault ended it
    assert fault["worker"] != next(e["worker"] for e in events if e["kind"] == "start_barrier")  # not the master's

    # Every message accounted for, by the traces alone (pyarrow) and by the analysis.
    out = independent_outcomes(run_dir)
    published = out["published"]
    assert 200 <= len(published) <= 800  # ~100/s for ~4 s
    assert published == out["acked"] | out["left"] and not out["acked"] & out["left"]
    summary = json.loads((run_dir / "summary.json").read_text())
    m = summary["messages"]
    assert summary["run"]["status"] == "failed"
    assert m["published"] == len(published)
    assert (m["acked"], m["left_in_broker"], m["discarded_total"]) == (len(out["acked"]), len(out["left"]), 0)
    assert m["unaccounted"] == 0
    print(  # the fault table's row (issue 48)
        f"\nfault row: exit {result.returncode}, run.json {run['status']}, published {m['published']}, "
        f"acked {m['acked']}, discarded {json.dumps({k: v for k, v in m['discarded'].items() if v}) or '{}'} "
        f"(total {m['discarded_total']}), left in broker {m['left_in_broker']}, unaccounted {m['unaccounted']}; "
        f"ended {ended_s:.1f} s after t0, command {took_s:.0f} s"
    )


def test_a_queue_sampler_that_raises_in_the_local_runner_ends_the_run_as_well(tmp_path: Path):
    """The same in a single process (no --processes): the local runner's own queue sampler. Without
    the analysis: the traces alone account for every message."""
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO.replace(QUEUE, QUEUE + "-local"))
    run_dir = tmp_path / "run"
    started = time.monotonic()
    result = sojourn(
        "run", scenario, "--out", str(run_dir), "--no-analyze", env={FAULT_ENV: "queue_sampler@3"}, timeout=120
    )
    took_s = time.monotonic() - started
    assert result.returncode == 6, (result.stderr + result.stdout)[-4000:]
    assert "internal error: the queue_sampler greenlet of the local process" in result.stderr
    assert "what it captured is kept (exit status 6)" in result.stderr

    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed" and run["internal_error"]["part"] == "queue_sampler"
    assert run["internal_error"]["process"].startswith("local process ")
    ended_s = (run["ended_ns"] - run["t0_ns"]) / S
    assert 2.5 <= ended_s < 3 + 8, ended_s  # the sampler starts at t0 (0.2 s after it heard it)
    assert took_s < DURATION_S + DRAIN_TIMEOUT_S, took_s
    (fault,) = [e for e in read_rows(run_dir, "event") if e["kind"] == "internal_error"]
    assert fault["name"] == "queue_sampler" and "_run" in json.loads(fault["detail"])["traceback"]

    out = independent_outcomes(run_dir)
    assert 150 <= len(out["published"]) <= 700  # ~100/s for ~3 s
    assert out["published"] == out["acked"] | out["left"] and not out["acked"] & out["left"]
    assert run["broker_depth_at_end"] == len(out["left"])
