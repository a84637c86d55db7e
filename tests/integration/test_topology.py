"""Scenario-declared topology against the real broker: a topic exchange routes only the keys its
bindings match, `delete_on_end` removes exchanges, a declaration the broker refuses stops the run
with exit 2 and advice; and the two discards a topology makes possible, each in exactly one
accounting class: a quorum queue's delivery limit, and reject-publish-dlx (docs/discards.md).

The three loads run at once (in the integration tests' batch), then share the integration tests'
Spark session (as test_discards).
Every queue and exchange name carries a per-session suffix and is deleted at the end.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pika
import pytest

from tests.integration.conftest import run_in_batch, sojourn, write_scenario
from tests.integration.traces import ids, independent_outcomes, read_rows

SUFFIX = uuid.uuid4().hex[:8]
PREFIX = f"sojourn.it.topology.{SUFFIX}"
TOPIC = f"{PREFIX}.orders"
DELIVERY_LIMIT = 2
MAX_LENGTH = 20

SCENARIOS = {
    # The queue is bound for orders.*: `hit` is routed, `miss` (mandatory) matches no binding.
    "topic": f"""
name: it-topology-topic
queue: {{name: {PREFIX}.topic, delete_on_end: true}}
exchanges:
  - {{name: {TOPIC}, type: topic, durable: false, delete_on_end: true}}
bindings:
  - {{exchange: {TOPIC}, routing_key: "orders.*"}}
run: {{duration_s: 2, drain_timeout_s: 10}}
producers:
  - {{name: hit, rate: 25, exchange: {TOPIC}, routing_key: orders.eu}}
  - {{name: miss, rate: 25, exchange: {TOPIC}, routing_key: audit.eu, mandatory: true}}
consumers:
  - {{name: c, prefetch: 20}}
""",
    # CoDel with a target of 1 us hands back (requeues) nearly every delivery that has another
    # behind it; the quorum queue dead-letters a message on the return past its delivery limit.
    "delivery_limit": f"""
name: it-topology-delivery-limit
queue:
  name: {PREFIX}.quorum
  type: quorum
  arguments: {{x-delivery-limit: {DELIVERY_LIMIT}, x-dead-letter-exchange: {PREFIX}.quorum.dlx}}
  delete_on_end: true
exchanges:
  - {{name: {PREFIX}.quorum.dlx, type: fanout, durable: false, delete_on_end: true}}
run: {{duration_s: 2, drain_timeout_s: 30}}
producers:
  - {{name: p, rate: 100}}
consumers:
  - name: c
    prefetch: 50
    processing_ms: 20
    codel: {{target_ms: 0.001, interval_ms: 0.001, requeue: true}}
""",
    # No consumer: the queue takes its first MAX_LENGTH messages and refuses the rest, nacking
    # each refused publish and dead-lettering it (reason maxlen).
    "reject_publish_dlx": f"""
name: it-topology-reject-publish-dlx
queue:
  name: {PREFIX}.capped
  arguments: {{x-max-length: {MAX_LENGTH}, x-overflow: reject-publish-dlx, x-dead-letter-exchange: {PREFIX}.capped.dlx}}
  delete_on_end: true
exchanges:
  - {{name: {PREFIX}.capped.dlx, type: fanout, durable: false, delete_on_end: true}}
# 3 s, not 1: in two fresh-clone runs of 2026-11-25 (load ~2) the producer joined only after a 1-s
# run's publishing had ended, behind the dead-letter capture's set-up (issue 18's start barrier).
run: {{duration_s: 3, drain_timeout_s: 1}}
producers:
  - {{name: p, rate: 100, confirm_window: 200}}
