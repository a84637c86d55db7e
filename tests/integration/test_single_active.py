"""Single active consumer on the real broker (x-single-active-consumer): the primary subscribes first
and is delivered to alone; two standbys subscribe at 1 s and get nothing; at 3 s the primary crashes
and the broker fails over to one standby, which receives everything after, the primary's unacked
deliveries included. The primary takes 20 ms a message against one arriving every 10 ms, so its
prefetch window is full when it crashes (at 5 ms a message it often held none: the crash then
requeued nothing and the redelivery could not be checked). The summary's failover and its gap
match the delivery traces read with pyarrow, the events say who became active when, the report
shows it, and every message is accounted for."""

from __future__ import annotations

import json

import pytest

from analysis.report import render_report
from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

QUEUE = "sojourn.it.single-active"

SCENARIO = f"""
name: it-single-active
queue:
  name: {QUEUE}
  purge_on_start: true
  delete_on_end: true
  arguments: {{x-single-active-consumer: true}}
run: {{duration_s: 5, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 100}}
consumers:
  - {{name: primary, prefetch: 10, processing_ms: 20, leave: crash}}
  - {{name: standby, count: 0, prefetch: 10, processing_ms: 5}}
timeline:
  - {{name: standbys, start_s: 1, set: {{consumers.standby.count: 2}}}}
  - {{name: failover, start_s: 3, set: {{consumers.standby.count: 2, consumers.primary.count: 0}}}}
"""

run_in_batch(__name__, "single-active", SCENARIO)


@pytest.fixture(scope="module")
def run(batch, analyze_in_process):
    ran = batch["single-active"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    return ran.run_dir, analyze_in_process(ran.run_dir)


def test_one_consumer_at_a_time_and_the_failover_gap_is_the_traces(run):
    run_dir, summary = run
    deliveries = sorted(read_rows(run_dir, "delivery"), key=lambda d: d["receive_ns"])
    primary = [d for d in deliveries if d["consumer_group"] == "primary"]
    standby = [d for d in deliveries if d["consumer_group"] == "standby"]
    assert primary and standby
    assert {d["consumer"] for d in standby} == {standby[0]["consumer"]}  # one standby only
    # Every delivery to the primary came before every delivery to the standby.
    assert primary[-1]["receive_ns"] < standby[0]["receive_ns"]
    # The primary crashed holding deliveries: the standby received them again, flagged.
    crashed = {d["message_id"] for d in primary if d["outcome"] == "crashed"}
    assert crashed and crashed <= {d["message_id"] for d in standby if d["redelivered"]}

    events = [e for e in read_rows(run_dir, "event") if e["kind"] == "consumer_active"]
    assert [e["source"] for e in events] == [primary[0]["consumer"], standby[0]["consumer"]]
    assert [json.loads(e["detail"])["receive_ns"] for e in events] == [
        primary[0]["receive_ns"],
        standby[0]["receive_ns"],
    ]

    block = summary["single_active_consumer"]
    (failover,) = block["failovers"]
    assert (failover["from"], failover["to"], failover["ended_by"]) == (
        primary[0]["consumer"],
        standby[0]["consumer"],
        "consumer_crash",
    )
    assert failover["gap_ms"] == pytest.approx((standby[0]["receive_ns"] - primary[-1]["receive_ns"]) / 1e6)
    assert block["overlaps"] == 0 and len(block["periods"]) == 2
    m = summary["messages"]
    assert m["unaccounted"] == 0 and m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]

    page = render_report(summary)
    assert 'id="single_active"' in page and "one active consumer at a time" in page
