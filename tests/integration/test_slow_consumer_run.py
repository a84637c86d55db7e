"""Slow-consumer detection on a real run: a slow and a fast consumer on one backlogged queue."""

from __future__ import annotations

import bisect
import json
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import REPO, write_scenario
from tests.integration.traces import read_rows

# 120 msg/s offered; both consumers together serve under 100/s, so a backlog is ready in the
# broker from the first seconds to the end of publishing. Every connection goes through the delay line
# (5 ms each way): the fast consumer (prefetch 1, no processing) acks at once and then waits a
# 10 ms round trip for its next delivery, so its window is almost never full; the slow one
# (prefetch 5, 200 ms each) has all 5 unacked for all but ~10 ms of each 200 ms.
SCENARIO = """
name: it-slow-consumers
queue: {name: sojourn.it.slow-consumers, purge_on_start: true, delete_on_end: true}
run: {duration_s: 8, drain_timeout_s: 30}
network: {upstream: {latency_ms: 5}, downstream: {latency_ms: 5}}
producers: [{name: p, rate: 120}]
consumers:
  - {name: fast, prefetch: 1, processing_ms: 0}
  - {name: slow, prefetch: 5, processing_ms: 200}
"""


def test_the_slow_consumer_is_full_with_messages_waiting_and_the_fast_one_is_not(tmp_path: Path, analyze_in_process):
    scenario = write_scenario(tmp_path / "s.yaml", SCENARIO)
    run_dir = tmp_path / "run"
    result = subprocess.run(
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
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "queue sampler:" in result.stderr  # its cost is logged at the end

    events = read_rows(run_dir, "event")
    samples = sorted((e for e in events if e["kind"] == "queue_sample"), key=lambda e: e["ts_ns"])
    joined = max(e["ts_ns"] for e in events if e["kind"] == "consumer_join")
    drain = min(e["ts_ns"] for e in events if e["kind"] == "drain_start")
    steady = [e for e in samples if joined + 1e9 <= e["ts_ns"] <= drain]  # both consuming, backlog built
    assert len(steady) >= 3  # about one a second
    assert all(e["value"] >= 0 for e in samples)
    assert all(json.loads(e["detail"])["consumers"] == 2 for e in steady)
    assert all(e["value"] > 0 for e in steady)  # the backlog is there while publishing
    assert {json.loads(e["detail"])["source"] for e in samples} <= {"declare", "declare+management"}
    # Each sample's ready count against the traces: published before it minus received before it.
    # That is at least ready (messages still on their way to the queue and deliveries not yet read
    # by a client count in it, not in ready; a few the other way when a publish stamped just after
    # the sample's midpoint reached the queue before the broker counted) and exceeds it by at most
    # what was in flight: the two prefetch windows (6) and a fraction of a second of publishes.
    # Measured: 0 to 5 above ready.
    published = sorted(p["publish_ns"] for p in read_rows(run_dir, "publish"))
    received = sorted(d["receive_ns"] for d in read_rows(run_dir, "delivery"))
    for e in samples:
        in_traces = bisect.bisect_right(published, e["ts_ns"]) - bisect.bisect_right(received, e["ts_ns"])
        assert -5 <= in_traces - e["value"] <= 6 + 30, (e, in_traces)

    summary = analyze_in_process(run_dir)
    block = summary["slow_consumers"]
    rows = {c["group"]: c for c in block["consumers"]}
    assert set(rows) == {"fast", "slow"} and block["excluded"] == []
    assert block["samples"] == len(samples)
    slow, fast = rows["slow"], rows["fast"]
    assert slow["seconds_sampled"] >= 6 and fast["seconds_sampled"] >= 6
    assert slow["share"] >= 0.6, slow
    assert fast["share"] <= 0.3, fast
    assert block["consumers"][0]["group"] == "slow"  # worst first
    assert [r["t_s"] for r in summary["queue_depth"]] == sorted(r["t_s"] for r in summary["queue_depth"])
    assert all(e["kind"] != "queue_sample" for e in summary["events"])
    assert "Slow consumers" in (run_dir / "report.html").read_text()
