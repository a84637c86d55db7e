"""The consumer on an in-memory link (tests/unit/fake_link.py): its buffer, a prefetch change, a
crash, CoDel and egress, each as the broker would see it (what was asked of the link, which tags
were acked or nacked) and as the trace says it. The first three are tests/consumer_checks.py's,
which tests/integration/test_consumer_link.py runs on pika's adapter against the broker too.
Expected values come from the scenario text."""

from __future__ import annotations

import time

import gevent
import pytest

from tests import consumer_checks
from tests.consumer_checks import MS, Clock, Running
from tests.unit.fake_link import FakeBroker, FakeLink

QUEUE = "unit.consumer"


def _make(tmp_path, clock=time.time_ns, queue_type="classic"):
    broker = FakeBroker()

    def make(consumer: str, timeline: str = "") -> Running:
        return Running(
            consumer_checks.scenario(tmp_path / "s.yaml", QUEUE, consumer, timeline, queue_type=queue_type),
            lambda *args, **callbacks: FakeLink(*args, broker=broker, **callbacks),
            lambda r, ids: [r.link.deliver(i) for i in ids],
            lambda r: r.link.left(),
            clock,
            lambda r, kind: _fault(r, kind, broker),
        )

    return make


def _fault(r: Running, kind: str, broker: FakeBroker) -> None:
    """The broker's side of a fault on the fake: a 406 that closes the channel, after which what
    was unacked is redelivered once the consumer has subscribed again; or the queue deleted under
    the consumer (basic.cancel), declared again when the run is asked to."""
    link = r.link
    if kind == "close_channel":
        held = [link.ids[tag] for tag in link.unacked()]
        link.close_channel(406, "PRECONDITION_FAILED - unknown delivery tag 1000000")
        links = len(r.links)

        def redeliver() -> None:
            consumer_checks.wait_until(lambda: r.subscribed(links + 1))
            for message_id in held:
                r.link.deliver(message_id, redelivered=True)

        gevent.spawn(redeliver)
    elif kind == "cancel":
        broker.gone.add(r.queue)
        r.run.on_declare = lambda: broker.gone.discard(r.queue)
        link.broker_cancel()
    else:
        raise AssertionError(kind)


def _by_tag(r: Running) -> dict[int, str]:
    return {row["delivery_tag"]: row["outcome"] for row in r.run.deliveries}


def test_buffered_deliveries_are_processed_in_order_and_acked(tmp_path):
    consumer_checks.check_buffered_deliveries_are_processed_in_order_and_acked(_make(tmp_path))


@pytest.mark.parametrize("scope", ["consumer", "channel"])
def test_a_prefetch_change_resubscribes_per_consumer_scope(tmp_path, scope):
    consumer_checks.check_a_prefetch_change_resubscribes_per_consumer_scope(_make(tmp_path), scope)


def test_a_crash_settles_nothing_it_holds_and_the_broker_keeps_it(tmp_path):
    consumer_checks.check_a_crash_settles_nothing_it_holds_and_the_broker_keeps_it(_make(tmp_path))


def test_a_channel_closed_by_the_broker_requeues_what_the_consumer_held_and_it_rejoins(tmp_path):
    consumer_checks.check_a_channel_closed_by_the_broker_requeues_what_the_consumer_held_and_it_rejoins(_make(tmp_path))


def test_a_cancel_from_the_broker_settles_the_buffer_and_the_consumer_rejoins(tmp_path):
    consumer_checks.check_a_cancel_from_the_broker_settles_the_buffer_and_the_consumer_rejoins(_make(tmp_path))


def test_a_close_of_an_old_link_after_the_rejoin_touches_nothing_of_the_new_one(tmp_path):
    # The first link's channel closed and the consumer moved on; a late word from that link (its
    # channel or connection closing again) must not trace, or drop, what the new link holds.
    r = _make(tmp_path)("prefetch: 10, processing_ms: 300")
    old = r.link
    old.close_channel(406, "PRECONDITION_FAILED - unknown delivery tag 7")
    r.until(lambda: r.subscribed(2))
    r.send(["m0", "m1"])
    r.until(lambda: r.consumer.buffered() == 1)  # m0 in hand, m1 buffered
    old.close_channel(406, "PRECONDITION_FAILED - unknown delivery tag 8")
    old.broker_cancel()
    r.until(lambda: len(r.link.acks) == 2)
    assert r.outcomes() == {"m0": "ack", "m1": "ack"} and len(r.links) == 2
    assert r.kinds().count("channel_closed") == 1 and "consumer_cancelled" not in r.kinds()
    r.stop()


