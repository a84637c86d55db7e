from analysis.schema import SCHEMA_VERSION, column_names, spark_schema
from analysis.transforms import (
    ACCOUNT_CLASSES,
    DISCARD_CLASSES,
    accounting_totals,
    delivery_counts,
    drops_past_delivery_limit,
    rejects_at_publish,
)
from tests.spark.conftest import classify_messages


def _publish(m, outcome="confirmed"):
    return dict(message_id=m, intended_ns=0, publish_ns=0, outcome=outcome)


def _delivery(m, outcome, redelivered=False):
    return dict(message_id=m, receive_ns=0, outcome=outcome, redelivered=redelivered)


def _run(frame):
    publishes = frame(
        "publish",
        _publish("m01"),
        _publish("m02"),
        _publish("m03"),
        _publish("m04", "nacked"),
        _publish("m05", "failed"),
        _publish("m06"),
        _publish("m07"),
        _publish("m08", "sent"),
        _publish("m09"),
        _publish("m10", "nacked"),
        _publish("m11", "unconfirmed"),
        _publish("m12"),
    )
    deliveries = frame(
        "delivery",
        _delivery("m01", "ack"),
        _delivery("m02", "nack_requeue"),
        _delivery("m02", "ack", redelivered=True),
        _delivery("m03", "nack_discard"),
        _delivery("m08", "unsettled"),
        _delivery("m09", "ack"),
        _delivery("m09", "auto_ack", redelivered=True),
        _delivery("m10", "ack"),
        _delivery("m11", "nack_requeue"),
        _delivery("m12", "reject"),
        _delivery(None, "ack"),  # a foreign message: not ours to account for
    )
    leftovers = frame(
        "leftover", dict(message_id="m06"), dict(message_id="m11"), dict(message_id="zz"), dict(message_id=None)
    )
    return publishes.transform(classify_messages(deliveries, leftovers)), deliveries


def test_every_published_id_lands_in_exactly_one_class_first_match_wins(frame):
    classified, _ = _run(frame)
    got = {r.message_id: r.account for r in classified.collect()}
    assert got == {
        "m01": "acked",
        "m02": "acked",  # requeued, then acked on redelivery
        "m03": "consumer_nack_discard",
        "m04": "publish_nacked",
        "m05": "publish_failed",
        "m06": "left_in_broker",
        "m07": "unaccounted",  # confirmed, never seen again
        "m08": "unaccounted",  # delivered, never settled, not in the census
        "m09": "acked",
        "m10": "acked",  # the broker nacked it, yet it was acked: acked wins
        "m11": "left_in_broker",  # requeued and still in the queue
        "m12": "consumer_reject",
    }


def test_totals_satisfy_the_accounting_identity(frame):
    classified, _ = _run(frame)
    totals = accounting_totals(classified).first().asDict()
    # confirmed: m01 m02 m03 m06 m07 m09 m12 = 7
    assert totals == {
        "published": 12,
        "confirmed": 7,
        "acked": 4,
        "consumer_nack_discard": 1,
        "publish_nacked": 1,
        "publish_failed": 1,
        "left_in_broker": 2,
        "connection_lost": 0,
        "unaccounted": 2,
        "publish_rejected_maxlen": 0,
        "dead_lettered_maxlen": 0,
        "dead_lettered_expired": 0,
        "dead_lettered_rejected": 0,
        "dead_lettered_delivery_limit": 0,
        "unroutable": 0,
        "publish_failed_blocked": 0,
        "egress_discard": 0,
        "lost_with_queue": 0,
        "channel_closed": 0,
        "consumer_reject": 1,
        "dropped_delivery_limit": 0,
        "not_yet_read": 0,
    }
    # published = acked + discarded_total + left_in_broker + unaccounted: 12 = 4 + 4 + 2 + 2
    assert totals["published"] == sum(totals[c] for c in ACCOUNT_CLASSES)


