"""The producer on an in-memory link (tests/unit/fake_link.py) and a simulated clock: its confirm
window, confirms that ack, nack or follow a return, the broker's flow control (a blocked
connection, max_blocked_wait_s) and a lost connection, each as the broker would see it (what was
published, how many unconfirmed) and as the trace says it. Expected values come from the
scenario text."""

from __future__ import annotations

import gevent
from gevent.event import Event

from tests import producer_checks
from tests.producer_checks import Publishing
from tests.unit.fake_link import FakeProducerLink


def _make(tmp_path, broker_confirms: bool = False):
    """make(producer, duration_s) on a FakeProducerLink; with `broker_confirms`, a broker greenlet
    confirms each publish as it comes (else the test does)."""

    def make(producer: str, duration_s: float = 1.0) -> Publishing:
        confirming = Event()
        confirming.set()
        p = Publishing(
            tmp_path / "s.yaml",
            "unit.producer",
            producer,
            FakeProducerLink,
            duration_s,
            lambda p, kind: _fault(p, kind, confirming),
        )
        if broker_confirms:
            gevent.spawn(_confirm_as_they_come, p, confirming)
        return p

    return make


def _confirm_as_they_come(p: Publishing, confirming: Event) -> None:
    """Each link's publishes confirmed as they come, with that link's own tags (from 1), while
    `confirming`; a link whose channel closed confirms nothing more."""
    confirmed: dict[int, int] = {}
    while p.greenlet is None or not p.greenlet.dead:  # until the producer has left
        confirming.wait()
        for link in p.links:
            done = confirmed.get(id(link), 0)
            while link.is_open and done < len(link.published):
                done += 1
                link.confirm(done)
            confirmed[id(link)] = done
        gevent.sleep(0)


def _fault(p: Publishing, kind: str, confirming: Event) -> None:
    """The broker closes the channel with two publishes unconfirmed (404: its exchange is gone)."""
    if kind == "close_channel":
        confirming.clear()
        link = p.link
        p.until(lambda: len(link.published) - len(link.confirmed) >= 2)
        link.close_channel(404, f"NOT_FOUND - no exchange '{producer_checks.EXCHANGE}' in vhost '/'")
        confirming.set()
    elif kind != "restore":
        raise AssertionError(kind)


def test_the_confirm_window_bounds_what_is_unconfirmed_and_every_publish_is_confirmed(tmp_path):
    producer_checks.check_the_confirm_window_bounds_what_is_unconfirmed_and_every_publish_is_confirmed(
        _make(tmp_path, broker_confirms=True)
    )


def test_a_channel_closed_by_the_broker_traces_what_it_left_unconfirmed_and_the_producer_reopens(tmp_path):
    producer_checks.check_a_channel_closed_by_the_broker_traces_what_it_left_unconfirmed_and_the_producer_reopens(
        _make(tmp_path, broker_confirms=True)
    )


def test_a_full_window_on_a_channel_the_broker_closed_neither_waits_nor_confuses_tags(tmp_path):
    # The window (3) is full of publishes on a channel the broker then closes: the three are traced
    # channel_closed at once, the producer reopens and fills the window again on the new channel,
    # whose tags count from 1: its confirm of tag 1 settles the 4th publish, not a stale 1st.
    p = _make(tmp_path)("rate: 10, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 3")
    p.start()
    p.until(lambda: len(p.link.published) == 3)
    first = p.link
    gevent.sleep(0.05)
    assert len(p.links) == 1 and len(p.run.publishes) == 0  # waiting on the full window
    first.close_channel(406, "PRECONDITION_FAILED - fake")
    p.until(lambda: len(p.links) == 2 and len(p.link.published) == 3)
    assert [row["outcome"] for row in p.run.publishes] == ["channel_closed"] * 3
    assert first.closed  # its connection closed: not left open
    p.link.confirm(1)
    p.until(lambda: len(p.run.publishes) == 4)
    fourth = p.rows()[3]
    assert fourth["outcome"] == "confirmed" and fourth["message_id"] == p.link.published[0]["id"]
    first.confirm(3, multiple=True)  # a late word from the old channel settles nothing
    first.lose(ConnectionError("late close of the old connection"))
    assert "connection_lost" not in [e[0] for e in p.run.events]
    for tag in range(2, 8):
        p.until(lambda tag=tag: len(p.link.published) >= tag)
        p.link.confirm(tag)
    p.finish()
    assert p.outcomes() == ["channel_closed"] * 3 + ["confirmed"] * 7
    [closed] = [e for e in p.run.events if e[0] == "channel_closed"]
    assert closed[2] == {"reply_code": 406, "reply_text": "PRECONDITION_FAILED - fake", "unconfirmed": 3}


def test_the_drain_sees_a_producer_idle_once_its_channel_closed_with_publishes_unconfirmed(tmp_path):
    p = _make(tmp_path)("rate: 10, arrival: constant, size_bytes: 64, confirms: true", duration_s=0.3)
    p.start()
    p.until(lambda: len(p.link.published) == 3)
    assert not p.producer.idle()
    p.run.draining.set()
    p.link.close_channel(406, "PRECONDITION_FAILED - fake")
    assert p.producer.idle()  # nothing will confirm them: the drain does not wait for them
    p.finish()
    assert p.outcomes() == ["channel_closed"] * 3


def test_the_window_fills_when_the_broker_confirms_one_at_a_time(tmp_path):
    p = _make(tmp_path)("rate: 200, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 5")
    p.start()
    for tag in range(1, 201):  # the broker confirms one at a time, as they come
        p.until(lambda tag=tag: len(p.link.published) >= tag)
        p.link.confirm(tag)
    p.finish()
    assert max(p.link.outstanding) == 5 and p.outcomes() == ["confirmed"] * 200


def test_a_multiple_ack_settles_every_publish_up_to_its_tag(tmp_path):
    p = _make(tmp_path)("rate: 10, arrival: constant, size_bytes: 64, confirms: true, confirm_window: 100")
    p.start()
    p.until(lambda: len(p.link.published) == 10)
    p.link.confirm(7, multiple=True)
    assert p.run.counters["confirmed"] == 7
    p.link.confirm(10, multiple=True)
    p.finish()
    assert p.outcomes() == ["confirmed"] * 10


def test_a_nack_and_a_return_are_traced_as_the_broker_said(tmp_path):
    p = _make(tmp_path)("rate: 3, arrival: constant, size_bytes: 64, confirms: true, mandatory: true")
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
    p = _make(tmp_path)("rate: 2, arrival: constant, size_bytes: 64, confirms: false, max_blocked_wait_s: 0.5")
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
    p = _make(tmp_path)("rate: 4, arrival: constant, size_bytes: 64, confirms: true", duration_s=0.5)
    p.start()
    p.until(lambda: len(p.link.published) == 2)
    p.link.confirm(1)
    p.link.lose(ConnectionError("the broker went away"))
    p.finish()
    assert p.outcomes() == ["confirmed", "unconfirmed"]
    [lost] = [e for e in p.run.events if e[0] == "connection_lost"]
    assert lost[2] == {"reason": "the broker went away"}


def test_a_reconnect_that_fails_fails_the_next_publish_and_is_tried_again(tmp_path):
    p = _make(tmp_path)("rate: 10, arrival: constant, size_bytes: 64, confirms: false")
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
