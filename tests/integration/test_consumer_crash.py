"""A consumer that crashes on the timeline: the broker requeues what it held, and the traces and the
analysis agree with the broker's own counters.

150 messages are published in the first 2 s to one consumer (prefetch 20, 50 ms per message, so a
backlog builds). At t=2 the consumer crashes; nobody consumes until t=12, when it rejoins with 2 ms
processing and drains the rest. While nobody consumes, rabbitmqctl reads the queue's counters: the test
records when the call began and answered, and the traces say when the consumer crashed and rejoined.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.conftest import REPO, wait_for_t0, write_scenario
from tests.integration.traces import read_rows

QUEUE = "sojourn.it.consumer-crash"
SCENARIO = f"""
name: it-consumer-crash
queue: {{name: {QUEUE}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: 14, drain_timeout_s: 10}}
producers: [{{name: p, count: 0, rate: 75}}]
consumers: [{{name: c, prefetch: 20, processing_ms: 2}}]
timeline:
  - {{name: load, start_s: 0, end_s: 2, set: {{producers.p.count: 1, consumers.c.processing_ms: 50}}}}
  - {{name: crash, start_s: 2, end_s: 12, set: {{consumers.c.count: 0, consumers.c.leave: crash}}}}
"""
# rabbitmqctl starts a BEAM of its own: 2-4 s on a loaded machine of two cores, so the crash phase
# leaves it 9.5 s.
ASK_AT_S = 2.5
S = 1_000_000_000


def _queue_counters() -> dict[str, int] | None:
    """The broker's own view of the run's queue: ready, unacknowledged, consumers."""
    out = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "name", "messages_ready", "messages_unacknowledged", "consumers"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert out.returncode == 0, out.stderr
    for line in out.stdout.splitlines():
        fields = line.split("\t")
        if fields[0] == QUEUE:
            return dict(zip(("ready", "unacked", "consumers"), map(int, fields[1:4])))
    return None


@pytest.mark.skipif(shutil.which("rabbitmqctl") is None, reason="needs rabbitmqctl next to the broker")
def test_a_crash_requeues_what_the_consumer_held_and_the_accounting_closes(tmp_path: Path, analyze_in_process):
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO)
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            "loadgen/locustfile.py",
            "--headless",
            "--only-summary",
            "--scenario",
            scenario,
            "--run-dir",
            str(run_dir),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        t0 = wait_for_t0(proc, run_dir)  # the barrier's t0: the load starts there
        time.sleep(max(0.0, t0 + ASK_AT_S - time.time()))
        asked_ns = time.time_ns()
        counters = _queue_counters()
        answered_ns = time.time_ns()
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]

    publishes, deliveries = read_rows(run_dir, "publish"), read_rows(run_dir, "delivery")
    events = read_rows(run_dir, "event")
    published = {p["message_id"] for p in publishes if p["outcome"] == "confirmed"}
    assert len(published) == len(publishes) > 100
    (crash,) = [e for e in events if e["kind"] == "consumer_crash"]
    rejoin = min(e["ts_ns"] for e in events if e["kind"] == "consumer_join" and e["ts_ns"] > crash["ts_ns"])
    assert crash["ts_ns"] < asked_ns and answered_ns < rejoin, (
        f"rabbitmqctl asked at t0+{asked_ns / S - t0:.1f} s and answered at t0+{answered_ns / S - t0:.1f} s: "
        f"not inside the time nobody consumed (t0+{crash['ts_ns'] / S - t0:.1f} to t0+{rejoin / S - t0:.1f} s)"
    )
    assert not [e for e in events if e["kind"] == "connection_lost"]  # a crash is not a lost connection
    acked_before = [d for d in deliveries if d["outcome"] == "ack" and d["settle_ns"] < crash["ts_ns"]]
    crashed = [d for d in deliveries if d["outcome"] == "crashed"]

    # The broker's counters while nobody consumed: nothing unacked, the rest ready again.
    assert counters == {"ready": len(published) - len(acked_before), "unacked": 0, "consumers": 0}

    # What the consumer held came back: each crashed id delivered again, flagged redelivered.
    assert 0 < len(crashed) <= 20
    redelivered = [d for d in deliveries if d["redelivered"]]
    assert sorted(d["message_id"] for d in redelivered) == sorted(d["message_id"] for d in crashed)
    assert all(d["receive_ns"] > crash["ts_ns"] and d["outcome"] == "ack" for d in redelivered)
    detail = json.loads(crash["detail"])
    in_hand = [d for d in crashed if d["end_ns"] is not None]  # processed, never acked
    assert [d["message_id"] for d in in_hand] == [detail["in_hand"]] and detail["unacked"] == len(crashed)

    ends: dict[str, int] = {}
    for d in deliveries:
        if d["end_ns"] is not None:
            ends[d["message_id"]] = ends.get(d["message_id"], 0) + 1
    processed_twice = sum(1 for n in ends.values() if n > 1)
    assert processed_twice == 1

    summary = analyze_in_process(run_dir)
    assert summary["messages"]["unaccounted"] == 0 and summary["messages"]["acked"] == len(published)
    churn = summary["consumers_churn"]
    assert churn["churn"] is True and churn["nothing_lost"] is True
    (group,) = churn["groups"]
    assert (group["crashes"], group["joins"], group["rejoins"]) == (1, 2, 1)
    assert group["requeued_crashed"] == len(crashed)
    assert group["redelivered"] == len(redelivered)
    assert group["processed_twice"] == processed_twice
    assert group["acked_twice"] == 0
    assert group["held_then"] == {"acked": len(crashed)}