def test_redeliveries_and_duplicate_acks_are_counted(frame):
    _, deliveries = _run(frame)
    # redelivered rows: m02's second delivery and m09's second; m09 was acked twice
    assert delivery_counts(deliveries).first().asDict() == {"redelivered": 2, "duplicates": 1}


def test_a_retried_publish_that_failed_once_but_then_got_lost_is_unaccounted(frame):
    publishes = frame("publish", _publish("r", "failed"), _publish("r", "confirmed"))
    got = publishes.transform(classify_messages(frame("delivery"), frame("leftover"))).collect()
    assert [(r.message_id, r.account) for r in got] == [("r", "unaccounted")]


def _lost_frames(frame):
    # producer p lost its connection at t=100; producer q never did.
    publishes = frame(
        "publish",
        dict(message_id="a", producer="p", publish_ns=90, outcome="unconfirmed"),  # before the loss
        dict(message_id="b", producer="p", publish_ns=95, outcome="sent"),  # confirms off
        dict(message_id="c", producer="p", publish_ns=110, outcome="unconfirmed"),  # after the loss
        dict(message_id="d", producer="q", publish_ns=90, outcome="unconfirmed"),  # no loss at all
        dict(message_id="e", producer="p", publish_ns=80, outcome="unconfirmed"),  # found in the queue
        dict(message_id="f", producer="p", publish_ns=85, outcome="confirmed"),  # confirmed, then gone
    )
    events = frame(
        "event",
        dict(ts_ns=100, kind="connection_lost", source="p", name="p"),
        dict(ts_ns=100, kind="consumer_leave", source="q", name="q"),
    )
    leftovers = frame("leftover", dict(message_id="e"))
    return publishes.transform(classify_messages(frame("delivery"), leftovers, events))


def test_an_unconfirmed_publish_lost_with_its_connection_is_discarded_with_that_reason(frame):
    got = {r.message_id: r.account for r in _lost_frames(frame).collect()}
    assert got == {
        "a": "connection_lost",  # written at 90, connection died at 100, found nowhere
        "b": "connection_lost",  # the same with confirms off
        "c": "unaccounted",  # published after the only loss: nothing explains it
        "d": "unaccounted",  # its producer never lost a connection
        "e": "left_in_broker",  # the census found it: not lost
        "f": "unaccounted",  # the broker confirmed it: a connection loss does not explain it
    }


def test_connection_lost_counts_in_the_identity(frame):
    totals = accounting_totals(_lost_frames(frame)).first().asDict()
    # 6 published = 0 acked + 2 discarded (connection_lost) + 1 left + 3 unaccounted
    assert totals["connection_lost"] == 2 and totals["left_in_broker"] == 1 and totals["unaccounted"] == 3
    assert totals["published"] == sum(totals[c] for c in ACCOUNT_CLASSES)


def test_what_reached_the_broker_before_it_restarted_and_was_never_seen_again_is_lost_with_the_queue(frame):
    # the broker came back without its queue at t=200 (a broker_restart event); p lost its connection at 150
    publishes = frame(
        "publish",
        dict(message_id="a", producer="p", publish_ns=100, outcome="confirmed"),  # confirmed, never delivered
        dict(message_id="b", producer="p", publish_ns=110, outcome="confirmed"),  # delivered, unacked at the crash
        dict(message_id="c", producer="p", publish_ns=120, outcome="confirmed"),  # acked before the restart
        dict(message_id="d", producer="p", publish_ns=140, outcome="unconfirmed"),  # in flight as p's link died
        dict(message_id="e", producer="p", publish_ns=190, outcome="failed"),  # never reached the broker
        dict(message_id="f", producer="p", publish_ns=250, outcome="confirmed"),  # after it: nothing explains it
        dict(message_id="g", producer="p", publish_ns=260, outcome="confirmed"),  # after it, acked
    )
    deliveries = frame(
        "delivery",
        dict(message_id="b", outcome="unsettled"),
        dict(message_id="c", outcome="ack"),
        dict(message_id="g", outcome="ack"),
    )
    events = frame(
        "event",
        dict(ts_ns=150, kind="connection_lost", source="p", name="p"),
        dict(ts_ns=200, kind="broker_restart", source="runner", name="q"),
    )
    classified = publishes.transform(classify_messages(deliveries, frame("leftover"), events))
    assert {r.message_id: r.account for r in classified.collect()} == {
        "a": "lost_with_queue",
        "b": "lost_with_queue",
        "c": "acked",
        "d": "connection_lost",  # the more exact cause: it was never confirmed
        "e": "publish_failed",
        "f": "unaccounted",
        "g": "acked",
    }
    totals = accounting_totals(classified).first().asDict()
    assert totals["published"] == sum(totals[c] for c in ACCOUNT_CLASSES) == 7


