"""Producer behaviour checked the same way on two links: the in-memory fake, with a broker that
confirms each publish as it comes (tests/unit/test_producer.py), and pika's adapter against the
broker (tests/integration/test_consumer_link.py, in a gevent-patched child process).

A check takes `make(producer_fields, duration_s=1.0) -> Publishing`: a Producer on links from
`open_link` (each recording what was published and how many were unconfirmed as each went),
prepared (connected) and started by the check. The run's clock is simulated: a precise sleep
jumps to the time it waits for, so a second of schedule takes as long as the broker's answers.
Expected values come from the scenario text."""

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

    def __init__(self, path: Path, queue: str, producer: str, open_link: Callable[..., Any], duration_s: float = 1.0):
        scenario = consumer_checks.scenario(path, queue, "prefetch: 1", producer=producer, duration_s=duration_s)
        self.run = FakeRun(scenario)
        self.links: list[Any] = []
        self.reports: list[tuple] = []

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


Make = Callable[..., Publishing]
"""make(producer_fields, duration_s=1.0) -> Publishing."""


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