""",
}
DECLARED_EXCHANGES = (TOPIC, f"{PREFIX}.quorum.dlx", f"{PREFIX}.capped.dlx")


def _channel():
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1"))
    return connection, connection.channel()


def exchange_exists(name: str) -> bool:
    """A passive declare on a channel of its own (a missing exchange closes it)."""
    connection, channel = _channel()
    try:
        channel.exchange_declare(name, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker as exc:
        assert exc.reply_code == 404, exc
        return False
    finally:
        if connection.is_open:
            connection.close()


def cleanup(queues=(), exchanges=()) -> None:
    connection, channel = _channel()
    for queue in queues:
        channel.queue_delete(queue)
    for exchange in exchanges:
        channel.exchange_delete(exchange)
    connection.close()


for _case, _text in SCENARIOS.items():
    run_in_batch(__name__, f"topology-{_case}", _text)


@pytest.fixture(scope="module")
def runs(batch, analyze_in_process):
    """case -> (run_dir, summary): the three loads started together with the batch, then analysed in turn."""
    try:
        done = {case: batch[f"topology-{case}"] for case in SCENARIOS}
        for case, ran in done.items():
            assert ran.returncode == 0, f"{case}: {ran.stderr[-3000:]}"
        yield {case: (ran.run_dir, analyze_in_process(ran.run_dir)) for case, ran in done.items()}
    finally:
        cleanup(
            [f"{PREFIX}.{q}" for q in ("topic", "quorum", "capped")]
            + [f"sojourn.{PREFIX}.{q}.dead-letters" for q in ("quorum", "capped")],
            DECLARED_EXCHANGES,
        )


def _published_by(run_dir: Path, group: str) -> set:
    return ids([r for r in read_rows(run_dir, "publish") if r["producer_group"] == group])


def test_a_topic_exchange_routes_only_the_keys_its_bindings_match(runs):
    run_dir, summary = runs["topic"]
    m = summary["messages"]
    hit, miss = _published_by(run_dir, "hit"), _published_by(run_dir, "miss")
    got = independent_outcomes(run_dir)
    assert hit and miss
    assert got["acked"] == hit  # every orders.eu message reached the queue and was consumed
    returned = ids(read_rows(run_dir, "publish"), outcome="returned")
    assert returned == miss  # the broker returned every audit.eu publish: no binding matched it
    assert m["discarded"]["unroutable"] == len(miss)
    assert m["acked"] == len(hit)
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    recorded = json.loads((run_dir / "run.json").read_text())["scenario"]
    assert recorded["exchanges"] == [
        {"name": TOPIC, "type": "topic", "durable": False, "auto_delete": False, "arguments": {}, "delete_on_end": True}
    ]
    assert recorded["bindings"] == [{"exchange": TOPIC, "routing_key": "orders.*", "arguments": {}}]


def test_delete_on_end_removes_the_declared_exchanges(runs):
    for case, (run_dir, _) in runs.items():
        deleted = {e["name"] for e in read_rows(run_dir, "event") if e["kind"] == "exchange_deleted"}
        assert len(deleted) == 1, (case, deleted)
    for name in DECLARED_EXCHANGES:
        assert not exchange_exists(name), name
    assert exchange_exists("amq.topic")  # the check can tell an existing exchange from a missing one


def test_messages_requeued_past_the_quorum_delivery_limit_are_dead_lettered_for_that_reason(runs):
    run_dir, summary = runs["delivery_limit"]
    m = summary["messages"]
    got = independent_outcomes(run_dir)
    deliveries = read_rows(run_dir, "delivery")
    requeues = Counter(d["message_id"] for d in deliveries if d["outcome"] == "nack_requeue")
    # The broker's rule: the return that takes a message's delivery count past the limit
    # dead-letters it instead of requeueing it, so it was nacked exactly limit + 1 times.
    over = {mid for mid, n in requeues.items() if n > DELIVERY_LIMIT}
    assert over, "CoDel should have requeued some messages past the limit"
    assert all(requeues[mid] == DELIVERY_LIMIT + 1 for mid in over)
    assert ids(read_rows(run_dir, "deadletter"), reason="delivery_limit") == over
    assert got["acked"] == got["published"] - over and not got["left"]
    assert m["discarded"]["dead_lettered_delivery_limit"] == len(over)
    assert m["acked"] == len(got["published"]) - len(over)
    assert m["discarded_total"] == len(over)
    assert m["unaccounted"] == 0, m["unaccounted_ids"]


def test_reject_publish_dlx_overflow_is_nacked_and_dead_lettered_and_counted_once(runs):
    run_dir, summary = runs["reject_publish_dlx"]
    m = summary["messages"]
    got = independent_outcomes(run_dir)
    published = len(got["published"])
    refused = published - MAX_LENGTH  # no consumer: the queue keeps the first MAX_LENGTH, refuses the rest
    assert refused > 0
    # Both pieces of evidence exist for each refused message: the nack and the maxlen dead-letter.
    assert len(got["nacked"]) == refused
    assert got["maxlen"] == got["nacked"]
    assert len(got["left"]) == MAX_LENGTH and not got["left"] & got["nacked"]
    # The accounting counts each once, as the refusal at publish (the cause).
    assert m["discarded"]["publish_rejected_maxlen"] == refused
    assert m["discarded"]["dead_lettered_maxlen"] == 0
    assert m["discarded"]["publish_nacked"] == 0
    assert m["left_in_broker"] == MAX_LENGTH
    assert m["published"] == published == m["acked"] + m["discarded_total"] + m["left_in_broker"]
    assert m["unaccounted"] == 0, m["unaccounted_ids"]


# ---- refused declarations: exit 2, the field, the broker's reply, what to do


def _run_status(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def test_a_queue_existing_with_other_arguments_stops_the_run_and_is_left_alone(tmp_path):
    queue = f"{PREFIX}.existing"
    connection, channel = _channel()
    channel.queue_declare(queue)
    for i in range(3):
        channel.basic_publish("", queue, f"keep {i}".encode())
    connection.close()
    scenario = write_scenario(
        tmp_path / "x.yaml",
        f"""
