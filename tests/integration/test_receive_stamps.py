"""Kernel receive stamps end to end (issue 19): a consumer whose process is stalled does not turn
the wait of its deliveries in the socket into broker + network time.

The run goes through the delay line (150 ms broker -> consumer), so deliveries keep reaching the
consumer's socket for 150 ms after the load generator's process is frozen (SIGSTOP for 0.4 s; the
proxy is a process of its own and goes on). Those deliveries wait in the socket until the process
runs again. The expected values come from the configuration and the test's own clock: with kernel
stamps, every delivery's broker + network time stays near the configured 150 ms; the read stamps
(what a reader without kernel stamps gets: read_ns) show the stall, as socket wait.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from tests.integration.conftest import load_generator_pid, start_sojourn, wait_for_t0, write_scenario
from tests.integration.traces import read_rows

DOWNSTREAM_MS = 150
STALL_S = 0.4

SCENARIO = f"""
name: it-receive-stamps
queue: {{name: sojourn.it.receive-stamps, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: 6, warmup_s: 1, drain_timeout_s: 10}}
network:
  downstream: {{latency_ms: {DOWNSTREAM_MS}}}
producers: [{{name: p, rate: 200, arrival: constant, size_bytes: 64}}]
consumers: [{{name: c, prefetch: 500, processing_ms: 0.2}}]
"""


def test_a_stalled_consumer_counts_the_socket_wait_in_its_sojourn_not_in_the_network(tmp_path: Path):
    run_dir = tmp_path / "run"
    proc = start_sojourn("run", write_scenario(tmp_path / "s.yaml", SCENARIO), "--out", str(run_dir))
    try:
        time.sleep(max(0.0, wait_for_t0(proc, run_dir) + 3 - time.time()))
        locust = load_generator_pid(run_dir)
        os.kill(locust, signal.SIGSTOP)
        stopped_ns = time.time_ns()
        time.sleep(STALL_S)
        os.kill(locust, signal.SIGCONT)
        resumed_ns = time.time_ns()
        _stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]

    run = json.loads((run_dir / "run.json").read_text())
    assert run["receive_stamp"] == {"source": "kernel", "reason": None}
    deliveries = [d for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"]
    # Deliveries that reached the socket while the process was frozen, by the kernel's stamp.
    stalled = [d for d in deliveries if stopped_ns + 20_000_000 <= d["receive_ns"] < resumed_ns - 50_000_000]
    assert len(stalled) >= 10, len(stalled)
    for d in stalled:
        # Never earlier than the delay line lets bytes arrive, and read only once the process ran again.
        assert d["receive_ns"] >= d["publish_ns"] + (DOWNSTREAM_MS - 1) * 1_000_000, d
        assert d["read_ns"] >= resumed_ns - 5_000_000, d
    # Broker + network by the kernel's stamps: the configured delay, plus at most one read's spread
    # (a read of up to 4,096 bytes carries the stamp of its last segment: loadgen/amqp/kstamp.py).
    # A reader stamping at the read (read_ns) would have put the whole stall there.
    kernel_ms = sorted((d["receive_ns"] - d["publish_ns"]) / 1e6 for d in stalled)
    read_ms = sorted((d["read_ns"] - d["publish_ns"]) / 1e6 for d in stalled)
    assert kernel_ms[len(kernel_ms) // 2] < DOWNSTREAM_MS + 0.5 * STALL_S * 1000 <= read_ms[len(read_ms) // 2]

    summary = json.loads((run_dir / "summary.json").read_text())
    socket_wait = summary["latency_ms"]["socket_wait"]
    assert socket_wait["max"] >= 0.5 * STALL_S * 1000
    assert summary["sojourn_ms"]["max"] >= socket_wait["max"]  # the wait is part of the sojourn
    assert abs(summary["latency_ms"]["broker_network"]["p50"] - DOWNSTREAM_MS) < 10
    assert summary["messages"]["unaccounted"] == 0
