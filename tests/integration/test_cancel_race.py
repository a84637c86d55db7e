"""Every delivery the broker sends is traced, also those that cross a basic.cancel on the wire.

A consumer that changes its prefetch re-subscribes (cancel, consume again); deliveries the broker
sent before it saw the cancel arrive after it. The broker's own record of every delivery is the
firehose (`rabbitmqctl trace_on`: one `deliver.QUEUE` message on amq.rabbitmq.trace per delivery),
turned on in a virtual host of this test's own so nothing else is traced. Its count must equal the
delivery rows in the traces exactly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pika
import pytest

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

VHOST = "sojourn-cancel-race"
QUEUE = "sojourn.it.cancel-race"
FIREHOSE_QUEUE = "sojourn.it.cancel-race.firehose"
RABBITMQCTL = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"
URL = f"amqp://guest:guest@127.0.0.1:5672/{VHOST}"


def _ctl(*args: str) -> str:
    return subprocess.run([RABBITMQCTL, *args], check=True, capture_output=True, text=True, timeout=60).stdout


def _firehose_on() -> None:
    """A fresh virtual host with the firehose on, and a queue holding its record of every delivery
    from the run's queue."""
    if VHOST in _ctl("list_vhosts", "-q").split():
        _ctl("delete_vhost", VHOST)
    _ctl("add_vhost", VHOST)
    _ctl("set_permissions", "-p", VHOST, "guest", ".*", ".*", ".*")
    _ctl("trace_on", "-p", VHOST)
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    try:
        channel = conn.channel()
        channel.queue_declare(FIREHOSE_QUEUE, durable=False)
        channel.queue_bind(FIREHOSE_QUEUE, "amq.rabbitmq.trace", routing_key=f"deliver.{QUEUE}")
    finally:
        conn.close()


def _broker_deliveries() -> int:
    """What the firehose recorded, once its count has stopped moving."""
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    try:
        channel = conn.channel()
        last, stable = -1, 0
        while stable < 3:
            count = channel.queue_declare(FIREHOSE_QUEUE, passive=True).method.message_count
            stable = stable + 1 if count == last else 0
            last = count
            time.sleep(0.2)
        return last
    finally:
        conn.close()


# A consumer with nothing to simulate (processing 0) acks each delivery in the I/O loop the moment
# it arrives, also while its own greenlet waits for a cancel-ok, so the broker keeps sending until
# it has seen the cancel: at 1,500 msg/s the deliveries in flight then cross it. Two consumers
# re-subscribe at each of twenty-four prefetch changes in six seconds.
_PHASES = "\n".join(
    f"  - {{name: p{i}, start_s: {0.25 * i:g}, set: {{consumers.c.prefetch: {40 if i % 2 else 30}}}}}"
    for i in range(1, 25)
)

if Path(RABBITMQCTL).exists():
    run_in_batch(
        __name__,
        "cancel-race",
        f"""
name: it-cancel-race
queue: {{name: {QUEUE}, delete_on_end: true}}
run: {{duration_s: 7, warmup_s: 0, drain_timeout_s: 30}}
producers: [{{name: p, rate: 1500}}]
consumers: [{{name: c, count: 2, prefetch: 30, processing_ms: 0}}]
timeline:
{_PHASES}
""",
        env={"SOJOURN_AMQP_URL": URL},
        before=_firehose_on,
    )


@pytest.fixture()
def firehose():
    if not Path(RABBITMQCTL).exists():
        pytest.skip("rabbitmqctl is not available to turn the firehose on")
    yield
    _ctl("trace_off", "-p", VHOST)
    _ctl("delete_vhost", VHOST)


def test_the_traces_hold_every_delivery_the_broker_made_including_those_across_a_cancel(firehose, batch):
    ran = batch["cancel-race"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    run = json.loads((ran.run_dir / "run.json").read_text())
    assert run["broker_depth_at_end"] == 0  # drained: no census consumed from the queue
    events = read_rows(ran.run_dir, "event")
    changes = [e for e in events if e["kind"] == "prefetch_change"]
    assert len(changes) == 2 * 24  # each consumer re-subscribed at every phase
    crossed = sum(json.loads(e["detail"])["crossed_cancel"] for e in changes)
    assert crossed > 0, "no delivery crossed a cancel: the run did not reproduce the race"
    traced = read_rows(ran.run_dir, "delivery")
    assert len(traced) == _broker_deliveries()
    # and each crossed delivery was processed like any other: every message acked once, none requeued
    assert all(d["outcome"] == "ack" for d in traced)
    assert not any(d["redelivered"] for d in traced)
    assert {d["message_id"] for d in traced} == {p["message_id"] for p in read_rows(ran.run_dir, "publish")}
