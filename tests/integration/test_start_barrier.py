"""The start barrier (issue 18): t0 comes once every participant is ready, however slowly the
network proxy starts, in one process and across worker processes.

The proxy is slowed at its start by a `sitecustomize` module on the run's PYTHONPATH that sleeps
when the interpreter it starts in is `python -m loadgen.netem` (the project's code is untouched):
before the barrier, t0 was fixed one second after the run started, so the producers connected
and published seconds late, in one burst, and the headline throughput counted dead seconds.
Expected values come from the scenario (a constant rate) and the traces read with pyarrow.
"""

from __future__ import annotations

import json
import os
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.conftest import sojourn, write_scenario
from tests.integration.traces import published_on_schedule, read_rows

S = 1_000_000_000
PROXY_DELAY_S = 4.0
RATE = 40  # msg/s per producer, constant gaps
PRODUCERS = 2
DURATION_S, WARMUP_S = 8, 2
# Before the barrier the first publishes left PROXY_DELAY_S late, in one burst; a loaded host of two
# cores (a master, two workers and their proxies in the two-process case) stalls a timer by tens of ms.
ON_TIME_MS = 0.05 * PROXY_DELAY_S * 1000

SCENARIO = f"""
name: it-start-barrier
queue: {{name: sojourn.it.start-barrier, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {DURATION_S}, warmup_s: {WARMUP_S}, drain_timeout_s: 10}}
network:
  upstream: {{latency_ms: 1}}
  downstream: {{latency_ms: 1}}
producers:
  - {{name: p, count: {PRODUCERS}, rate: {RATE}, arrival: constant, size_bytes: 64, confirms: true}}
consumers:
  - {{name: c, count: 2, prefetch: 10, processing_ms: 1}}
"""

SLOW_START = f"""
import time

try:
    with open("/proc/self/cmdline", "rb") as f:
        _argv = f.read().split(b"\\0")
except OSError:
    _argv = []
if b"loadgen.netem" in _argv:  # the network proxy's interpreter: start {PROXY_DELAY_S} s late
    time.sleep({PROXY_DELAY_S})
"""


@pytest.mark.parametrize("processes", [1, 2])
def test_behind_a_slow_starting_proxy_the_first_publish_is_on_time_and_no_second_is_dead(tmp_path: Path, processes):
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(textwrap.dedent(SLOW_START))
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(slow), os.environ.get("PYTHONPATH")) if p)}
    run_dir = tmp_path / "run"
    extra = ["--processes", str(processes)] if processes > 1 else []
    result = sojourn(
        "run", write_scenario(tmp_path / "s.yaml", SCENARIO), "--out", str(run_dir), *extra, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]

    run = json.loads((run_dir / "run.json").read_text())
    barrier = run["start_barrier"]
    # Every participant waited for the slow proxy; start-up took at least its delay.
    assert barrier["participants"] == barrier["ready"] == PRODUCERS + 2
    assert barrier["timed_out"] is False
    assert barrier["startup_s"] >= PROXY_DELAY_S

    t0 = run["t0_ns"]
    publishes = read_rows(run_dir, "publish")
    deliveries = read_rows(run_dir, "delivery")
    # Each worker process runs its share of every group: one producer and one consumer each.
    for rows, column in ((publishes, "producer"), (deliveries, "consumer")):
        workers = Counter(name.split("/")[1] for name in {r[column] for r in rows})
        assert sorted(workers.values()) == [2 // processes] * processes, (column, workers)
    late_ms = sorted((p["publish_ns"] - p["intended_ns"]) / 1e6 for p in publishes)
    first = min(publishes, key=lambda p: p["intended_ns"])
    # The first scheduled publish left on time (not the proxy's delay late), and no burst followed.
    assert (first["publish_ns"] - first["intended_ns"]) / 1e6 < ON_TIME_MS, first
    assert late_ms[int(0.99 * (len(late_ms) - 1))] < ON_TIME_MS, late_ms[-10:]
    published_on_schedule(publishes, RATE, DURATION_S)  # nothing scheduled is missing

    # No dead second and no burst: every whole second of the measured window published and acked
    # about its share (a stall at a second's edge moves a few messages into the next one).
    per_second = Counter((p["publish_ns"] - t0) // S for p in publishes)
    acked = Counter((d["settle_ns"] - t0) // S for d in deliveries if d["outcome"] == "ack")
    share = PRODUCERS * RATE
    for second in range(WARMUP_S, DURATION_S):
        assert 0.75 * share <= per_second[second] <= 1.25 * share, (second, per_second)
        assert acked[second] >= 0.75 * share, (second, acked)

    # The headline throughput is the rate sent, not diluted by start-up.
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["throughput"]["ack_per_s"] == pytest.approx(PRODUCERS * RATE, rel=0.03)
    assert summary["messages"]["unaccounted"] == 0
    assert summary["run"]["start_barrier"] == barrier
