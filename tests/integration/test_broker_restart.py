"""The broker crashes and restarts mid-run: the run notices, declares its queue again, goes on, and
accounts for every message, the ones the broker lost with its non-durable queue included.

A private node (loadgen.broker.ManagedBroker), killed with SIGKILL five seconds into the load and
started again on the same port and data directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest

from loadgen.broker import ManagedBroker
from tests.integration.conftest import free_port, start_sojourn, wait_for_t0, write_scenario
from tests.integration.traces import read_rows

pytestmark = pytest.mark.skipif(
    shutil.which("rabbitmq-server") is None and not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="rabbitmq-server is not installed",
)

# 100 msg/s in, at most ~66/s out (15 ms each): a backlog of a few hundred waits in the
# non-durable queue when the node dies. The node takes 5-6 s to come back on an idle machine of
# two cores and took over 20 s once in CI: 40 s leaves load after the restart either way.
RATE = 100
DURATION_S = 40
SCENARIO = f"""
name: it-broker-restart
queue: {{name: sojourn.it.broker-restart, purge_on_start: true, durable: false}}
run: {{duration_s: {DURATION_S}, warmup_s: 1, drain_timeout_s: 30}}
producers: [{{name: p, rate: {RATE}, confirms: true}}]
consumers: [{{name: c, prefetch: 20, processing_ms: 15}}]
"""
# The queue sampler asks every second whether the broker is back and lost its state.
NOTICED_WITHIN_S = 5


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture
def node(tmp_path):
    broker = ManagedBroker(tmp_path / "broker", port=free_port())
    try:
        broker.start(timeout=90)
        yield broker
    finally:
        broker.stop(timeout=30, purge=True)


def test_a_broker_restart_is_noticed_and_what_it_lost_is_accounted_for(node, tmp_path, analyze_in_process):
    run_dir = tmp_path / "run"
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO)
    proc = start_sojourn("run", scenario, "--out", str(run_dir), "--no-analyze", env={"SOJOURN_AMQP_URL": node.url})
    try:
        t0 = wait_for_t0(proc, run_dir)
        time.sleep(max(0.0, t0 + 5 - time.time()))
        pid = node.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)  # a crash: nothing flushed, no connection closed cleanly
        killed_ns = time.time_ns()
        deadline = time.monotonic() + 30
        while (node.pid() is not None or _listening(node.port)) and time.monotonic() < deadline:
            time.sleep(0.1)  # a killed node's listener goes with its last thread, a moment after the pid
        node.start(timeout=90)
        back_ns = time.time_ns()  # the node answers AMQP again
        _stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    assert "the broker lost its in-memory state (it restarted)" in stderr

    restarts = [e for e in read_rows(run_dir, "event") if e["kind"] == "broker_restart"]
    assert len(restarts) == 1
    restart_ns = restarts[0]["ts_ns"]
    assert killed_ns < restart_ns < back_ns + NOTICED_WITHIN_S * 10**9, (
        f"killed at t0+{killed_ns / 1e9 - t0:.1f} s, back at t0+{back_ns / 1e9 - t0:.1f} s, "
        f"the restart noticed at t0+{restart_ns / 1e9 - t0:.1f} s"
    )
    assert json.loads(restarts[0]["detail"])["queue_durable"] is False
    publishes = read_rows(run_dir, "publish")
    left_s = t0 + DURATION_S - restart_ns / 1e9  # of the run's load after the restart was noticed
    assert left_s > 10, f"the node took {(back_ns - killed_ns) / 1e9:.1f} s to come back: too late to test the rest"
    after = [p for p in publishes if p["publish_ns"] > restart_ns]
    assert len(after) > 0.8 * RATE * left_s, f"publishing went on after the restart ({RATE}/s for {left_s:.1f} s)"

    summary = analyze_in_process(run_dir)
    m = summary["messages"]
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["published"] == len({p["message_id"] for p in publishes})
    assert m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]
    # what waited in the queue at the crash (a backlog growing ~34/s for ~4 s) went with it
    assert m["discarded"]["lost_with_queue"] > 50
    # independently: reached the broker by the restart, never acked and not in the leftover census ->
    # lost with the queue. The restart is stamped when the run noticed it, up to a few seconds after
    # the node was back: a message the new node confirmed in between and kept is left in the broker
    # (docs/summary.md, class 13 before 15).
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    left = {r["message_id"] for r in read_rows(run_dir, "leftover")}
    lost = {
        p["message_id"]
        for p in publishes
        if p["outcome"] == "confirmed"
        and p["publish_ns"] <= restarts[0]["ts_ns"]
        and p["message_id"] not in acked
        and p["message_id"] not in left
    }
    assert lost and len(lost) <= m["discarded"]["lost_with_queue"]
