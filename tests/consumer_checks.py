"""Consumer behaviour checked the same way on two links: the in-memory fake
(tests/unit/test_consumer.py) and pika's adapter against the broker
(tests/integration/test_consumer_link.py, in a gevent-patched child process).

A check takes `make(consumer_fields, timeline="") -> Running`: a Consumer running in its own
greenlet on a recording link, whose `send(ids)` gets those messages to it (the fake hands them
over as the I/O loop would; the broker's side publishes them and waits until they arrived), whose
`left_with_broker()` says how many messages the broker still holds for redelivery, and whose
`fault(kind)` has the broker close the consumer's channel ("close_channel": the fake closes it with
a 406 and redelivers what was unacked once the consumer is back; against the broker, an ack of a
delivery tag the channel never had) or cancel its subscription ("cancel": the queue deleted; the
consumer's basic.consume then finds it gone and declares it again through the run). The run's
clock (`run.t`, seconds since t0) is the test's. Expected values come from the scenario text."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
from gevent.event import Event

from loadgen.scenario import load_scenario
from loadgen.trace import rows
from loadgen.users.consumer import Consumer

MS = 1_000_000


def scenario(
    path: Path,
    queue: str,
    consumer: str,
    timeline: str = "",
    producer: str = "rate: 1, size_bytes: 100",
    duration_s: float = 60,
    queue_type: str = "classic",
) -> Any:
    path.write_text(
        f"""