def test_a_publish_unconfirmed_when_the_broker_closed_its_channel_is_discarded_only_if_found_nowhere(frame):
    # p's channel was closed by the broker (a publish to a deleted exchange) with three publishes
    # unconfirmed: one the broker had routed and a consumer acked, one it had routed and the census
    # found, one it dropped with the channel. A confirmed publish found nowhere stays unaccounted.
    publishes = frame(
        "publish",
        dict(message_id="routed-acked", producer="p", publish_ns=100, outcome="channel_closed"),
        dict(message_id="routed-left", producer="p", publish_ns=110, outcome="channel_closed"),
        dict(message_id="dropped", producer="p", publish_ns=120, outcome="channel_closed"),
        dict(message_id="confirmed", producer="p", publish_ns=90, outcome="confirmed"),
    )
    deliveries = frame("delivery", dict(message_id="routed-acked", outcome="ack"))
    leftovers = frame("leftover", dict(message_id="routed-left"))
    events = frame("event", dict(ts_ns=130, kind="channel_closed", source="p", name="p"))
    classified = publishes.transform(classify_messages(deliveries, leftovers, events))
    assert {r.message_id: r.account for r in classified.collect()} == {
        "routed-acked": "acked",
        "routed-left": "left_in_broker",
        "dropped": "channel_closed",
        "confirmed": "unaccounted",
    }
    totals = accounting_totals(classified).first().asDict()
    assert totals["channel_closed"] == 1 and totals["published"] == sum(totals[c] for c in ACCOUNT_CLASSES) == 4
    assert "channel_closed" in DISCARD_CLASSES


def test_what_was_published_before_a_deleted_queue_was_declared_again_is_lost_with_it(frame):
    # the run's queue was deleted and a consumer declared it again at t=200 (queue_recreated)
    publishes = frame(
        "publish",
        dict(message_id="in-queue", producer="p", publish_ns=100, outcome="confirmed"),  # went with the queue
        dict(message_id="while-gone", producer="p", publish_ns=150, outcome="confirmed"),  # dropped unroutable
        dict(message_id="after", producer="p", publish_ns=250, outcome="confirmed"),  # after it: unexplained
        dict(message_id="acked", producer="p", publish_ns=120, outcome="confirmed"),
    )
    deliveries = frame("delivery", dict(message_id="acked", outcome="ack"))
    events = frame("event", dict(ts_ns=200, kind="queue_recreated", source="c", name="q"))
    classified = publishes.transform(classify_messages(deliveries, frame("leftover"), events))
    assert {r.message_id: r.account for r in classified.collect()} == {
        "in-queue": "lost_with_queue",
        "while-gone": "lost_with_queue",
        "after": "unaccounted",
        "acked": "acked",
    }


def test_without_a_restart_nothing_is_lost_with_the_queue(frame):
    publishes = frame("publish", dict(message_id="a", producer="p", publish_ns=100, outcome="confirmed"))
    events = frame("event", dict(ts_ns=150, kind="connection_lost", source="p", name="p"))
    classified = publishes.transform(classify_messages(frame("delivery"), frame("leftover"), events))
    assert [(r.message_id, r.account) for r in classified.collect()] == [("a", "unaccounted")]


