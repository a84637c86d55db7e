"""A phase that changes a live consumer's prefetch really changes what the broker sends it."""

from __future__ import annotations

from tests.integration.conftest import run_in_batch
from tests.integration.traces import read_rows

# 200 msg/s offered, 10 ms processing (at most 100/s served): a backlog waits in the
# broker, so the consumer's buffer holds whatever the prefetch lets through.
run_in_batch(
    __name__,
    "prefetch-change",
    """
name: it-prefetch-change
queue: {name: sojourn.it.prefetch-change, purge_on_start: true, delete_on_end: true}
run: {duration_s: 8, drain_timeout_s: 20}
producers: [{name: p, rate: 200}]
consumers: [{name: c, prefetch: 1, processing_ms: 10}]
timeline:
  - name: wide
    start_s: 4
    set: {consumers.c.prefetch: 20}
""",
    command="locust",
)


def test_prefetch_widened_by_a_phase_fills_the_buffer(batch):
    ran = batch["prefetch-change"]
    run_dir = ran.run_dir
    assert ran.returncode == 0, ran.stderr[-3000:]
    deliveries = read_rows(run_dir, "delivery")
    narrow = [d for d in deliveries if d["prefetch"] == 1]
    wide = [d for d in deliveries if d["prefetch"] == 20]
    assert narrow and wide
    # prefetch 1: a delivery only comes after the previous ack, so nothing ever waits
    assert max(d["buffer_len"] for d in narrow) == 0
    # prefetch 20, saturated: one in processing and 18 waiting when the next arrives;
    # just after the re-subscription the delivery in processing belongs to the old
    # subscription and does not count against the new limit, so once 19 may wait
    # (docs/queueing.md: a prefetch change in flight can briefly exceed the limit).
    assert max(d["buffer_len"] for d in wide) in (20 - 2, 20 - 1)
    events = [e for e in read_rows(run_dir, "event") if e["kind"] == "prefetch_change"]
    assert [e["value"] for e in events] == [20.0]
    acked = {d["message_id"] for d in deliveries if d["outcome"] == "ack"}
    assert acked == {p["message_id"] for p in read_rows(run_dir, "publish")}
