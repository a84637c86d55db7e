"""Every delivery the broker sends is traced, also those that cross a basic.cancel on the wire.

A consumer that changes its prefetch re-subscribes (cancel, consume again); deliveries the broker
sent before it saw the cancel arrive after it. The broker's own count of the deliveries is its
management API's `deliver` counter for the run's queue, on a private node with the management
plugin (`ManagedBroker(management_port=...)`, as `sojourn broker up --management-port`). It must
equal the delivery rows in the traces exactly.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from pathlib import Path

import pytest

from loadgen.broker import ManagedBroker
from tests.integration.conftest import free_port, sojourn, write_scenario
from tests.integration.traces import read_rows

QUEUE = "sojourn.it.cancel-race"


@pytest.fixture
def node(tmp_path: Path):
    port = free_port()
    broker = ManagedBroker(
        tmp_path / "broker",
        port=port,
        settings={"collect_statistics_interval": 500},  # ms: the counters settle within a second
        management_port=free_port({port}),
    )
    try:
        broker.start(timeout=90)
        yield broker
    finally:
        broker.stop(timeout=30, purge=True)


def _api(node: ManagedBroker, path: str) -> dict:
    request = urllib.request.Request(
        f"{node.management_url}{path}", headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def _broker_deliveries(node: ManagedBroker) -> int:
    """The queue's `deliver` counter (deliveries to consumers that ack), once it has stopped moving."""
    last, stable = -1, 0
    deadline = time.monotonic() + 60
    while stable < 4 and time.monotonic() < deadline:
        stats = _api(node, f"queues/%2F/{QUEUE}").get("message_stats", {})
        count = int(stats.get("deliver", 0)) + int(stats.get("deliver_no_ack", 0))
        stable = stable + 1 if count == last else 0
        last = count
        time.sleep(0.5)
    return last


# A consumer with nothing to simulate (processing 0) acks each delivery in the I/O loop the moment
# it arrives, also while its own greenlet waits for a cancel-ok, so the broker keeps sending until
# it has seen the cancel: at 1,500 msg/s the deliveries in flight then cross it. Two consumers
# re-subscribe at each of twenty-four prefetch changes in six seconds.
_PHASES = "\n".join(
    f"  - {{name: p{i}, start_s: {0.25 * i:g}, set: {{consumers.c.prefetch: {40 if i % 2 else 30}}}}}"
    for i in range(1, 25)
)

SCENARIO = f"""
name: it-cancel-race
queue: {{name: {QUEUE}, purge_on_start: true}}   # kept at the end: its counters are read after the run
run: {{duration_s: 7, warmup_s: 0, drain_timeout_s: 30}}
producers: [{{name: p, rate: 1500}}]
consumers: [{{name: c, count: 2, prefetch: 30, processing_ms: 0}}]
timeline:
{_PHASES}
"""


def test_the_traces_hold_every_delivery_the_broker_made_including_those_across_a_cancel(node, tmp_path: Path):
    run_dir = tmp_path / "run"
    result = sojourn(
        "run",
        write_scenario(tmp_path / "s.yaml", SCENARIO),
        "--out",
        str(run_dir),
        "--no-analyze",
        env={"SOJOURN_AMQP_URL": node.url},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run = json.loads((run_dir / "run.json").read_text())
    assert run["broker_depth_at_end"] == 0  # drained: no census consumed from the queue
    events = read_rows(run_dir, "event")
    changes = [e for e in events if e["kind"] == "prefetch_change"]
    assert len(changes) == 2 * 24  # each consumer re-subscribed at every phase
    crossed = sum(json.loads(e["detail"])["crossed_cancel"] for e in changes)
    assert crossed > 0, "no delivery crossed a cancel: the run did not reproduce the race"
    traced = read_rows(run_dir, "delivery")
    assert len(traced) == _broker_deliveries(node)
    # and each crossed delivery was processed like any other: every message acked once, none requeued
    assert all(d["outcome"] == "ack" for d in traced)
    assert not any(d["redelivered"] for d in traced)
    assert {d["message_id"] for d in traced} == {p["message_id"] for p in read_rows(run_dir, "publish")}