def test_a_message_requeued_on_a_queue_with_a_delivery_limit_and_found_nowhere_was_dropped_past_it(frame):
    # r: requeued twice, never seen again; h: held when its channel went, never seen again; a: requeued,
    # then acked; l: requeued, then left in the queue. Without the limit r and h are unaccounted.
    publishes = frame("publish", *[_publish(m) for m in ("r", "h", "a", "l")])
    deliveries = frame(
        "delivery",
        _delivery("r", "nack_requeue"),
        _delivery("r", "nack_requeue", redelivered=True),
        _delivery("h", "unsettled"),
        _delivery("a", "nack_requeue"),
        _delivery("a", "ack", redelivered=True),
        _delivery("l", "nack_requeue"),
    )
    leftovers = frame("leftover", dict(message_id="l"))

    def accounts(delivery_limit: bool) -> dict:
        classify = classify_messages(deliveries, leftovers, delivery_limit=delivery_limit)
        return {r.message_id: r.account for r in publishes.transform(classify).collect()}

    assert accounts(True) == {
        "r": "dropped_delivery_limit",
        "h": "dropped_delivery_limit",
        "a": "acked",
        "l": "left_in_broker",
    }
    assert accounts(False) == {"r": "unaccounted", "h": "unaccounted", "a": "acked", "l": "left_in_broker"}


def test_only_a_queue_with_x_delivery_limit_drops_past_it():
    assert drops_past_delivery_limit({"queue": {"type": "quorum", "arguments": {"x-delivery-limit": 3}}})
    assert not drops_past_delivery_limit({"queue": {"type": "quorum", "arguments": {}}})
    assert not drops_past_delivery_limit({"queue": "q"}) and not drops_past_delivery_limit(None)


# --- dead letters (docs/discards.md) ------------------------------------------------


def _dead_letters(spark, *rows: dict):
    """A deadletter trace frame; columns a test does not name get neutral values."""
    names = column_names("deadletter")
    base = dict(
        schema_version=SCHEMA_VERSION,
        run_id="run-1",
        worker="w:1",
        queue="q",
        death_count=1,
        received_ns=0,
        exchange="dlx",
        routing_key="q",
    )
    return spark.createDataFrame([tuple({**base, **r}[n] for n in names) for r in rows], spark_schema("deadletter"))


def _dead_letter_run(spark, frame, publish_rejects=False):
    publishes = frame(
        "publish",
        _publish("overflowed"),
        _publish("expired"),
        _publish("nack_discarded"),
        _publish("rejected"),
        _publish("over_limit"),
        _publish("acked_anyway"),
        _publish("census_then_expired"),
        _publish("refused", "nacked"),
        _publish("first_cause"),
        _publish("odd_reason"),
        _publish("lost"),
    )
    deliveries = frame(
        "delivery",
        _delivery("nack_discarded", "nack_discard"),
        _delivery("over_limit", "nack_requeue"),
        _delivery("over_limit", "nack_requeue", redelivered=True),
        _delivery("acked_anyway", "ack"),
    )
    leftovers = frame("leftover", dict(message_id="census_then_expired"))
    dead = _dead_letters(
        spark,
        dict(message_id="overflowed", reason="maxlen"),
        dict(message_id="expired", reason="expired"),
        dict(message_id="nack_discarded", reason="rejected"),
        dict(message_id="rejected", reason="rejected"),
        dict(message_id="over_limit", reason="delivery_limit"),
        dict(message_id="acked_anyway", reason="expired"),
        dict(message_id="census_then_expired", reason="expired"),
        dict(message_id="refused", reason="maxlen"),  # reject-publish-dlx dead-letters it too
        dict(message_id="first_cause", reason="expired", received_ns=20),
        dict(message_id="first_cause", reason="maxlen", received_ns=10),
        dict(message_id="odd_reason", reason="no-such-reason"),
        dict(message_id=None, reason="maxlen"),  # a foreign message
        dict(message_id="not-ours", reason="maxlen"),  # not published in this run
    )
    return publishes.transform(classify_messages(deliveries, leftovers, None, dead, publish_rejects=publish_rejects))


