from pytest import approx

from analysis.transforms import with_confirm_latency, with_delivery_latencies

T0 = 1_763_733_600_000_000_000  # a realistic wall clock: too big for exact float ns
MS = 1_000_000


def test_delivery_latencies_are_the_differences_of_trace_times_in_ms(frame):
    d = frame(
        "delivery",
        dict(
            message_id="m1",
            publish_ns=T0,
            receive_ns=T0 + 5 * MS,
            start_ns=T0 + 12 * MS,
            end_ns=T0 + 16 * MS + MS // 2,
            settle_ns=T0 + 17 * MS,
            outcome="ack",
        ),
    )
    row = d.transform(with_delivery_latencies).first()
    assert row.sojourn_ms == 7.0  # start 12 - receive 5
    assert row.broker_network_ms == 5.0  # receive 5 - publish 0
    assert row.processing_ms_actual == 4.5  # end 16.5 - start 12
    assert row.ack_delay_ms == 0.5  # settle 17 - end 16.5
    assert row.end_to_end_ms == 16.5  # end 16.5 - publish 0


def test_one_nanosecond_survives_on_a_wall_clock_of_1e18_ns(frame):
    d = frame("delivery", dict(message_id="m1", receive_ns=T0 + 1, start_ns=T0 + 2))
    # As doubles both times would round to the same value; integer subtraction keeps 1 ns.
    assert d.transform(with_delivery_latencies).first().sojourn_ms == approx(1e-6)


def test_auto_ack_has_no_ack_delay(frame):
    d = frame(
        "delivery",
        dict(message_id="m1", receive_ns=T0, start_ns=T0 + MS, end_ns=T0 + 3 * MS, settle_ns=T0, outcome="auto_ack"),
    )
    row = d.transform(with_delivery_latencies).first()
    assert row.ack_delay_ms is None
    assert row.processing_ms_actual == 2.0


def test_a_delivery_that_never_started_has_no_sojourn_or_end_to_end(frame):
    d = frame("delivery", dict(message_id="m1", publish_ns=T0, receive_ns=T0 + MS, outcome="unsettled"))
    row = d.transform(with_delivery_latencies).first()
    assert (row.sojourn_ms, row.end_to_end_ms, row.processing_ms_actual) == (None, None, None)
    assert row.broker_network_ms == 1.0


def test_confirm_latency_is_confirm_minus_publish_and_null_without_a_confirm(frame):
    p = frame(
        "publish",
        dict(message_id="m1", intended_ns=T0, publish_ns=T0, confirm_ns=T0 + 2 * MS + MS // 4),
        dict(message_id="m2", intended_ns=T0, publish_ns=T0, confirm_ns=None, outcome="sent"),
    )
    got = {r.message_id: r.confirm_ms for r in p.transform(with_confirm_latency).collect()}
    assert got == {"m1": 2.25, "m2": None}