def test_a_consumer_cancelled_as_the_run_drains_processes_its_buffer_without_cancelling_again(tmp_path):
    # The broker cancels the subscription just as the drain ends: the consumer leaves with what it
    # holds processed and acked, and sends no basic.cancel of its own (no cancel-ok would come).
    r = _make(tmp_path)("prefetch: 10, processing_ms: 50")
    tags = [r.link.deliver(f"m{i}") for i in range(3)]
    r.run.drained.set()
    r.link.broker_cancel()
    r.greenlet.join(5)
    assert r.greenlet.dead
    assert sorted(r.links[0].acks) == tags and ("cancel",) not in r.links[0].calls
    assert set(r.outcomes().values()) == {"ack"}


def test_a_queue_that_stays_gone_fails_the_join_for_the_participant_retry(tmp_path):
    # Declared again, the queue is still not there (someone deletes it as fast): the join raises
    # the broker's refusal (the locustfile records participant_error and retries after a pause)
    # instead of looping on connections.
    broker = FakeBroker()
    r = Running(
        consumer_checks.scenario(tmp_path / "s.yaml", QUEUE, "prefetch: 10"),
        lambda *args, **callbacks: FakeLink(*args, broker=broker, **callbacks),
        lambda r, ids: None,
        lambda r: 0,
    )
    broker.gone.add(QUEUE)  # declare_topology leaves it gone (on_declare does nothing)
    r.link.broker_cancel()
    r.greenlet.join(5)
    assert r.greenlet.dead and r.greenlet.exception is not None
    assert getattr(r.greenlet.exception, "reply_code", None) == 404
    assert r.run.declared == 1 and len(r.links) == 3 and all(not link.is_open for link in r.links)


def test_each_delivery_found_the_earlier_ones_waiting_in_the_buffer(tmp_path):
    r = _make(tmp_path)("prefetch: 10, processing_ms: 5")
    for i in range(4):  # back to back: the consumer has not woken
        r.link.deliver(f"m{i}")
    r.until(lambda: len(r.link.acks) == 4)
    assert [row["buffer_len"] for row in r.run.deliveries] == [0, 1, 2, 3]
    r.stop()


def test_the_receive_stamp_is_the_kernels_when_the_link_has_one_else_the_read(tmp_path):
    clock = Clock(now=10_000 * MS)
    r = _make(tmp_path, clock)("prefetch: 10, processing_ms: 1")
    r.link.deliver("k", kernel_ns=9_990 * MS)  # arrived 10 ms before the read
    r.link.stamps = None  # a link without kernel stamps
    r.link.deliver("r", kernel_ns=1)
    r.until(lambda: len(r.link.acks) == 2)
    k, rr = r.run.deliveries
    assert k["receive_ns"] == 9_990 * MS and k["read_ns"] == 10_000 * MS
    assert rr["receive_ns"] == rr["read_ns"] == 10_000 * MS
    r.stop()


def test_codel_nacks_from_a_standing_queue_only_after_an_interval_above_target(tmp_path):
    # Each reading of the clock is 1 ms later; every delivery arrived 100 ms before it was read,
    # far above the 10 ms target: a standing queue. RFC 8289: no drop before an interval (50 ms)
    # of sojourn above target has passed; drops then, each nacked (requeue) rather than acked.
    clock = Clock(now=1_000 * MS, step=MS)
    codel = "codel: {target_ms: 10, interval_ms: 50, requeue: true}"
    r = _make(tmp_path, clock)(f"prefetch: 200, processing_ms: 0, {codel}")
    tags = [r.link.deliver(f"m{i}", kernel_ns=clock.now - 100 * MS) for i in range(100)]
    r.until(lambda: len(r.link.settled()) == 100)
    nacked = [tag for tag, requeue in r.link.nacks]
    assert nacked and all(requeue for _, requeue in r.link.nacks)
    assert sorted(r.link.acks + nacked) == tags  # every delivery settled once, one way or the other
    outcomes = _by_tag(r)
    assert {outcomes[t] for t in nacked} == {"nack_requeue"} and {outcomes[t] for t in r.link.acks} == {"ack"}
    first_start = min(row["start_ns"] for row in r.run.deliveries)
    first_nack = min(row["start_ns"] for row in r.run.deliveries if row["outcome"] == "nack_requeue")
    assert first_nack - first_start >= 50 * MS
    assert all(row["codel_dropping"] for row in r.run.deliveries if row["outcome"] == "nack_requeue")
    r.stop()


