"""The producer on an in-memory link (tests/unit/fake_link.py) and a simulated clock: its confirm
window, confirms that ack, nack or follow a return, the broker's flow control (a blocked
connection, max_blocked_wait_s) and a lost connection, each as the broker would see it (what was
published, how many unconfirmed) and as the trace says it. Expected values come from the
scenario text."""

from __future__ import annotations

import time

import gevent

from loadgen.users.producer import Producer
from tests import consumer_checks
from tests.consumer_checks import MS, Clock, FakeRun
from tests.unit.fake_link import FakeProducerLink


class Publishing:
    """A Producer on a FakeProducerLink; its run() in a greenlet once `start()` is called."""

    def __init__(self, tmp_path, producer: str, duration_s: float = 1.0):
        scenario = consumer_checks.scenario(
            tmp_path / "s.yaml", "unit.producer", "prefetch: 1", producer=producer, duration_s=duration_s
        )
        self.run = FakeRun(scenario)
        self.links: list[FakeProducerLink] = []
        self.reports: list[tuple] = []

        def open_link(name, **callbacks):
            self.links.append(FakeProducerLink(name, **callbacks))
            return self.links[-1]

        self.clock = Clock(now=0, step=MS)
        self.producer = Producer(self.run, "p", 0, lambda *r: self.reports.append(r), open_link, self.clock)
        self.producer.prepare()  # connected before t0, as the start barrier has it
        self.greenlet = None

    @property
    def link(self) -> FakeProducerLink:
        return self.links[-1]

    def start(self) -> None:
        self.greenlet = gevent.spawn(self.producer.run)

    def until(self, done, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, "timed out"
            gevent.sleep(0.001)

    def finish(self) -> None:
        self.greenlet.join(10)
        assert self.greenlet.dead

    def outcomes(self) -> list[str]:
        return [row["outcome"] for row in sorted(self.run.publishes, key=lambda row: row["seq"])]


def test_the_confirm_window_bounds_unconfirmed_publishes_and_every_confirm_settles_its_row(tmp_path):
    # 200 msg/s for 1 s: 200 publishes, 5 ms apart, at most 5 unconfirmed at a time.
    p = Publishing(tmp_path, "rate: 200, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 5")
    p.start()
    for tag in range(1, 201):  # the broker confirms one at a time, as they come
        p.until(lambda tag=tag: len(p.link.published) >= tag)
        p.link.confirm(tag)
    p.finish()
    assert len(p.link.published) == 200 and max(p.link.outstanding) == 5
    assert p.outcomes() == ["confirmed"] * 200
    rows = sorted(p.run.publishes, key=lambda row: row["seq"])
    assert [row["intended_ns"] for row in rows] == [i * 5 * MS for i in range(200)]
    assert all(row["confirm_ns"] >= row["publish_ns"] for row in rows)
    assert [r[0] for r in p.reports] == ["publish"] * 200 and all(r[4] is None for r in p.reports)
    assert p.run.counters["published"] == p.run.counters["confirmed"] == 200


def test_a_multiple_ack_settles_every_publish_up_to_its_tag(tmp_path):
    p = Publishing(tmp_path, "rate: 10, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 100")
    p.start()
    p.until(lambda: len(p.link.published) == 10)
    p.link.confirm(7, multiple=True)
    assert p.run.counters["confirmed"] == 7
    p.link.confirm(10, multiple=True)
    p.finish()
    assert p.outcomes() == ["confirmed"] * 10


def test_a_nack_and_a_return_are_traced_as_the_broker_said(tmp_path):
    p = Publishing(tmp_path, "rate: 3, arrival: constant, size_bytes: 64, confirms: true, mandatory: true")
    p.start()
    p.until(lambda: len(p.link.published) == 3)
    second = p.link.published[1]["id"]
    p.link.on_return(second, 312, "NO_ROUTE", "", "nowhere")  # the return comes before its confirm
    for tag in (1, 2):
        p.link.confirm(tag)
    p.link.confirm(3, acked=False)
    p.finish()
    assert p.outcomes() == ["confirmed", "returned", "nacked"]
    [returned] = [e for e in p.run.events if e[0] == "publish_returned"]
    assert returned[2] == {"reply_code": 312, "reply_text": "NO_ROUTE", "exchange": "", "routing_key": "nowhere"}
    assert [r[4] is None for r in p.reports] == [True, False, False]


def test_a_publish_blocked_longer_than_max_blocked_wait_is_given_up_and_later_ones_go(tmp_path):
    # Blocked before the first publish: it waits 0.5 s of run time, then is traced blocked_timeout.
    p = Publishing(tmp_path, "rate: 2, arrival: constant, size_bytes: 64, confirms: false, max_blocked_wait_s: 0.5")
    p.link.on_blocked("low on memory")
    p.start()
    p.until(lambda: p.run.t == 0.0 and any(e[0] == "connection_blocked" for e in p.run.events))
    gevent.sleep(0.01)
    assert p.link.published == []  # nothing goes to a blocked connection
    p.run.t = 0.6  # the run's clock passes the wait
    p.until(lambda: len(p.run.publishes) == 1)
    [given_up] = p.run.publishes
    assert given_up["outcome"] == "blocked_timeout" and given_up["blocked_ms"] == 600.0
    p.link.on_unblocked()
    p.finish()
    assert p.outcomes() == ["blocked_timeout", "sent"]  # the one due at 0.5 s went once unblocked
    assert len(p.link.published) == 1
    assert [e[0] for e in p.run.events].count("connection_blocked") == 1
    assert p.run.events[-1][0] == "producer_leave"


def test_a_lost_connection_traces_what_it_left_unconfirmed(tmp_path):
    p = Publishing(tmp_path, "rate: 4, arrival: constant, size_bytes: 64, confirms: true", duration_s=0.5)
    p.start()
    p.until(lambda: len(p.link.published) == 2)
    p.link.confirm(1)
    p.link.lose(ConnectionError("the broker went away"))
    p.finish()
    assert p.outcomes() == ["confirmed", "unconfirmed"]
    [lost] = [e for e in p.run.events if e[0] == "connection_lost"]
    assert lost[2] == {"reason": "the broker went away"}


def test_a_reconnect_that_fails_fails_the_next_publish_and_is_tried_again(tmp_path):
    p = Publishing(tmp_path, "rate: 10, arrival: constant, size_bytes: 64, confirms: false")
    opened = p.producer._open_link
    attempts = []

    def flaky(name, **callbacks):  # the first reconnect finds the broker still gone
        attempts.append(name)
        if len(attempts) == 1:
            raise ConnectionError("connection refused")
        return opened(name, **callbacks)

    p.producer._open_link = flaky

    def broken(*_args, **_kwargs):  # the socket fails under the first publish
        raise ConnectionError("connection reset by peer")

    p.link.publish = broken
    p.start()
    p.finish()
    assert p.greenlet.successful()  # no error escaped the publish loop
    # the publish on the lost link failed, then the one after the failed reconnect; then it was back
    assert p.outcomes() == ["failed", "failed"] + ["sent"] * 8
    assert len(attempts) == 2 and len(p.links) == 2
