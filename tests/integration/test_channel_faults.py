"""Faults of a single channel on the real broker (issue 48): the broker closes a producer's channel
(its exchange deleted, twice in one run), closes a consumer's channel (a 406 for an unknown
delivery tag; a delivery held past consumer_timeout, on a private node), and the run's queue is
deleted under its consumers. Each run ends on its own before its drain timeout, with the exit
status docs/README give (0), run.json's status completed, and every published message accounted
for (summary.json: unaccounted 0). `ROWS` collects each run's fault-table row
(exit, status, published, acked, discarded by reason, left in the broker, unaccounted), printed
at the end of the module (`pytest -s`). The three runs on the shared broker are in the session's
batch (conftest.run_in_batch: their checks are on counts and events, relative to the run's t0);
the consumer_timeout run needs its own node and runs on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pika
import pytest

from analysis.report import render_report
from loadgen.broker import ManagedBroker
from tests.integration.conftest import free_port, run_in_batch, start_sojourn, wait_for_t0, write_scenario
from tests.integration.traces import read_rows

S = 1_000_000_000
ROWS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_rows():
    yield
    for name, row in ROWS.items():
        print(f"\n[fault table] {name}: {json.dumps(row, sort_keys=True)}")


def _blocking(url: str = "amqp://guest:guest@127.0.0.1:5672/%2F") -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.URLParameters(url))


def _at(t0: float, s: float) -> None:
    time.sleep(max(0.0, t0 + s - time.time()))


def _run(tmp_path: Path, scenario_text: str, env: dict | None = None) -> tuple[Path, subprocess.Popen, str]:
    """`sojourn run --no-analyze` on the scenario: the run directory, the process (ended) and its
    stderr. Bounded: killed after 240 s."""
    run_dir = tmp_path / "run"
    scenario = write_scenario(tmp_path / "s.yaml", scenario_text)
    proc = start_sojourn("run", scenario, "--out", str(run_dir), "--no-analyze", env=env)
    try:
        _stdout, stderr = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return run_dir, proc, stderr


def _row(name: str, run_dir: Path, exit_code: int, summary: dict) -> dict:
    run = json.loads((run_dir / "run.json").read_text())
    m = summary["messages"]
    row = {
        "exit": exit_code,
        "status": run["status"],
        "published": m["published"],
        "acked": m["acked"],
        "discarded": {k: v for k, v in m["discarded"].items() if v},
        "left_in_broker": m["left_in_broker"],
        "unaccounted": m["unaccounted"],
    }
    ROWS[name] = row
    return row


def _ended_within_the_drain(run_dir: Path, duration_s: float, drain_timeout_s: float) -> None:
    """The run stopped (run.json's end) before its drain would have timed out: no hang."""
    run = json.loads((run_dir / "run.json").read_text())
    took_s = (run["ended_ns"] - run["t0_ns"]) / S
    assert took_s < duration_s + drain_timeout_s, f"the run took {took_s:.1f} s"
    drain = [json.loads(e["detail"]) for e in read_rows(run_dir, "event") if e["kind"] == "drain_end"]
    assert drain and all(d["reason"] == "empty" for d in drain), drain


def _accounted(summary: dict, run_dir: Path) -> dict:
    m = summary["messages"]
    assert m["unaccounted"] == 0, m["unaccounted_ids"]
    publishes = read_rows(run_dir, "publish")
    assert m["published"] == len({p["message_id"] for p in publishes})
    assert m["published"] == m["acked"] + m["discarded_total"] + m["left_in_broker"]
    return m


# -- a producer's channel closed by the broker, twice ---------------------------------------------

EXCHANGE = "sojourn.it.channel-faults.x"
PRODUCER_QUEUE = "sojourn.it.channel-faults.producer"
PRODUCER_DURATION_S, PRODUCER_DRAIN_S = 12, 20
PRODUCER_SCENARIO = f"""
name: it-producer-channel-closed
queue: {{name: {PRODUCER_QUEUE}, purge_on_start: true, delete_on_end: true}}
exchanges: [{{name: {EXCHANGE}, type: direct, delete_on_end: true}}]
bindings: [{{exchange: {EXCHANGE}, routing_key: k}}]
run: {{duration_s: {PRODUCER_DURATION_S}, drain_timeout_s: {PRODUCER_DRAIN_S}}}
producers: [{{name: p, rate: 100, exchange: {EXCHANGE}, routing_key: k, confirms: true, confirm_window: 20}}]
consumers: [{{name: c, prefetch: 20, processing_ms: 1}}]
"""


def _close_the_producers_channel(proc: subprocess.Popen, run_dir: Path) -> None:
    # At t=3 s the exchange is deleted: the producer's next publish gets 404 NOT_FOUND and its
    # channel closed; it reopens a second later, publishes, is closed again... until the exchange
    # is declared and bound again at t=5.6 s: at least two closes (t~3, ~4, ~5).
    t0 = wait_for_t0(proc, run_dir)
    conn = _blocking()
    try:
        ch = conn.channel()
        _at(t0, 3.0)
        ch.exchange_delete(EXCHANGE)
        _at(t0, 5.6)
        ch.exchange_declare(EXCHANGE, "direct")
        ch.queue_bind(PRODUCER_QUEUE, EXCHANGE, "k")
    finally:
        conn.close()


run_in_batch(__name__, "producer-channel-closed", PRODUCER_SCENARIO, during=_close_the_producers_channel)


def test_a_producers_channel_closed_twice_by_the_broker_is_reopened_and_every_message_accounted_for(
    batch, analyze_in_process
):
    ran = batch["producer-channel-closed"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    events = read_rows(run_dir, "event")
    closes = [json.loads(e["detail"]) for e in events if e["kind"] == "channel_closed"]
    assert len(closes) >= 2, closes
    assert all(c["reply_code"] == 404 and f"no exchange '{EXCHANGE}'" in c["reply_text"] for c in closes)
    assert [e["kind"] for e in events].count("producer_join") == len(closes) + 1
    publishes = read_rows(run_dir, "publish")
    closed = [p for p in publishes if p["outcome"] == "channel_closed"]
    assert len(closed) == sum(c["unconfirmed"] for c in closes) >= 2
    assert {p["outcome"] for p in publishes} <= {"confirmed", "channel_closed"}  # none failed
    assert len(publishes) >= 0.95 * 100 * PRODUCER_DURATION_S  # the schedule went on, late, not lost
    _ended_within_the_drain(run_dir, PRODUCER_DURATION_S, PRODUCER_DRAIN_S)

    summary = analyze_in_process(run_dir)
    m = _accounted(summary, run_dir)
    # independently: a channel_closed publish never acked nor left is discarded channel_closed
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    dropped = [p for p in closed if p["message_id"] not in acked]
    assert m["discarded"]["channel_closed"] == len(dropped) >= 1
    assert m["left_in_broker"] == 0
    _row(f"producer channel closed by the broker (exchange deleted), x{len(closes)}", run_dir, ran.returncode, summary)


# -- a consumer's channel closed by a 406: an ack of a tag it never had ---------------------------

CONSUMER_QUEUE = "sojourn.it.channel-faults.consumer"
CONSUMER_DURATION_S, CONSUMER_DRAIN_S = 10, 20
CONSUMER_SCENARIO = f"""
name: it-consumer-channel-closed
queue: {{name: {CONSUMER_QUEUE}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {CONSUMER_DURATION_S}, drain_timeout_s: {CONSUMER_DRAIN_S}}}
producers: [{{name: p, rate: 100}}]
consumers: [{{name: c, prefetch: 30, processing_ms: 8}}]
"""


# The consumer (8 ms a message at 100 msg/s: a few held) acks tag 1,000,000 at t=4 s through
# a second locustfile (channel_fault_locustfile.py); the broker closes its channel with 406.
run_in_batch(
    __name__,
    "consumer-channel-closed",
    CONSUMER_SCENARIO,
    command="locust",
    extra=("-f", "loadgen/locustfile.py,tests/integration/channel_fault_locustfile.py", "--exit-code-on-error", "0"),
    env={"SOJOURN_TEST_BAD_ACK_AT_S": "4"},
)


def test_a_consumers_channel_closed_by_a_406_requeues_what_it_held_and_it_rejoins(batch, analyze_in_process):
    ran = batch["consumer-channel-closed"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    events = read_rows(run_dir, "event")
    [closed] = [json.loads(e["detail"]) for e in events if e["kind"] == "channel_closed"]
    assert closed["reply_code"] == 406 and "unknown delivery tag 1000000" in closed["reply_text"]
    kinds = [e["kind"] for e in events]
    assert kinds.count("consumer_join") == 2
    leaves = [json.loads(e["detail"]) for e in events if e["kind"] == "consumer_leave"]
    assert {"clean": False, "crossed_cancel": 0, "reason": "channel_closed"} in leaves
    deliveries = read_rows(run_dir, "delivery")
    unsettled = {d["message_id"] for d in deliveries if d["outcome"] == "unsettled"}
    assert len(unsettled) == closed["unsettled"]
    # each one the broker held for it came back (redelivered) and was acked
    again = {d["message_id"] for d in deliveries if d["outcome"] == "ack" and d["redelivered"]}
    assert unsettled <= again
    _ended_within_the_drain(run_dir, CONSUMER_DURATION_S, CONSUMER_DRAIN_S)

    summary = analyze_in_process(run_dir)
    m = _accounted(summary, run_dir)
    assert m["acked"] == m["published"] and m["discarded_total"] == 0
    assert m["redelivered"] >= len(unsettled)
    churn = summary["consumers_churn"]  # every message the closed channel held ended somewhere known
    assert churn["nothing_lost"] is True and churn["totals"]["held_messages"] == len(unsettled)
    _row("consumer channel closed by the broker (406 unknown delivery tag)", run_dir, ran.returncode, summary)


# -- a delivery held past consumer_timeout, on a private node -------------------------------------

TIMEOUT_QUEUE = "sojourn.it.channel-faults.timeout"
TIMEOUT_DURATION_S, TIMEOUT_DRAIN_S = 12, 20
CONSUMER_TIMEOUT_MS = 2000
TIMEOUT_SCENARIO = f"""
name: it-consumer-timeout
queue: {{name: {TIMEOUT_QUEUE}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {TIMEOUT_DURATION_S}, drain_timeout_s: {TIMEOUT_DRAIN_S}}}
producers: [{{name: p, rate: 20}}]
consumers: [{{name: c, prefetch: 10, processing_ms: 2}}]
timeline:
  - {{name: stuck, start_s: 2, end_s: 3, set: {{consumers.c.processing_ms: 5000}}}}
"""


@pytest.fixture
def node(tmp_path):
    """A private node whose consumer_timeout is 2 s, checked every second (channel_tick_interval:
    60 s by default, an advanced.config setting)."""
    broker = ManagedBroker(tmp_path / "broker", port=free_port(), settings={"consumer_timeout": CONSUMER_TIMEOUT_MS})
    (tmp_path / "broker").mkdir(parents=True, exist_ok=True)
    (tmp_path / "broker" / "advanced.config").write_text("[{rabbit, [{channel_tick_interval, 1000}]}].\n")
    try:
        broker.start(timeout=120)
        yield broker
    finally:
        broker.stop(timeout=30, purge=True)


@pytest.mark.skipif(
    shutil.which("rabbitmq-server") is None and not Path("/usr/lib/rabbitmq/bin/rabbitmq-server").exists(),
    reason="rabbitmq-server is not installed",
)
def test_a_delivery_held_past_consumer_timeout_closes_the_channel_and_the_consumer_rejoins(
    node, tmp_path, analyze_in_process
):
    # In the phase 2-3 s a delivery takes 5 s to process: the broker closes the channel (406,
    # acknowledgement timed out) 2-3 s after it was delivered; the consumer finishes it (unsettled),
    # rejoins, and the redeliveries are processed in 2 ms each.
    run_dir, proc, stderr = _run(tmp_path, TIMEOUT_SCENARIO, env={"SOJOURN_AMQP_URL": node.url})
    assert proc.returncode == 0, stderr[-3000:]
    events = read_rows(run_dir, "event")
    closes = [json.loads(e["detail"]) for e in events if e["kind"] == "channel_closed"]
    assert len(closes) == 1 and closes[0]["reply_code"] == 406, closes
    assert "timed out" in closes[0]["reply_text"]
    deliveries = read_rows(run_dir, "delivery")
    in_hand = [d for d in deliveries if d["outcome"] == "unsettled" and d["end_ns"] is not None]
    assert len(in_hand) == 1 and in_hand[0]["processing_ms"] == 5000  # finished after the close: not acked
    unsettled = {d["message_id"] for d in deliveries if d["outcome"] == "unsettled"}
    assert len(unsettled) == closes[0]["unsettled"]
    again = {d["message_id"] for d in deliveries if d["outcome"] == "ack" and d["redelivered"]}
    assert unsettled <= again
    _ended_within_the_drain(run_dir, TIMEOUT_DURATION_S, TIMEOUT_DRAIN_S)

    summary = analyze_in_process(run_dir)
    m = _accounted(summary, run_dir)
    assert m["acked"] == m["published"]
    churn = summary["consumers_churn"]
    assert churn["nothing_lost"] is True and churn["totals"]["held_messages"] == len(unsettled)
    # the report names the consumer that timed out, and when
    verdict = render_report(summary)
    closed_at = next(e for e in summary["events"] if e["kind"] == "channel_closed")
    assert "consumer timeout" in verdict and closed_at["name"] in verdict
    _row("consumer channel closed by consumer_timeout (private node)", run_dir, proc.returncode, summary)


# -- the queue deleted during the run -------------------------------------------------------------

DELETED_QUEUE = "sojourn.it.channel-faults.deleted"
DELETED_DURATION_S, DELETED_DRAIN_S = 12, 20
DELETED_SCENARIO = f"""
name: it-queue-deleted
queue: {{name: {DELETED_QUEUE}, purge_on_start: true, delete_on_end: true}}
run: {{duration_s: {DELETED_DURATION_S}, drain_timeout_s: {DELETED_DRAIN_S}}}
producers: [{{name: p, rate: 100}}]
consumers: [{{name: c, prefetch: 20, processing_ms: 15}}]
timeline:
  - {{name: backlog, start_s: 0, end_s: 5, set: {{consumers.c.processing_ms: 30}}}}
"""


# 100 msg/s into a consumer that takes ~33/s for 5 s: a backlog of ~200 when the queue is
# deleted at t=4 s. The consumer gets basic.cancel, acks what it holds, finds the queue gone
# and declares it again; what the queue held counts as lost_with_queue.
DELETED_AT_NS: list[int] = []


def _delete_the_queue(proc: subprocess.Popen, run_dir: Path) -> None:
    t0 = wait_for_t0(proc, run_dir)
    conn = _blocking()
    try:
        _at(t0, 4.0)
        conn.channel().queue_delete(DELETED_QUEUE)
        DELETED_AT_NS.append(time.time_ns())
    finally:
        conn.close()


run_in_batch(__name__, "queue-deleted", DELETED_SCENARIO, during=_delete_the_queue)


def test_the_queue_deleted_during_the_run_is_declared_again_and_what_it_held_is_lost_with_it(batch, analyze_in_process):
    ran = batch["queue-deleted"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    events = read_rows(run_dir, "event")
    kinds = [e["kind"] for e in events]
    assert kinds.count("consumer_cancelled") == 1 and kinds.count("queue_recreated") == 1
    [recreated] = [e for e in events if e["kind"] == "queue_recreated"]
    assert recreated["ts_ns"] > DELETED_AT_NS[0]
    leaves = [json.loads(e["detail"]) for e in events if e["kind"] == "consumer_leave"]
    assert any(leave.get("reason") == "cancelled" and leave["clean"] for leave in leaves)
    _ended_within_the_drain(run_dir, DELETED_DURATION_S, DELETED_DRAIN_S)

    summary = analyze_in_process(run_dir)
    m = _accounted(summary, run_dir)
    # independently: confirmed no later than the queue was declared again, never acked -> lost with it
    publishes = read_rows(run_dir, "publish")
    acked = {d["message_id"] for d in read_rows(run_dir, "delivery") if d["outcome"] == "ack"}
    lost = [
        p
        for p in publishes
        if p["outcome"] == "confirmed" and p["publish_ns"] <= recreated["ts_ns"] and p["message_id"] not in acked
    ]
    assert m["discarded"]["lost_with_queue"] == len(lost) > 50
    _row("queue deleted during the run", run_dir, ran.returncode, summary)
