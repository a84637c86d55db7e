"""Egress classes end to end: a consumer whose buffer is split into a high and a low class, fed
more low-priority work than it can do, discards the low class's oldest deliveries (acking them),
serves the high class first, and every discard is accounted for."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

MAX_DEPTH_UNITS, SIZE_BYTES = 100, 3000  # 3,000 B = 2 work units: a class holds at most 50 messages

# 100 msg/s, 30 % priority 5, 70 % priority 1; 20 ms of work each (50 msg/s served). The high
# class (30 msg/s) never waits long; the low class gets what is left (about 20 msg/s of its 70),
# fills its 50 messages within about a second and then discards about 50 a second. Manual ack
# with a prefetch far above what the classes hold: the broker never stops pushing.
SCENARIO = f"""
name: it-egress
queue: {{name: sojourn.it.egress, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: 6, drain_timeout_s: 20}}
producers:
  - name: p
    rate: 100
    size_bytes: {SIZE_BYTES}
    confirms: true
    priority: {{5: 0.3, 1: 0.7}}
consumers:
  - name: sub
    prefetch: 2000
    processing_ms: 20
    egress: {{max_depth_units: {MAX_DEPTH_UNITS}, min_burst: 4, classes: {{high: [5, 255], low: default}}}}
"""
run_in_batch(__name__, "egress", SCENARIO)


@pytest.fixture(scope="module")
def run(batch, analyze_in_process):
    ran = batch["egress"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "warning: consumers.sub.egress" not in ran.stderr  # 2,000 x 2 units can overflow 100
    return run_dir, analyze_in_process(run_dir), read_rows(run_dir, "delivery"), read_rows(run_dir, "publish")


def test_only_the_low_class_discards_and_every_discard_is_accounted(run):
    _, summary, deliveries, publishes = run
    discards = [d for d in deliveries if d["outcome"] == "egress_discard"]
    assert discards, "the low class never overflowed"
    assert {d["egress_class"] for d in discards} == {"low"}
    assert all(d["priority"] == 1 for d in discards)
    # discarded with manual ack: acked, never processed
    assert all(d["start_ns"] is None and d["settle_ns"] >= d["receive_ns"] for d in discards)

    m = summary["messages"]
    discarded_ids = {d["message_id"] for d in discards}
    assert m["discarded"]["egress_discard"] == len(discarded_ids) == len(discards)
    assert m["unaccounted"] == 0 and m["left_in_broker"] == 0
    assert m["published"] == len(publishes) == m["acked"] + m["discarded"]["egress_discard"]


def test_the_summary_per_class_agrees_with_the_raw_rows(run):
    _, summary, deliveries, _ = run
    block = summary["egress"]["sub"]
    assert (block["max_depth_units"], block["min_burst"]) == (MAX_DEPTH_UNITS, 4)
    classes = {c["class"]: c for c in block["classes"]}
    assert list(classes) == ["high", "low"]
    for name, c in classes.items():
        rows = [d for d in deliveries if d["egress_class"] == name]
        delivered = [d for d in rows if d["start_ns"] is not None]
        in_buffer = [d for d in rows if d["start_ns"] is None and d["outcome"] != "egress_discard"]
        assert c["delivered"] == len(delivered)
        assert c["discards"] == sum(d["outcome"] == "egress_discard" for d in rows)
        assert c["in_buffer_at_end"] == len(in_buffer) == 0  # a clean leave processes what is left
        assert c["delivered"] + c["discards"] + c["in_buffer_at_end"] == len(rows)
        assert c["discard_indications"] == sum(d["discard_indication"] is True for d in rows)
        assert c["high_water"] == {
            "messages": max(d["egress_length"] for d in rows),
            "units": max(d["egress_units"] for d in rows),
        }
    assert classes["high"]["discards"] == 0
    # the low class filled up to its max depth (50 messages of 2 units) and never beyond it
    assert classes["low"]["high_water"] == {"messages": MAX_DEPTH_UNITS // 2, "units": MAX_DEPTH_UNITS}
    assert all(d["egress_units"] == 2 * d["egress_length"] <= MAX_DEPTH_UNITS for d in deliveries)


def test_the_high_class_is_always_served_before_the_low_class(run):
    _, summary, deliveries, _ = run
    high = [d for d in deliveries if d["egress_class"] == "high"]
    low_taken = [d for d in deliveries if d["egress_class"] == "low" and d["start_ns"] is not None]
    # strict priority: when a low message was taken, no high message was waiting in the buffer
    # (read_ns: in it once the process read it; receive_ns is when its bytes reached the socket)
    waiting_high = [
        (lo["message_id"], h["message_id"])
        for lo in low_taken
        for h in high
        if h["read_ns"] < lo["start_ns"] < h["start_ns"]
    ]
    assert waiting_high == []
    classes = {c["class"]: c for c in summary["egress"]["sub"]["classes"]}
    assert classes["high"]["sojourn_ms"]["p99"] < classes["low"]["sojourn_ms"]["p50"]


def test_the_oldest_low_message_is_the_one_discarded(run):
    _, _, deliveries, _ = run
    low = [d for d in deliveries if d["egress_class"] == "low"]
    discards = sorted((d for d in low if d["outcome"] == "egress_discard"), key=lambda d: d["settle_ns"])
    assert [d["read_ns"] for d in discards] == sorted(d["read_ns"] for d in discards)
    # when one was discarded, no older low message was still waiting in the buffer (older: read
    # into it earlier)
    older_waiting = [
        (x["message_id"], y["message_id"])
        for x in discards
        for y in low
        if y["start_ns"] is not None and y["read_ns"] < x["read_ns"] and y["start_ns"] > x["settle_ns"]
    ]
    assert older_waiting == []


def test_the_first_message_taken_after_a_discard_carries_the_indication(run):
    _, _, deliveries, _ = run
    taken = sorted((d for d in deliveries if d["start_ns"] is not None), key=lambda d: d["start_ns"])
    discard_times = sorted(d["settle_ns"] for d in deliveries if d["outcome"] == "egress_discard")
    previous = 0
    got, expected = [], []
    for d in taken:
        expected.append(any(previous < t <= d["start_ns"] for t in discard_times))
        got.append(d["discard_indication"])
        previous = d["start_ns"]
    assert Counter(got)[True] > 0
    assert got == expected