name: consumer-checks
queue: {{name: {queue}, type: {queue_type}}}
run: {{duration_s: {duration_s:g}}}
producers: [{{name: p, {producer}}}]
consumers:
  - {{name: c, {consumer}}}
{timeline}"""
    )
    return load_scenario(path)


def wait_until(done: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Let the greenlets run until `done()`; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        gevent.sleep(0.001)


class FakeRun:
    """What a Consumer or a Producer reads of its RunContext: the scenario, a clock the test sets
    (`t`, seconds since t0; a producer's precise sleep moves it to the time it waits for), the
    stop and drain events, counters, events and the rows written, by column name."""

    def __init__(self, scenario: Any):
        self.scenario = scenario
        self.run_id, self.worker = "unit", "host-1"
        self.t0_ns = 0
        self.t = 0.0
        self.drained, self.draining, self.stopping = Event(), Event(), Event()
        self.counters = {"published": 0, "confirmed": 0, "delivered": 0, "acked": 0}
        self.events: list[tuple] = []
        self.deliveries: list[dict] = []
        self.publishes: list[dict] = []
        self.late_ns: list[int] = []
        self.writer = self  # the trace writer's append
        self.lateness = self  # the console's lateness windows' note
        self.declared = 0  # declare_topology calls (a queue found gone, declared again)
        self.on_declare: Callable[[], None] = lambda: None  # the broker's side of declare_topology

    def declare_topology(self, purge: bool) -> int:
        assert not purge  # only the run's start purges
        self.declared += 1
        self.on_declare()
        return 0

    def append(self, kind: str, row: tuple) -> None:
        assert kind in ("delivery", "publish"), kind
        (self.deliveries if kind == "delivery" else self.publishes).append(dict(zip(rows.own_columns(kind), row)))

    def note(self, late_ns: int) -> None:
        self.late_ns.append(late_ns)

    def elapsed_s(self) -> float:
        return self.t

    def event(self, kind: str, source: str, name: str, value: float | None = None, detail: dict | None = None) -> None:
        self.events.append((kind, value, detail))

    def sleep_until(self, t_s: float, interrupt: Event | None = None) -> bool:
        gevent.sleep(0.001)  # the test moves the clock; the loop looks again
        return not (interrupt is not None and interrupt.is_set())

    def sleep_until_precise(self, t_s: float, interrupt: Event) -> bool:
        """Simulated time: the clock jumps to `t_s` (never back)."""
        gevent.sleep(0)
        if interrupt.is_set():
            return False
        self.t = max(self.t, t_s)
        return True


class Clock:
    """A wall clock in ns that the test sets (`now`), and that moves `step` at every reading."""

    def __init__(self, now: int = 1_000_000_000, step: int = 0):
        self.now, self.step = now, step

    def __call__(self) -> int:
        self.now += self.step
        return self.now


class Running:
    """A Consumer's run() in its own greenlet on links from `open_link` (each recording `calls`,
    `acks` and `nacks`); `send(running, ids)` gets messages to it; `left(running)` counts what the
    broker holds for redelivery."""

    def __init__(
        self,
        scenario: Any,
        open_link: Callable[..., Any],
        send: Callable[[Running, list[str]], None],
        left: Callable[[Running], int],
        clock: Callable[[], int] = time.time_ns,
        fault: Callable[[Running, str], None] | None = None,
    ):
        self.run = FakeRun(scenario)
        self.queue = scenario.queue.name
        self.links: list[Any] = []
        self.reports: list[tuple] = []
        self._send, self._left, self._fault = send, left, fault

        def opened(*args: Any, **callbacks: Any) -> Any:
            self.links.append(open_link(*args, **callbacks))
            return self.links[-1]

        self.consumer = Consumer(self.run, "c", 0, lambda *r: self.reports.append(r), opened, clock)
        self.greenlet = gevent.spawn(self.consumer.run)
        self.until(lambda: bool(self.links) and any(c[0] == "consume" for c in self.links[-1].calls))

    @property
    def link(self) -> Any:
        return self.links[-1]

    def send(self, ids: list[str]) -> None:
        self._send(self, ids)

    def left_with_broker(self) -> int:
        return self._left(self)

    def fault(self, kind: str) -> None:
        assert self._fault is not None, "this harness has no faults"
        self._fault(self, kind)

    def kinds(self) -> list[str]:
        return [e[0] for e in self.run.events]

    def subscribed(self, links: int) -> bool:
        """`links` links opened and the last one subscribed."""
        return len(self.links) >= links and any(c[0] == "consume" for c in self.links[links - 1].calls)

    def rows_of(self, message_id: str) -> list[dict]:
        return [row for row in self.run.deliveries if row["message_id"] == message_id]

    def until(self, done: Callable[[], bool], timeout_s: float = 5.0) -> None:
        wait_until(done, timeout_s)

    def stop(self, drained: bool = True) -> None:
        (self.run.drained if drained else self.run.stopping).set()
        self.greenlet.join(10)
        assert self.greenlet.dead

    def outcomes(self) -> dict[str, str]:
        return {row["message_id"]: row["outcome"] for row in self.run.deliveries}


Make = Callable[..., Running]
"""make(consumer_fields, timeline="") -> Running."""


def check_buffered_deliveries_are_processed_in_order_and_acked(make: Make) -> None:
    r = make("prefetch: 10, processing_ms: 5")
    assert r.link.calls == [("qos", 10, False), ("consume", r.queue, False)]
    ids = [f"m{i}" for i in range(4)]
    r.send(ids)
    r.until(lambda: len(r.link.acks) == 4)
    got = r.run.deliveries
    assert [row["message_id"] for row in got] == ids
    assert r.link.acks == [row["delivery_tag"] for row in got] and r.link.nacks == []
    assert all(row["outcome"] == "ack" and row["prefetch"] == 10 and row["processing_ms"] == 5 for row in got)
    assert all(b["start_ns"] >= a["end_ns"] for a, b in zip(got, got[1:]))  # one after another
    assert r.run.counters["delivered"] == r.run.counters["acked"] == 4
    r.stop()
    assert r.link.calls[-2:] == [("cancel",), ("close",)]
    assert [e[0] for e in r.run.events] == ["consumer_join", "consumer_leave"]
    assert r.left_with_broker() == 0


def check_a_prefetch_change_resubscribes_per_consumer_scope(make: Make, scope: str) -> None:
    timeline = "timeline:\n  - {name: wide, start_s: 5, set: {consumers.c.prefetch: 20}}\n"
    r = make(f"prefetch: 10, prefetch_scope: {scope}, processing_ms: 20", timeline)
    r.send(["before"])  # in the buffer when the phase comes
    r.run.t = 6.0
    r.until(lambda: any(e[0] == "prefetch_change" for e in r.run.events))  # the change is done
    r.until(lambda: len(r.link.acks) == 1)  # acked on the same link, after the change
    resubscribe = [("cancel",), ("consume", r.queue, False)] if scope == "consumer" else []
    assert r.link.calls[2:] == [("qos", 20, scope == "channel"), *resubscribe]
    assert len(r.links) == 1  # the same connection throughout
    [change] = [e for e in r.run.events if e[0] == "prefetch_change"]
    assert change[1] == 20 and change[2]["from"] == 10 and change[2]["to"] == 20
    r.send(["after"])
    r.until(lambda: len(r.link.acks) == 2)
    assert [row["prefetch"] for row in r.run.deliveries] == [10, 20]
    r.stop()
    assert r.left_with_broker() == 0


def check_a_crash_settles_nothing_it_holds_and_the_broker_keeps_it(make: Make) -> None:
    timeline = "timeline:\n  - {name: crash, start_s: 5, set: {consumers.c.count: 0, consumers.c.leave: crash}}\n"
    r = make("prefetch: 10, processing_ms: 300", timeline)
    ids = ["m0", "m1", "m2"]
    r.send(ids)
    r.run.t = 6.0
    r.until(lambda: any(e[0] == "consumer_crash" for e in r.run.events))
    outcomes = r.outcomes()
    crashed = [m for m in ids if outcomes.get(m) == "crashed"]
    # Whatever was in hand when the phase came may finish and be acked; every other delivery is
    # held, traced crashed, settled neither way, and left with the broker for redelivery.
    assert len(crashed) >= 2 and all(outcomes[m] in ("ack", "crashed") for m in ids), outcomes
    assert len(r.link.acks) == len(ids) - len(crashed) and r.link.nacks == []
    [crash] = [e for e in r.run.events if e[0] == "consumer_crash"]
    assert crash[1] == len(crashed) and crash[2]["in_hand"] == crashed[0]
    in_hand = next(row for row in r.run.deliveries if row["message_id"] == crashed[0])
    assert in_hand["end_ns"] is not None and in_hand["settle_ns"] is None  # processed, not acked
    assert ("crash",) in r.link.calls and ("cancel",) not in r.link.calls and ("close",) not in r.link.calls
    r.until(lambda: r.left_with_broker() == len(crashed))
    r.stop()


def check_a_channel_closed_by_the_broker_requeues_what_the_consumer_held_and_it_rejoins(make: Make) -> None:
    # Three deliveries of 300 ms each: the first in hand, two buffered, when the broker closes the
    # channel (a 406). None of them can be acked any more: each is traced unsettled (the one in hand
    # once its processing ends), the consumer closes that connection and subscribes again, and the
    # broker redelivers all three, which are then acked: each message ends acked once.
    r = make("prefetch: 10, processing_ms: 300")
    ids = ["m0", "m1", "m2"]
    r.send(ids)
    r.until(lambda: r.consumer.buffered() == 2)  # the first is in hand
    first = r.link
    r.fault("close_channel")
    r.until(lambda: r.subscribed(2), timeout_s=10)
    r.until(lambda: all(any(row["outcome"] == "ack" for row in r.rows_of(m)) for m in ids), timeout_s=10)
    for m in ids:
        outcomes = [row["outcome"] for row in r.rows_of(m)]
        assert outcomes == ["unsettled", "ack"], (m, outcomes)
        unsettled, acked = r.rows_of(m)
        assert unsettled["settle_ns"] is None and acked["redelivered"] is True
    assert r.rows_of("m0")[0]["end_ns"] is not None  # the one in hand was processed, not acked
    assert first.acks == [] and ("close",) in first.calls  # nothing acked on the dead channel; its connection closed
    [closed] = [e for e in r.run.events if e[0] == "channel_closed"]
    assert closed[1] == 406 and closed[2]["reply_code"] == 406 and closed[2]["unsettled"] == 3
    assert "PRECONDITION_FAILED" in closed[2]["reply_text"]
    [leave] = [e for e in r.run.events if e[0] == "consumer_leave"]
    assert leave[2]["reason"] == "channel_closed" and leave[2]["clean"] is False
    assert r.kinds().count("consumer_join") == 2
    r.stop()
    assert r.left_with_broker() == 0


def check_a_cancel_from_the_broker_settles_the_buffer_and_the_consumer_rejoins(make: Make) -> None:
    # The queue is deleted under a consumer holding three deliveries (basic.cancel from the broker):
    # it processes and acks them on the channel still open, leaves, finds the queue gone on its way
    # back (404 on basic.consume), declares it again through the run, and consumes what comes next.
    r = make("prefetch: 10, processing_ms: 50")
    ids = ["m0", "m1", "m2"]
    r.send(ids)
    first = r.link
    r.fault("cancel")
    r.until(lambda: r.run.declared == 1 and r.kinds().count("consumer_join") == 2, timeout_s=10)
    assert [r.outcomes().get(m) for m in ids] == ["ack"] * 3  # all three acked on the first link
    assert sorted(first.acks) == sorted(row["delivery_tag"] for row in r.run.deliveries)
    assert ("cancel",) not in first.calls and ("close",) in first.calls  # the broker had cancelled already
    kinds = r.kinds()
    assert kinds.count("consumer_cancelled") == 1 and kinds.count("queue_recreated") == 1
    [leave] = [e for e in r.run.events if e[0] == "consumer_leave"]
    assert leave[2]["reason"] == "cancelled" and leave[2]["clean"] is True
    [gone] = [e for e in r.run.events if e[0] == "channel_closed"]  # the basic.consume on no queue
    assert gone[2]["reply_code"] == 404
    assert kinds == [
        "consumer_join",
        "consumer_cancelled",
        "consumer_leave",
        "channel_closed",
        "queue_recreated",
        "consumer_join",
    ]
    r.send(["after"])
    r.until(lambda: r.outcomes().get("after") == "ack")
    r.stop()
    assert r.left_with_broker() == 0