name: it-topology-precondition
queue: {{name: {queue}, arguments: {{x-max-length: 5}}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: 2}}
producers: [{{name: p, rate: 10}}]
consumers: [{{name: c}}]
""",
    )
    try:
        result = sojourn("run", scenario, "--out", str(tmp_path / "run"), "--no-analyze")
        assert result.returncode == 2, result.stderr[-3000:]
        assert (
            f"error: {scenario}: queue: the broker refused queue.declare '{queue}': 406 PRECONDITION_FAILED - "
            f"inequivalent arg 'x-max-length'"
        ) in result.stderr
        assert f"rabbitmqctl delete_queue {queue}" in result.stderr
        assert "Traceback" not in result.stderr
        status = _run_status(tmp_path / "run")
        assert status["status"] == "failed" and "PRECONDITION_FAILED" in status["error"]
        # Not purged (though purge_on_start asks it: the declaration was refused first), not counted,
        # not deleted (delete_on_end is for a queue the run created).
        connection, channel = _channel()
        assert channel.queue_declare(queue, passive=True).method.message_count == 3
        connection.close()
        assert read_rows(tmp_path / "run", "leftover") == []
    finally:
        cleanup([queue])


def test_an_exchange_existing_with_another_type_stops_the_run(tmp_path):
    exchange = f"{PREFIX}.typed"
    connection, channel = _channel()
    channel.exchange_declare(exchange, exchange_type="direct", auto_delete=False)
    connection.close()
    scenario = write_scenario(
        tmp_path / "x.yaml",
        f"""
name: it-topology-exchange-type
queue: {{name: {PREFIX}.typed.q, delete_on_end: true}}
exchanges: [{{name: {exchange}, type: topic}}]
run: {{duration_s: 2}}
producers: [{{name: p, rate: 10, exchange: {exchange}}}]
""",
    )
    try:
        result = sojourn("run", scenario, "--out", str(tmp_path / "run"), "--no-analyze")
        assert result.returncode == 2, result.stderr[-3000:]
        assert (
            f"error: {scenario}: exchanges[0]: the broker refused exchange.declare '{exchange}': 406 "
            f"PRECONDITION_FAILED - inequivalent arg 'type'"
        ) in result.stderr
        assert f"rabbitmqadmin delete exchange name={exchange}" in result.stderr
        assert exchange_exists(exchange)
    finally:
        cleanup([f"{PREFIX}.typed.q"], [exchange])


def test_a_producer_exchange_neither_declared_nor_on_the_broker_stops_the_run(tmp_path):
    missing = f"{PREFIX}.nowhere"
    scenario = write_scenario(
        tmp_path / "x.yaml",
        f"""
name: it-topology-missing
queue: {{name: {PREFIX}.missing.q, delete_on_end: true}}
run: {{duration_s: 2}}
producers: [{{name: p, rate: 10, exchange: {missing}}}]
""",
    )
    try:
        result = sojourn("run", scenario, "--out", str(tmp_path / "run"), "--no-analyze")
        assert result.returncode == 2, result.stderr[-3000:]
        assert (
            f"error: {scenario}: producers[0].exchange: exchange '{missing}' does not exist on the broker"
            in result.stderr
        )
        assert not exchange_exists(missing)
    finally:
        cleanup([f"{PREFIX}.missing.q"])