def test_codel_below_target_acks_everything(tmp_path):
    clock = Clock(now=1_000 * MS, step=MS)
    codel = "codel: {target_ms: 500, interval_ms: 50, requeue: true}"
    r = _make(tmp_path, clock)(f"prefetch: 200, processing_ms: 0, {codel}")
    tags = [r.link.deliver(f"m{i}", kernel_ns=clock.now) for i in range(100)]  # 100 x 4 ms < 500 ms
    r.until(lambda: len(r.link.settled()) == 100)
    assert r.link.acks == tags and r.link.nacks == []
    r.stop()


def _binomial_bound(n: int, p: float) -> float:
    """Five standard deviations of a Binomial(n, p) count: a correct draw strays that far about once
    in 3.5 million runs."""
    return 5 * (n * p * (1 - p)) ** 0.5


def test_outcome_rates_settle_each_share_as_drawn_and_trace_it(tmp_path):
    # 3,000 deliveries at 20 % requeue, 10 % discard, 5 % reject: each outcome's count is within a
    # binomial bound of its share, the link saw exactly the traced settles, and the same seed draws
    # the same outcomes again.
    shares = {"nack_requeue": 0.20, "nack_discard": 0.10, "reject": 0.05}
    rates = "outcomes: {requeue: 0.2, discard: 0.1, reject: 0.05, seed: 11}"
    n = 3_000

    def run() -> dict[int, str]:
        r = _make(tmp_path)(f"prefetch: 0, processing_ms: 0, {rates}")
        tags = [r.link.deliver(f"m{i}") for i in range(n)]
        r.until(lambda: len(r.link.settled()) == n)
        outcomes = _by_tag(r)
        assert sorted(r.link.settled()) == tags
        assert {outcomes[t] for t in r.link.acks} <= {"ack"}
        assert {outcomes[t] for t, requeue in r.link.nacks} <= {"nack_requeue", "nack_discard"}
        assert all(requeue == (outcomes[t] == "nack_requeue") for t, requeue in r.link.nacks)
        assert {outcomes[t] for t, _ in r.link.rejects} <= {"reject"} and not any(q for _, q in r.link.rejects)
        by = {row["outcome"]: row["settled_by"] for row in r.run.deliveries}
        assert by == {"ack": None, "nack_requeue": "rate", "nack_discard": "rate", "reject": "rate"}
        assert all(row["end_ns"] is not None for row in r.run.deliveries)  # processed, then settled
        r.stop()
        return outcomes

    first = run()
    for outcome, p in shares.items():
        count = sum(1 for o in first.values() if o == outcome)
        assert abs(count - n * p) <= _binomial_bound(n, p), (outcome, count)
    assert run() == first


def test_a_phase_changes_the_outcome_rates(tmp_path):
    # Every delivery is requeued in the phase `bad` (the whole run), none outside it.
    timeline = "timeline: [{name: bad, start_s: 0, set: {consumers.c.outcomes: {requeue: 1}}}]"
    r = _make(tmp_path)("prefetch: 0, processing_ms: 0", timeline)
    tags = [r.link.deliver(f"m{i}") for i in range(20)]
    r.until(lambda: len(r.link.settled()) == 20)
    assert r.link.nacks == [(t, True) for t in tags] and r.link.acks == []
    r.stop()


HANDLER = 'handler: {path: "tests.handler_examples:by_body", mode: %s, threads: %d, on_error: %s}'