def test_dead_lettered_messages_are_accounted_by_the_brokers_reason(spark, frame):
    got = {r.message_id: r.account for r in _dead_letter_run(spark, frame).collect()}
    assert got == {
        "overflowed": "dead_lettered_maxlen",
        "expired": "dead_lettered_expired",
        "nack_discarded": "consumer_nack_discard",  # the consumer's nack is the cause: it wins
        "rejected": "dead_lettered_rejected",  # rejected by someone sojourn did not trace
        "over_limit": "dead_lettered_delivery_limit",  # requeued until the quorum queue gave up
        "acked_anyway": "acked",
        "census_then_expired": "dead_lettered_expired",  # the census saw it; it expired afterwards
        "refused": "publish_nacked",  # a nack wins over its dead-letter copy
        "first_cause": "dead_lettered_maxlen",  # the earliest capture names the cause
        "odd_reason": "unaccounted",  # an unknown reason explains nothing
        "lost": "unaccounted",  # confirmed, then found nowhere: a bug
    }


def test_a_nack_from_a_queue_that_rejects_publishes_when_full_is_a_rejection_at_publish(spark, frame):
    got = {r.message_id: r.account for r in _dead_letter_run(spark, frame, publish_rejects=True).collect()}
    assert got["refused"] == "publish_rejected_maxlen"
    assert got["lost"] == "unaccounted"


def test_dead_letter_classes_count_as_discards_in_the_identity(spark, frame):
    totals = accounting_totals(_dead_letter_run(spark, frame)).first().asDict()
    assert {
        c: totals[c]
        for c in (
            "dead_lettered_maxlen",
            "dead_lettered_expired",
            "dead_lettered_rejected",
            "dead_lettered_delivery_limit",
            "consumer_nack_discard",
            "publish_nacked",
            "acked",
            "unaccounted",
        )
    } == {
        "dead_lettered_maxlen": 2,
        "dead_lettered_expired": 2,
        "dead_lettered_rejected": 1,
        "dead_lettered_delivery_limit": 1,
        "consumer_nack_discard": 1,
        "publish_nacked": 1,
        "acked": 1,
        "unaccounted": 2,
    }
    discarded = sum(totals[c] for c in DISCARD_CLASSES)
    # 11 published = 1 acked + 8 discarded + 0 left + 2 unaccounted
    assert totals["published"] == 11 == totals["acked"] + discarded + totals["left_in_broker"] + totals["unaccounted"]
    assert totals["published"] == sum(totals[c] for c in ACCOUNT_CLASSES)


def test_without_dead_letter_traces_the_original_classes_are_unchanged(frame):
    classified, _ = _run(frame)
    assert {r.account for r in classified.collect()} <= {
        "acked",
        "consumer_nack_discard",
        "consumer_reject",
        "publish_nacked",
        "publish_failed",
        "left_in_broker",
        "unaccounted",
    }


def test_only_reject_publish_overflow_makes_nacks_rejections_at_publish():
    assert rejects_at_publish({"queue": {"arguments": {"x-overflow": "reject-publish"}}})
    assert rejects_at_publish({"queue": {"arguments": {"x-overflow": "reject-publish-dlx"}}})
    assert not rejects_at_publish({"queue": {"arguments": {"x-overflow": "drop-head"}}})
    assert not rejects_at_publish({"queue": {"arguments": {}}})
    assert not rejects_at_publish({"queue": "q"}) and not rejects_at_publish(None)


