"""The consumer on an in-memory link (tests/unit/fake_link.py): its buffer, a prefetch change, a
crash, CoDel and egress, each as the broker would see it (what was asked of the link, which tags
were acked or nacked) and as the trace says it. Expected values come from the scenario text."""

from __future__ import annotations

import time
from pathlib import Path

import gevent
import pytest

from loadgen.consumer import Consumer
from loadgen.scenario import load_scenario
from tests.unit.fake_link import Clock, FakeLink, FakeRun

QUEUE = "unit.consumer"
MS = 1_000_000


def _scenario(tmp_path: Path, consumer: str, timeline: str = ""):
    path = tmp_path / "s.yaml"
    path.write_text(
        f"""
name: unit-consumer
queue: {{name: {QUEUE}}}
run: {{duration_s: 60}}
producers: [{{name: p, rate: 1, size_bytes: 100}}]
consumers:
  - {{name: c, {consumer}}}
{timeline}"""
    )
    return load_scenario(path)


class Running:
    """A Consumer's run() in its own greenlet, on a FakeLink and a FakeRun."""

    def __init__(self, scenario, clock=time.time_ns):
        self.run = FakeRun(scenario)
        self.links: list[FakeLink] = []
        self.reports: list[tuple] = []

        def open_link(_name, on_close, on_message, on_crossed):
            self.links.append(FakeLink(on_close, on_message, on_crossed))
            return self.links[-1]

        self.consumer = Consumer(self.run, "c", 0, lambda *r: self.reports.append(r), open_link, clock)
        self.greenlet = gevent.spawn(self.consumer.run)
        self.until(lambda: bool(self.links) and any(c[0] == "consume" for c in self.links[-1].calls))

    @property
    def link(self) -> FakeLink:
        return self.links[-1]

    def until(self, done, timeout_s: float = 3.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "timed out"
            gevent.sleep(0.001)

    def stop(self, drained: bool = True) -> None:
        (self.run.drained if drained else self.run.stopping).set()
        self.greenlet.join(5)
        assert self.greenlet.dead

    def outcomes(self) -> dict[int, str]:
        return {row["delivery_tag"]: row["outcome"] for row in self.run.deliveries}


def test_deliveries_that_arrive_while_it_works_wait_in_the_buffer_and_are_acked_in_order(tmp_path):
    r = Running(_scenario(tmp_path, "prefetch: 10, processing_ms: 5"))
    assert r.link.calls == [("qos", 10, False), ("consume", QUEUE, False)]
    tags = [r.link.deliver(f"m{i}") for i in range(4)]  # back to back: the consumer has not woken
    r.until(lambda: len(r.link.acks) == 4)
    assert r.link.acks == tags and r.link.nacks == []
    rows = r.run.deliveries
    assert [row["buffer_len"] for row in rows] == [0, 1, 2, 3]  # each found the earlier ones waiting
    assert [row["message_id"] for row in rows] == ["m0", "m1", "m2", "m3"]
    assert all(row["outcome"] == "ack" and row["prefetch"] == 10 and row["processing_ms"] == 5 for row in rows)
    # processed one after another: each starts once the one before has ended
    assert all(b["start_ns"] >= a["end_ns"] for a, b in zip(rows, rows[1:]))
    assert r.run.counters["delivered"] == r.run.counters["acked"] == 4
    r.stop()
    assert r.link.calls[-2:] == [("cancel",), ("close",)]
    assert [e[0] for e in r.run.events] == ["consumer_join", "consumer_leave"]


def test_the_receive_stamp_is_the_kernels_when_the_link_has_one_else_the_read(tmp_path):
    clock = Clock(now=10_000 * MS)
    r = Running(_scenario(tmp_path, "prefetch: 10, processing_ms: 1"), clock)
    r.link.deliver("k", kernel_ns=9_990 * MS)  # arrived 10 ms before the read
    r.link.stamps = None  # a link without kernel stamps
    r.link.deliver("r", kernel_ns=1)
    r.until(lambda: len(r.link.acks) == 2)
    k, rr = r.run.deliveries
    assert k["receive_ns"] == 9_990 * MS and k["read_ns"] == 10_000 * MS
    assert rr["receive_ns"] == rr["read_ns"] == 10_000 * MS
    r.stop()


@pytest.mark.parametrize("scope, resubscribes", [("consumer", True), ("channel", False)])
def test_a_phase_that_changes_the_prefetch_sets_it_and_resubscribes_where_the_broker_needs_it(
    tmp_path, scope, resubscribes
):
    timeline = "timeline:\n  - {name: wide, start_s: 5, set: {consumers.c.prefetch: 20}}\n"
    r = Running(_scenario(tmp_path, f"prefetch: 10, prefetch_scope: {scope}, processing_ms: 20", timeline))
    held = r.link.deliver("before")  # in the buffer when the phase comes
    r.run.t = 6.0
    r.until(lambda: ("qos", 20, scope == "channel") in r.link.calls)
    r.until(lambda: held in r.link.acks)  # acked on the same link, after the change
    after = [c for c in r.link.calls[2:] if c[0] != "close"]
    expected = [("qos", 20, scope == "channel")] + ([("cancel",), ("consume", QUEUE, False)] if resubscribes else [])
    assert after == expected
    assert len(r.links) == 1  # the same connection throughout
    [change] = [e for e in r.run.events if e[0] == "prefetch_change"]
    assert change[1] == 20 and change[2]["from"] == 10 and change[2]["to"] == 20
    tag = r.link.deliver("after")
    r.until(lambda: tag in r.link.acks)
    assert [row["prefetch"] for row in r.run.deliveries] == [10, 20]
    r.stop()


def test_a_crash_settles_nothing_it_holds_and_traces_every_held_delivery_crashed(tmp_path):
    timeline = "timeline:\n  - {name: crash, start_s: 5, set: {consumers.c.count: 0, consumers.c.leave: crash}}\n"
    r = Running(_scenario(tmp_path, "prefetch: 10, processing_ms: 5", timeline))
    tags = [r.link.deliver(f"m{i}") for i in range(3)]
    r.run.t = 6.0  # before the consumer wakes: the crash finds all three held
    r.until(lambda: ("crash",) in r.link.calls)
    r.until(lambda: any(e[0] == "consumer_crash" for e in r.run.events))
    assert r.link.acks == [] and r.link.nacks == []
    assert r.outcomes() == dict.fromkeys(tags, "crashed")
    in_hand = r.run.deliveries[0]  # processed, not acked: it keeps its processing times
    assert in_hand["end_ns"] is not None and in_hand["settle_ns"] is None
    [crash] = [e for e in r.run.events if e[0] == "consumer_crash"]
    assert crash[1] == 3 and crash[2] == {"unacked": 3, "in_hand": "m0"}
    assert ("cancel",) not in r.link.calls and ("close",) not in r.link.calls  # no word to the broker
    r.stop()


def test_codel_nacks_from_a_standing_queue_only_after_an_interval_above_target(tmp_path):
    # Each reading of the clock is 1 ms later; every delivery arrived 100 ms before it was read,
    # far above the 10 ms target: a standing queue. RFC 8289: no drop before an interval (50 ms)
    # of sojourn above target has passed; drops then, each nacked (requeue) rather than acked.
    clock = Clock(now=1_000 * MS, step=MS)
    codel = "codel: {target_ms: 10, interval_ms: 50, requeue: true}"
    r = Running(_scenario(tmp_path, f"prefetch: 200, processing_ms: 0, {codel}"), clock)
    tags = [r.link.deliver(f"m{i}", kernel_ns=clock.now - 100 * MS) for i in range(100)]
    r.until(lambda: len(r.link.settled()) == 100)
    nacked = [tag for tag, requeue in r.link.nacks]
    assert nacked and all(requeue for _, requeue in r.link.nacks)
    assert sorted(r.link.acks + nacked) == tags  # every delivery settled once, one way or the other
    outcomes = r.outcomes()
    assert {outcomes[t] for t in nacked} == {"nack_requeue"} and {outcomes[t] for t in r.link.acks} == {"ack"}
    first_start = min(row["start_ns"] for row in r.run.deliveries)
    first_nack = min(row["start_ns"] for row in r.run.deliveries if row["outcome"] == "nack_requeue")
    assert first_nack - first_start >= 50 * MS
    assert all(row["codel_dropping"] for row in r.run.deliveries if row["outcome"] == "nack_requeue")
    r.stop()


def test_codel_below_target_acks_everything(tmp_path):
    clock = Clock(now=1_000 * MS, step=MS)
    codel = "codel: {target_ms: 500, interval_ms: 50, requeue: true}"
    r = Running(_scenario(tmp_path, f"prefetch: 200, processing_ms: 0, {codel}"), clock)
    tags = [r.link.deliver(f"m{i}", kernel_ns=clock.now) for i in range(100)]  # 100 x 4 ms < 500 ms
    r.until(lambda: len(r.link.settled()) == 100)
    assert r.link.acks == tags and r.link.nacks == []
    r.stop()


def test_egress_discards_the_oldest_of_a_full_class_and_acks_it_at_once(tmp_path):
    # 100-byte messages are one 2,048-byte work unit each: a class holds 3 units, so the 4th and
    # 5th arrivals push out the two oldest, acked (so the broker forgets them) and traced discarded.
    egress = "egress: {max_depth_units: 3, min_burst: 1}"
    r = Running(_scenario(tmp_path, f"prefetch: 100, processing_ms: 5, {egress}"))
    tags = [r.link.deliver(f"m{i}") for i in range(5)]
    assert r.link.acks == tags[:2]  # acked in the I/O loop as the new ones were admitted
    r.until(lambda: len(r.link.acks) == 5)
    outcomes = r.outcomes()
    assert [outcomes[t] for t in tags] == ["egress_discard"] * 2 + ["ack"] * 3
    discarded = [row for row in r.run.deliveries if row["outcome"] == "egress_discard"]
    assert all(row["start_ns"] is None and row["egress_class"] is not None for row in discarded)
    r.stop()


def test_deliveries_that_cross_a_cancel_are_processed_and_counted(tmp_path):
    r = Running(_scenario(tmp_path, "prefetch: 10, processing_ms: 1"))
    tag = r.link.deliver("crossing", crossed=True)
    r.until(lambda: tag in r.link.acks)
    r.stop()
    [leave] = [e for e in r.run.events if e[0] == "consumer_leave"]
    assert leave[2]["crossed_cancel"] == 1


def test_an_interrupted_consumer_leaves_what_it_holds_unsettled_for_the_broker_to_requeue(tmp_path):
    r = Running(_scenario(tmp_path, "prefetch: 10, processing_ms: 200"))
    tags = [r.link.deliver(f"m{i}") for i in range(3)]
    r.until(lambda: r.consumer.buffered() == 2)  # the first is in hand
    r.stop(drained=False)  # stopping (Ctrl-C, SIGTERM): no clean leave
    assert ("cancel",) not in r.link.calls and ("close",) in r.link.calls
    outcomes = r.outcomes()
    assert [outcomes[t] for t in tags[1:]] == ["unsettled", "unsettled"]
    assert r.link.nacks == [] and tags[1] not in r.link.acks
