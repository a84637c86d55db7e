"""Producer behaviour checked the same way on two links: the in-memory fake, with a broker that
confirms each publish as it comes (tests/unit/test_producer.py), and pika's adapter against the
broker (tests/integration/test_consumer_link.py, in a gevent-patched child process).

A check takes `make(producer_fields, duration_s=1.0) -> Publishing`: a Producer on links from
`open_link` (each recording what was published and how many were unconfirmed as each went),
prepared (connected) and started by the check, and whose `fault("close_channel")` has the broker
close the producer's channel while its connection stays open (the fake: with a few publishes
unconfirmed; against the broker: the producer's exchange deleted, so its next publish gets a 404)
and `fault("restore")` undo what caused it (the exchange declared and bound again). The run's
clock is simulated: a precise sleep jumps to the time it waits for, so a second of schedule takes
as long as the broker's answers. Expected values come from the scenario text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent

from loadgen.users.producer import Producer
from tests import consumer_checks
from tests.consumer_checks import MS, Clock, FakeRun, wait_until


class Publishing:
    """A Producer on links from `open_link(name, **callbacks)`; run() in a greenlet on `start()`."""

    def __init__(
        self,
        path: Path,
        queue: str,
        producer: str,
        open_link: Callable[..., Any],
        duration_s: float = 1.0,
        fault: Callable[[Publishing, str], None] | None = None,
    ):
        scenario = consumer_checks.scenario(path, queue, "prefetch: 1", producer=producer, duration_s=duration_s)
        self.run = FakeRun(scenario)
        self.links: list[Any] = []
        self.reports: list[tuple] = []
        self._fault = fault

        def opened(name: str, **callbacks: Any) -> Any:
            self.links.append(open_link(name, **callbacks))
            return self.links[-1]

        self.clock = Clock(now=0, step=MS)
        self.producer = Producer(self.run, "p", 0, lambda *r: self.reports.append(r), opened, self.clock)
        self.producer.prepare()  # connected before t0, as the start barrier has it
        self.greenlet: gevent.Greenlet | None = None

    @property
    def link(self) -> Any:
        return self.links[-1]

    def start(self) -> None:
        self.greenlet = gevent.spawn(self.producer.run)

    def until(self, done: Callable[[], bool], timeout_s: float = 5.0) -> None:
        wait_until(done, timeout_s)

    def finish(self) -> None:
        assert self.greenlet is not None
        self.greenlet.join(30)
        assert self.greenlet.dead

    def rows(self) -> list[dict]:
        return sorted(self.run.publishes, key=lambda row: row["seq"])

    def outcomes(self) -> list[str]:
        return [row["outcome"] for row in self.rows()]

    def fault(self, kind: str) -> None:
        assert self._fault is not None, "this harness has no faults"
        self._fault(self, kind)

    def closes(self) -> list[tuple]:
        return [e for e in self.run.events if e[0] == "channel_closed"]


Make = Callable[..., Publishing]
"""make(producer_fields, duration_s=1.0) -> Publishing."""

EXCHANGE = "sojourn.checks.faults"
"""The exchange of the channel-fault check's producer (direct, its routing key bound to the queue)."""


def check_the_confirm_window_bounds_what_is_unconfirmed_and_every_publish_is_confirmed(make: Make) -> None:
    # 200 msg/s for 1 s: 200 publishes, 5 ms apart, at most 5 unconfirmed at a time.
    p = make("rate: 200, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 5")
    p.start()
    p.finish()
    assert len(p.link.published) == 200 and max(p.link.outstanding) <= 5
    assert p.outcomes() == ["confirmed"] * 200
    rows = p.rows()
    assert [row["intended_ns"] for row in rows] == [i * 5 * MS for i in range(200)]
    assert all(row["confirm_ns"] >= row["publish_ns"] for row in rows)
    assert [r[0] for r in p.reports] == ["publish"] * 200 and all(r[4] is None for r in p.reports)
    assert p.run.counters["published"] == p.run.counters["confirmed"] == 200
    assert [e[0] for e in p.run.events] == ["producer_join", "producer_leave"]


def check_a_channel_closed_by_the_broker_traces_what_it_left_unconfirmed_and_the_producer_reopens(make: Make) -> None:
    # 100 msg/s for 2 s, a window of 5. Twice, at the 40th and the 120th publish, the broker closes
    # the channel while the connection stays open. What it had not confirmed then is traced
    # channel_closed (never confirmed later, never lost from the trace); the producer closes that
    # connection, opens a new link and goes on: every one of the 200 publishes is sent, each traced
    # once, confirmed or channel_closed, and the window holds on every link.
    p = make(
        f"exchange: {EXCHANGE}, routing_key: k, rate: 100, arrival: constant, size_bytes: 64, "
        "confirms: true, confirm_window: 5",
        duration_s=2.0,
    )
    p.start()
    for at, closes in ((40, 1), (120, 2)):
        p.until(lambda at=at: sum(len(link.published) for link in p.links) >= at)
        p.fault("close_channel")
        p.until(lambda closes=closes: len(p.closes()) >= closes, timeout_s=10)
        p.fault("restore")
    p.finish()
    rows = p.rows()
    assert [row["seq"] for row in rows] == list(range(200))  # each publish traced once
    outcomes = p.outcomes()
    assert set(outcomes) <= {"confirmed", "channel_closed"} and outcomes.count("channel_closed") >= 2, outcomes
    closes = p.closes()
    assert len(closes) >= 2 and all(e[1] == e[2]["reply_code"] == 404 for e in closes)
    assert all(f"NOT_FOUND - no exchange '{EXCHANGE}'" in e[2]["reply_text"] for e in closes)
    assert sum(e[2]["unconfirmed"] for e in closes) == outcomes.count("channel_closed")
    assert len(p.links) == len(closes) + 1, (len(p.links), closes)  # a new link after each close
    assert all(link.closed for link in p.links)  # every connection closed, none left open
    assert all(max(link.outstanding, default=0) <= 5 for link in p.links)
    assert sum(len(link.published) for link in p.links) == 200  # none failed: the link was reopened first
    assert p.run.counters["published"] == 200
    kinds = [e[0] for e in p.run.events]
    assert kinds[0] == "producer_join" and kinds[-1] == "producer_leave"
    assert kinds.count("producer_join") == len(closes) + 1 and "connection_lost" not in kinds