def test_returned_and_blocked_publishes_are_discards_with_their_own_reasons(frame):
    publishes = frame(
        "publish",
        dict(message_id="returned", publish_ns=1, outcome="returned"),  # mandatory, confirms on
        dict(message_id="returned_blind", publish_ns=1, outcome="sent"),  # mandatory, confirms off
        dict(message_id="blocked", publish_ns=1, outcome="blocked_timeout"),
        dict(message_id="blocked_then_sent", publish_ns=1, outcome="blocked_timeout"),
        dict(message_id="blocked_then_sent", publish_ns=2, outcome="confirmed"),
    )
    events = frame("event", dict(ts_ns=5, kind="publish_returned", source="p", name="returned_blind"))
    got = publishes.transform(classify_messages(frame("delivery"), frame("leftover"), events)).collect()
    assert {r.message_id: r.account for r in got} == {
        "returned": "unroutable",
        "returned_blind": "unroutable",
        "blocked": "publish_failed_blocked",
        "blocked_then_sent": "unaccounted",  # a later attempt reached the broker and then vanished
    }


def test_the_ledger_keeps_the_notable_ids_and_its_totals_count_the_rest(frame):
    """The job's small form of the facts: a row only for the ids some block looks up; its totals
    count the plain acked messages from the publish trace, the same totals as classify's."""
    from analysis.cube import cube
    from analysis.summary.blocks import ledger_totals
    from analysis.transforms import id_projections, ledger, message_facts

    publishes = frame(
        "publish",
        *[_publish(f"a{i}") for i in range(6)],  # plain: published once, acked once
        _publish("m02"),
        _publish("m03"),
        _publish("m04", "nacked"),
        _publish("m05"),
        _publish("m05"),  # published twice
        dict(message_id="m06", intended_ns=0, publish_ns=10, outcome="confirmed"),  # straddles the end 5
        _publish("m07"),
        _publish("m08"),
    )

    def _delivery(m, outcome, redelivered=False):  # with the publish-time header
        return dict(message_id=m, publish_ns=0, receive_ns=0, outcome=outcome, redelivered=redelivered)

    deliveries = frame(
        "delivery",
        *[_delivery(f"a{i}", "ack") for i in range(6)],
        _delivery("m02", "ack"),
        _delivery("m02", "ack", redelivered=True),  # acked twice
        _delivery("m03", "nack_discard"),
        _delivery("m05", "ack"),
        _delivery("m06", "ack"),
        _delivery("m07", "crashed"),  # held by a crashed consumer, then acked
        _delivery("m07", "ack", redelivered=True),
        _delivery("zz", "ack"),  # never published
        dict(message_id="m08", receive_ns=0, outcome="ack"),  # no header
    )
    leftovers = frame("leftover", dict(message_id="m99"))
    facts = publishes.transform(message_facts(deliveries, leftovers))
    rows = facts.transform(ledger(5)).collect()
    kept = {r.message_id: r.account for r in rows if r.message_id is not None}
    assert kept == {
        "m02": "acked",
        "m03": "consumer_nack_discard",
        "m04": "publish_nacked",
        "m05": "acked",
        "m06": "acked",
        "m07": "acked",
        "m08": "acked",
        "zz": None,
        "m99": None,
    }
    assert all(r.message_id is not None for r in rows)
    ids = cube(publishes, id_projections()).counts("ids")
    totals, unaccounted = ledger_totals([r.asDict() for r in rows], ids, redelivered=2, max_ids=100)
    by_id = classify_messages(deliveries, leftovers)(publishes)
    expected = accounting_totals(by_id).first().asDict()
    assert expected["published"] == 14 - 1  # m05's two publishes are one message
    assert (expected["acked"], expected["consumer_nack_discard"], expected["publish_nacked"]) == (11, 1, 1)
    assert {k: v for k, v in totals.items() if k not in ("duplicates", "redelivered")} == expected
    assert (totals["duplicates"], totals["redelivered"], unaccounted) == (1, 2, [])  # m02
