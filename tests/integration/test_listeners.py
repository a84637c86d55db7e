"""Every message reaches Locust's `request` event: a listener loaded beside sojourn's locustfile,
as a plugin's is, counts as many publishes and acks as the run's summary.json reports."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import run_in_batch
from tests.integration.traces import published_on_schedule, read_rows

pytestmark = pytest.mark.integration

RATE, DURATION_S = 150, 4

SCENARIO = f"""
name: it-listeners
queue:
  name: sojourn.it.listeners
  purge_on_start: true
  delete_on_end: true
run:
  duration_s: {DURATION_S}
  warmup_s: 1
  drain_timeout_s: 10
producers:
  - name: p
    rate: {RATE}
    arrival: constant
    confirms: true
consumers:
  - name: c
    prefetch: 20
    processing_ms: 1
"""

run_in_batch(
    __name__,
    "listeners",
    SCENARIO,
    command="locust",
    extra=("-f", "loadgen/locustfile.py,tests/integration/request_counter.py"),
)


def test_a_listener_hears_every_publish_and_every_ack_the_summary_counts(batch, analyze_in_process):
    ran = batch["listeners"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    counts = json.loads((ran.run_dir / "request_counts.json").read_text())
    summary = analyze_in_process(ran.run_dir)
    messages = summary["messages"]
    assert messages["unaccounted"] == 0
    # a constant 150 msg/s for 4 s (the last arrivals of the run's end excepted: the last one is due
    # 6.7 ms before it, and a send the run's end overtakes is not made), every one confirmed and acked
    published = published_on_schedule(read_rows(ran.run_dir, "publish"), RATE, DURATION_S)
    assert messages["published"] == messages["acked"] == published
    assert counts.get("publish:success") == messages["confirmed"]
    assert counts.get("consume:success") == messages["acked"]
    assert not any(key.endswith(":failure") for key in counts), counts