def test_a_handlers_return_value_settles_each_delivery_and_its_error_is_traced(tmp_path):
    # Each body names what the handler does; on_error: requeue settles the raise and the bad return.
    r = _make(tmp_path)("prefetch: 20, " + HANDLER % ("inline", 1, "requeue"))
    bodies = ["ack", "none", "requeue", "discard", "reject", "raise", "bad"]
    tags = {body: r.link.deliver(f"m-{body}", body=body.encode()) for body in bodies}
    r.until(lambda: len(r.link.settled()) == len(bodies))
    assert sorted(r.link.acks) == [tags["ack"], tags["none"]]
    assert sorted(r.link.nacks) == sorted(
        [(tags["requeue"], True), (tags["discard"], False), (tags["raise"], True), (tags["bad"], True)]
    )
    assert r.link.rejects == [(tags["reject"], False)]
    rows = {row["message_id"]: row for row in r.run.deliveries}
    assert {k: (v["outcome"], v["settled_by"], v["handler_error"]) for k, v in rows.items()} == {
        "m-ack": ("ack", "handler", None),
        "m-none": ("ack", "handler", None),
        "m-requeue": ("nack_requeue", "handler", None),
        "m-discard": ("nack_discard", "handler", None),
        "m-reject": ("reject", "handler", None),
        "m-raise": ("nack_requeue", "handler_error", "ValueError"),
        "m-bad": ("nack_requeue", "handler_error", "sojourn.BadHandlerReturn"),
    }
    assert all(v["processing_ms"] is not None and v["end_ns"] >= v["start_ns"] for v in rows.values())
    r.stop()


def test_a_thread_handler_blocks_no_greenlet_and_runs_its_threads_at_once(tmp_path):
    # Six deliveries that each block their thread 200 ms, three threads: about 400 ms in all (two
    # rounds), not 1.2 s; meanwhile the hub keeps turning (a greenlet ticking every 10 ms runs on).
    r = _make(tmp_path)("prefetch: 20, " + HANDLER % ("thread", 3, "discard"))
    ticks = []
    ticker = gevent.spawn(lambda: [ticks.append(time.monotonic()) or gevent.sleep(0.01) for _ in range(200)])
    began = time.monotonic()
    for i in range(6):
        r.link.deliver(f"m{i}", body=b"sleep:200:ack")
    r.until(lambda: len(r.link.acks) == 6)
    took = time.monotonic() - began
    ticker.kill()
    assert 0.39 <= took < 1.2, took  # one thread after another would take 1.2 s at least
    during = [t for t in ticks if began <= t <= began + took]
    assert len(during) >= took / 0.01 / 3  # the hub was never held for long
    # each its handler's 200 ms, never less, and not the second round's wait for a thread (~400 ms)
    assert all(200 <= row["processing_ms"] < 300 for row in r.run.deliveries), [
        row["processing_ms"] for row in r.run.deliveries
    ]
    r.stop()


def test_egress_discards_the_oldest_of_a_full_class_and_acks_it_at_once(tmp_path):
    # 100-byte messages are one 2,048-byte work unit each: a class holds 3 units, so the 4th and
    # 5th arrivals push out the two oldest, acked (so the broker forgets them) and traced discarded.
    egress = "egress: {max_depth_units: 3, min_burst: 1}"
    r = _make(tmp_path)(f"prefetch: 100, processing_ms: 5, {egress}")
    tags = [r.link.deliver(f"m{i}") for i in range(5)]
    assert r.link.acks == tags[:2]  # acked in the I/O loop as the new ones were admitted
    r.until(lambda: len(r.link.acks) == 5)
    outcomes = _by_tag(r)
    assert [outcomes[t] for t in tags] == ["egress_discard"] * 2 + ["ack"] * 3
    discarded = [row for row in r.run.deliveries if row["outcome"] == "egress_discard"]
    assert all(row["start_ns"] is None and row["egress_class"] is not None for row in discarded)
    r.stop()


def test_deliveries_that_cross_a_cancel_are_processed_and_counted(tmp_path):
    r = _make(tmp_path)("prefetch: 10, processing_ms: 1")
    tag = r.link.deliver("crossing", crossed=True)
    r.until(lambda: tag in r.link.acks)
    r.stop()
    [leave] = [e for e in r.run.events if e[0] == "consumer_leave"]
    assert leave[2]["crossed_cancel"] == 1


