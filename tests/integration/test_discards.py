"""Discards end to end: overflow and expiry dead-lettered through a DLX are captured and accounted
by reason, publishes a full queue refuses are rejections at publish, a CoDel consumer's
nack without requeue is a consumer discard (and its `rejected` dead-letter is not counted twice),
and nothing ends up unaccounted (docs/discards.md).

The four loads run at once (each on its own queue, in the integration tests' batch), then one Spark
session analyses them in turn: a `sojourn run` with analysis per case would pay for Spark three times.
"""

from __future__ import annotations

import pytest

from tests.integration.conftest import run_in_batch
from tests.integration.traces import independent_outcomes, read_rows

DLX = "sojourn.it.discards.dlx"
TTL_MS = 200

COMMON = """
run:
  duration_s: 4
  warmup_s: 0
  drain_timeout_s: 20
producers:
  - name: p
    rate: 150
    arrival: constant
    confirms: true
    confirm_window: 100
"""

SCENARIOS = {
    # A consumer at 20 ms (50 msg/s) behind 150 msg/s: the queue sits at its 50-message cap and
    # the broker drops from the head into the DLX.
    "maxlen": f"""
name: it-discards-maxlen
queue:
  name: sojourn.it.discards.maxlen
  purge_on_start: true
  arguments: {{x-max-length: 50, x-overflow: drop-head, x-dead-letter-exchange: {DLX}}}
  delete_on_end: true
{COMMON}
consumers:
  - name: c
    prefetch: 10
    processing_ms: 20
""",
    # The consumer is away from 1 s to 3 s: what is published meanwhile waits longer than the
    # 200 ms TTL and expires into the DLX.
    "expired": f"""
name: it-discards-expired
queue:
  name: sojourn.it.discards.expired
  purge_on_start: true
  arguments: {{x-message-ttl: {TTL_MS}, x-dead-letter-exchange: {DLX}}}
  delete_on_end: true
{COMMON}
consumers:
  - name: c
    prefetch: 10
    processing_ms: 2
timeline:
  - name: away
    start_s: 1
    end_s: 3
    set:
      consumers.c.count: 0
""",
    # No DLX: with reject-publish a full queue nacks the publish itself.
    "rejected": """
name: it-discards-rejected
queue:
  name: sojourn.it.discards.rejected
  purge_on_start: true
  arguments: {x-max-length: 50, x-overflow: reject-publish}
  delete_on_end: true
"""
    + COMMON
    + """
consumers:
  - name: c
    prefetch: 10
    processing_ms: 20
""",
    # A consumer at 20 ms behind 150 msg/s with CoDel (target 5 ms, no requeue): its buffer's
    # sojourn stays above target, so CoDel nacks deliveries with requeue=false; the queue's DLX
    # turns each into a dead-letter with reason `rejected`.
    "codel": f"""
name: it-discards-codel
queue:
  name: sojourn.it.discards.codel
  purge_on_start: true
  arguments: {{x-dead-letter-exchange: {DLX}}}
  delete_on_end: true
{COMMON}
consumers:
  - name: c
    prefetch: 20
    processing_ms: 20
    codel: {{target_ms: 5, interval_ms: 50, requeue: false}}
""",
}


for _case, _text in SCENARIOS.items():
    run_in_batch(__name__, f"discards-{_case}", _text)


@pytest.fixture(scope="module")
def runs(batch, analyze_in_process):
    """case -> (run_dir, stderr, summary): the four loads, started together with the batch, then
    analysed on the integration tests' shared Spark session."""
    done = {case: batch[f"discards-{case}"] for case in SCENARIOS}
    for case, ran in done.items():
        assert ran.returncode == 0, f"{case}: {ran.stderr[-3000:]}"
    return {case: (ran.run_dir, ran.stderr, analyze_in_process(ran.run_dir)) for case, ran in done.items()}


def test_overflow_dropped_from_the_head_is_dead_lettered_and_accounted_as_maxlen(runs):
    run_dir, stderr, summary = runs["maxlen"]
    m = summary["messages"]
    got = independent_outcomes(run_dir)
    gone = got["published"] - got["acked"] - got["left"]
    assert m["discarded"]["dead_lettered_maxlen"] > 0
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    # Every message neither acked nor left in the queue was captured, dropped for the length cap.
    assert m["discarded"]["dead_lettered_maxlen"] == len(gone)
    assert len(gone) == len(got["published"]) - m["acked"] - m["left_in_broker"]
    assert gone == got["maxlen"] & got["published"]
    assert m["discarded_total"] == m["discarded"]["dead_lettered_maxlen"]
    assert "warning: queue.arguments" not in stderr


def test_messages_older_than_the_ttl_are_dead_lettered_and_accounted_as_expired(runs):
    run_dir, _, summary = runs["expired"]
    m = summary["messages"]
    got = independent_outcomes(run_dir)
    gone = got["published"] - got["acked"] - got["left"]
    assert m["discarded"]["dead_lettered_expired"] == len(gone) > 0
    assert gone == got["expired"] & got["published"]
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    # The broker kept each one at least its TTL (same host, same clock) before dead-lettering it;
    # the other runs' dead-letters through the shared exchange were not recorded here.
    sent = {p["message_id"]: p["publish_ns"] for p in read_rows(run_dir, "publish")}
    for row in read_rows(run_dir, "deadletter"):
        assert row["received_ns"] - sent[row["message_id"]] >= TTL_MS * 1e6
        assert row["queue"] == "sojourn.it.discards.expired" and row["exchange"] == DLX


def test_publishes_a_full_queue_refuses_are_rejections_at_publish(runs):
    run_dir, stderr, summary = runs["rejected"]
    m = summary["messages"]
    got = independent_outcomes(run_dir)
    assert m["discarded"]["publish_rejected_maxlen"] == len(got["nacked"] - got["acked"]) > 0
    assert m["discarded"]["publish_nacked"] == 0
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]
    assert read_rows(run_dir, "deadletter") == []  # no DLX: nothing to capture, nothing declared
    assert "warning: queue.arguments" not in stderr  # reject-publish with confirms needs no DLX


def test_a_codel_nack_without_requeue_is_a_consumer_discard_counted_once(runs):
    run_dir, _, summary = runs["codel"]
    m = summary["messages"]
    deliveries = read_rows(run_dir, "delivery")
    nacked = {d["message_id"] for d in deliveries if d["outcome"] == "nack_discard"}
    acked = {d["message_id"] for d in deliveries if d["outcome"] == "ack"}
    published = {p["message_id"] for p in read_rows(run_dir, "publish")}
    rejected = {r["message_id"] for r in read_rows(run_dir, "deadletter") if r["reason"] == "rejected"} & published
    assert nacked and not nacked & acked  # a message nacked without requeue never comes back
    # The broker dead-lettered exactly what the consumer nacked, and the cause (the nack) is the class.
    assert rejected == nacked
    assert m["discarded"]["consumer_nack_discard"] == len(nacked)
    assert m["discarded"]["dead_lettered_rejected"] == 0
    assert m["acked"] == len(acked)
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]
