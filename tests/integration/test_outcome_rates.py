"""Outcome rates on the real broker (docs/scenarios.md, "outcomes"): a group that requeues,
discards and rejects shares of its deliveries as drawn, each outcome within a binomial bound of its
rate, the broker's dead-letters matching the consumers' discards one for one, the requeued messages
redelivered with the flag, and every message accounted for; and a quorum queue with a delivery
limit and no dead-letter exchange, which drops what is requeued past the limit.

Expected values come from the traces read with pyarrow (tests/integration/traces.py) and from the
rates in the scenario text, not from the analysis."""

from __future__ import annotations

import collections

import pika
import pytest

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

PREFIX = "sojourn.it.outcomes"
DLX = f"{PREFIX}.dlx"
RATES = {"nack_requeue": 0.2, "nack_discard": 0.1, "reject": 0.1}
DELIVERY_LIMIT = 1

SCENARIOS = {
    # 1,200 messages into two consumers that requeue 20 %, discard 10 % and reject 10 % of what they
    # process; the queue's DLX turns each discard and reject into a `rejected` dead-letter.
    "rates": f"""
name: it-outcome-rates
queue:
  name: {PREFIX}.rates
  arguments: {{x-dead-letter-exchange: {DLX}}}
  delete_on_end: true
exchanges:
  - {{name: {DLX}, type: fanout, durable: false, delete_on_end: true}}
run: {{duration_s: 4, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 300}}
consumers:
  - name: c
    count: 2
    prefetch: 20
    processing_ms: 1
    outcomes: {{requeue: 0.2, discard: 0.1, reject: 0.1, seed: 5}}
""",
    # Every delivery requeued half the time on a quorum queue that takes back a message at most
    # once: a message requeued twice is dropped (no dead-letter exchange).
    "limit": f"""
name: it-outcome-limit
queue:
  name: {PREFIX}.limit
  type: quorum
  arguments: {{x-delivery-limit: {DELIVERY_LIMIT}}}
  delete_on_end: true
run: {{duration_s: 2, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 200}}
consumers:
  - name: c
    prefetch: 20
    outcomes: {{requeue: 0.5, seed: 9}}
""",
}

for _case, _text in SCENARIOS.items():
    run_in_batch(__name__, f"outcomes-{_case}", _text)


def _cleanup() -> None:
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    channel = connection.channel()
    for queue in (f"{PREFIX}.rates", f"{PREFIX}.limit", f"sojourn.{PREFIX}.rates.dead-letters"):
        channel.queue_delete(queue)
    channel.exchange_delete(DLX)
    connection.close()


@pytest.fixture(scope="module")
def runs(batch, analyze_in_process):
    try:
        done = {case: batch[f"outcomes-{case}"] for case in SCENARIOS}
        for case, ran in done.items():
            assert ran.returncode == 0, f"{case}: {ran.stderr[-3000:]}"
        yield {case: (ran.run_dir, analyze_in_process(ran.run_dir)) for case, ran in done.items()}
    finally:
        _cleanup()


def _five_sigma(n: int, p: float) -> float:
    return 5 * (n * p * (1 - p)) ** 0.5


def test_each_outcome_is_drawn_at_its_rate_and_every_discard_is_the_consumers(runs):
    run_dir, summary = runs["rates"]
    deliveries = read_rows(run_dir, "delivery")
    decided = [d for d in deliveries if d["end_ns"] is not None and d["outcome"] in ("ack", *RATES)]
    counts = collections.Counter(d["outcome"] for d in decided)
    n = len(decided)
    assert n >= 1_200  # every message at least once, the requeued ones again
    for outcome, p in RATES.items():
        assert abs(counts[outcome] - n * p) <= _five_sigma(n, p), (outcome, counts[outcome], n)
        assert {d["settled_by"] for d in decided if d["outcome"] == outcome} == {"rate"}
    assert {d["settled_by"] for d in decided if d["outcome"] == "ack"} == {None}

    published = {p["message_id"] for p in read_rows(run_dir, "publish")}
    discarded = {d["message_id"] for d in deliveries if d["outcome"] == "nack_discard"}
    rejected = {d["message_id"] for d in deliveries if d["outcome"] == "reject"}
    acked = {d["message_id"] for d in deliveries if d["outcome"] == "ack"}
    dead = {r["message_id"] for r in read_rows(run_dir, "deadletter") if r["reason"] == "rejected"}
    assert not (discarded | rejected) & acked  # settled without requeue: never delivered again
    assert dead & published == discarded | rejected  # the broker dead-lettered exactly those
    # A requeued message comes back flagged, and each of its deliveries carries its id.
    requeued = [d for d in deliveries if d["outcome"] == "nack_requeue"]
    later = collections.defaultdict(list)
    for d in deliveries:
        later[d["message_id"]].append(d)
    for d in requeued:
        after = [x for x in later[d["message_id"]] if x["receive_ns"] > d["receive_ns"]]
        assert after and all(x["redelivered"] for x in after)

    m = summary["messages"]
    assert m["discarded"]["consumer_nack_discard"] == len(discarded)
    assert m["discarded"]["consumer_reject"] == len(rejected)
    assert m["discarded"]["dead_lettered_rejected"] == 0  # the cause is counted, not its dead-letter
    assert m["acked"] == len(acked) and m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["published"] == len(published) == m["acked"] + m["discarded_total"] + m["left_in_broker"]

    (row,) = summary["outcomes"]["phases"]
    assert row["decided"] == n and row["requeued"] == counts["nack_requeue"]
    assert row["discarded"] == counts["nack_discard"] and row["rejected"] == counts["reject"]
    assert row["configured"] == {"requeue": 0.2, "discard": 0.1, "reject": 0.1}
    (followed,) = summary["outcomes"]["requeued"]
    assert followed["messages"] == len({d["message_id"] for d in requeued})
    assert summary["codel"]["consumers"] == []  # the outcome rates' nacks are not CoDel's


def test_a_quorum_queue_drops_what_is_requeued_past_its_delivery_limit(runs):
    run_dir, summary = runs["limit"]
    deliveries = read_rows(run_dir, "delivery")
    published = {p["message_id"] for p in read_rows(run_dir, "publish")}
    by_id = collections.defaultdict(list)
    for d in deliveries:
        by_id[d["message_id"]].append(d["outcome"])
    acked = {i for i, outcomes in by_id.items() if "ack" in outcomes}
    # Returned more often than the limit allows: every delivery of it requeued, limit + 1 of them.
    dropped = {i for i, outcomes in by_id.items() if outcomes == ["nack_requeue"] * (DELIVERY_LIMIT + 1)}
    assert dropped and acked and dropped | acked == published
    m = summary["messages"]
    assert m["discarded"]["dropped_delivery_limit"] == len(dropped)
    assert m["acked"] == len(acked) and m["unaccounted"] == 0, m["unaccounted_ids"]
    assert m["left_in_broker"] == 0