def test_an_interrupted_consumer_leaves_what_it_holds_unsettled_for_the_broker_to_requeue(tmp_path):
    r = _make(tmp_path)("prefetch: 10, processing_ms: 200")
    tags = [r.link.deliver(f"m{i}") for i in range(3)]
    r.until(lambda: r.consumer.buffered() == 2)  # the first is in hand
    r.stop(drained=False)  # stopping (Ctrl-C, SIGTERM): no clean leave
    assert ("cancel",) not in r.link.calls and ("close",) in r.link.calls
    outcomes = _by_tag(r)
    assert [outcomes[t] for t in tags[1:]] == ["unsettled", "unsettled"]
    assert r.link.nacks == [] and tags[1] not in r.link.acks


def test_a_stream_consumer_starts_at_its_offset_and_reads_on_from_the_last_one_after_a_resubscription(tmp_path):
    # offset: first at the join; a phase widens the prefetch at 5 s, which re-subscribes: from the
    # offset after the last delivery received (12), not from first again. Each offset is traced.
    timeline = "timeline:\n  - {name: wide, start_s: 5, set: {consumers.c.prefetch: 20}}\n"
    r = _make(tmp_path, queue_type="stream")("prefetch: 10, offset: first", timeline)
    for offset in (10, 11):
        r.link.deliver(f"m{offset}", stream_offset=offset)
    r.until(lambda: len(r.link.acks) == 2)
    r.run.t = 6.0
    r.until(lambda: any(e[0] == "prefetch_change" for e in r.run.events))
    consumes = [c for c in r.link.calls if c[0] == "consume"]
    assert consumes == [
        ("consume", QUEUE, False, {"x-stream-offset": "first"}),
        ("consume", QUEUE, False, {"x-stream-offset": 12}),
    ]
    [join] = [e for e in r.run.events if e[0] == "consumer_join"]
    assert join[2]["stream_offset"] == "first"
    assert [row["stream_offset"] for row in r.run.deliveries] == [10, 11]
    r.stop()


def test_on_a_stream_a_handlers_nack_or_reject_is_an_ack_since_the_broker_refuses_them(tmp_path, caplog):
    r = _make(tmp_path, queue_type="stream")("prefetch: 20, " + HANDLER % ("inline", 1, "discard"))
    bodies = ["ack", "requeue", "discard", "reject", "raise"]
    tags = [r.link.deliver(f"m-{body}", body=body.encode(), stream_offset=i) for i, body in enumerate(bodies)]
    r.until(lambda: len(r.link.settled()) == len(bodies))
    assert sorted(r.link.acks) == sorted(tags) and r.link.nacks == [] and r.link.rejects == []
    rows = {row["message_id"]: (row["outcome"], row["settled_by"]) for row in r.run.deliveries}
    assert rows == {
        "m-ack": ("ack", "handler"),
        "m-requeue": ("ack", "handler"),
        "m-discard": ("ack", "handler"),
        "m-reject": ("ack", "handler"),
        "m-raise": ("ack", "handler_error"),
    }
    assert sum("a stream refuses nack and reject" in m for m in caplog.messages) == 1  # once per consumer
    r.stop()


def test_a_stream_consumer_whose_channel_closes_reads_again_from_the_first_delivery_it_held(tmp_path):
    # 300 ms per delivery: the channel closes while offset 7 is in hand and 8, 9 wait in the buffer.
    # A stream gives nothing back by itself: the rejoin subscribes at 7, not at 10.
    r = _make(tmp_path, queue_type="stream")("prefetch: 10, processing_ms: 300, offset: first")
    for offset in (5, 6, 7, 8, 9):
        r.link.deliver(f"m{offset}", stream_offset=offset)
    r.until(lambda: len(r.link.acks) == 2)  # 5 and 6 acked, 7 in hand
    r.link.close_channel(406, "PRECONDITION_FAILED - delivery acknowledgement timed out")
    r.until(lambda: r.subscribed(2))
    assert [c for c in r.links[-1].calls if c[0] == "consume"] == [("consume", QUEUE, False, {"x-stream-offset": 7})]
    unsettled = sorted(row["stream_offset"] for row in r.run.deliveries if row["outcome"] == "unsettled")
    assert unsettled == [7, 8, 9]
    r.stop()
