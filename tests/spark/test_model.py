"""The queueing-model check (docs/queueing.md) from traces, against hand-computed values: its inputs, the
time from an ack to the delivery it drew, the regime that says where the model applies, and
processing as drawn against as achieved."""

from __future__ import annotations

import pytest

from analysis.cube import cube
from analysis.summary.deliveries import delivery_rollup
from analysis.summary.model import ack_to_delivery_rows, model_block, model_row
from analysis.transforms import mark_measured, with_confirm_latency, with_delivery_latencies
from analysis.transforms.codes import decoded, encoded
from analysis.transforms.delivery_cube import publish_cells, publish_projections
from analysis.transforms.model import ack_to_delivery, ack_to_delivery_projections
from analysis.transforms.stats import QUANTILES

MS = 1_000_000


def _rollup(deliveries):
    """The deliveries' cube of the job (t0 = 0, no timeline), collected."""
    return delivery_rollup(deliveries, 0, [], (0, 10_000 * MS))


def _inputs(deliveries):
    """The model's input rows per consumer, and per consumer and phase."""
    return _rollup(deliveries).model_inputs()


def _deliveries(frame):
    # Consumer A, prefetch 51: 50 ms then 60 ms broker -> consumer, 4 ms processing each.
    return (
        frame(
            "delivery",
            dict(
                consumer="A",
                message_id="a1",
                prefetch=51,
                publish_ns=0,
                receive_ns=50 * MS,
                read_ns=50 * MS,
                start_ns=50 * MS,
                end_ns=54 * MS,
                settle_ns=55 * MS,
                outcome="ack",
            ),
            dict(
                consumer="A",
                message_id="a2",
                prefetch=51,
                publish_ns=1000 * MS,
                receive_ns=1060 * MS,
                read_ns=1065 * MS,  # 5 ms in the socket, of its 10 ms sojourn
                start_ns=1070 * MS,
                end_ns=1074 * MS,
                settle_ns=1075 * MS,
                outcome="ack",
            ),
        )
        .transform(with_delivery_latencies)
        .transform(mark_measured(0, "receive_ns"))
    )


def test_model_inputs_and_predictions_by_hand(frame):
    rows, _ = _inputs(_deliveries(frame))
    assert len(rows) == 1
    row = model_row({**rows[0], "group": "c", "utilisation": 8 / 1025})
    # p = 4 ms; min transit 50 ms -> R = 4 + 2 x 50 = 104 ms
    assert row["processing_ms"] == 4.0 and row["transit_min_ms"] == 50.0
    assert row["round_trip_ms"] == 104.0
    pred = row["predicted"]
    assert pred["saturation_prefetch"] == 26
    assert pred["utilisation"] == 1.0 and pred["throughput_per_s"] == 250.0
    assert pred["buffer_wait_ms"] == pytest.approx((51 - 26) * 4)  # 100 ms
    # per-second minima 50 (s 0) and 60 (s 1): p95 = 50 + 0.95 x 10 = 59.5 -> R_p95 = 4 + 119 = 123
    assert row["round_trip_p95_ms"] == pytest.approx(123.0)
    assert row["advice"]["prefetch"] == 31  # ceil(123 / 4)
    assert row["advice"]["codel_interval_ms"] == 4.0  # p99 processing
    assert row["advice"]["codel_target_ms"] == 20.0  # 5 x p
    # measured: 2 acks over 1025 ms of wall time; mean sojourn (0 + 10) / 2
    assert row["measured"]["throughput_per_s"] == pytest.approx(2 / 1.025)
    assert row["measured"]["buffer_wait_ms"] == 5.0
    assert row["prefetch"] == 51


def test_window_components_are_means_by_processing_end(frame):
    no_publishes = frame("publish").transform(with_confirm_latency).transform(mark_measured(0))
    windows = _rollup(_deliveries(frame)).windows(
        cube(no_publishes, publish_projections(0, [], (0, 10_000 * MS)), publish_cells(0))
    )
    got = {r["t_s"]: r["components_ms"] for r in windows}
    assert got[0] == {
        "broker_network": 50.0,
        "sojourn": 0.0,
        "socket_wait": 0.0,
        "processing": 4.0,
        "ack_delay": 1.0,
    }
    assert got[1] == {
        "broker_network": 60.0,
        "sojourn": 10.0,
        "socket_wait": 5.0,
        "processing": 4.0,
        "ack_delay": 1.0,
    }


def test_sojourn_quantiles_per_consumer(frame):
    rows = _rollup(_deliveries(frame)).consumers()
    assert [r["consumer"] for r in rows] == ["A"]
    q = rows[0]["sojourn_ms"]["quantiles"]
    assert len(q) == len(QUANTILES) == 20
    # between the sojourns 0 and 10 ms, interpolated: 0.5 at q 0.05, 5 at q 0.5
    assert q[0] == pytest.approx(0.5) and q[9] == pytest.approx(5.0) and q[-1] == 10.0


def test_sojourn_quantiles_are_null_for_a_consumer_without_measured_deliveries(frame):
    deliveries = (
        _deliveries(frame)
        .transform(lambda d: d.drop("measured"))
        .transform(mark_measured(10_000 * MS, "receive_ns"))  # both deliveries in the warm-up
    )
    rows = _rollup(deliveries).consumers()
    got = [(r["consumer"], r["delivered"], r["sojourn_ms"]["count"], r["sojourn_ms"]["quantiles"]) for r in rows]
    assert got == [("A", 2, 0, None)]


def test_model_inputs_per_consumer_and_phase(frame):
    deliveries = (
        frame(
            "delivery",
            dict(
                consumer="A",
                phase="base",
                message_id="a1",
                prefetch=1,
                publish_ns=0,
                receive_ns=50 * MS,
                read_ns=50 * MS,
                start_ns=50 * MS,
                end_ns=54 * MS,
                settle_ns=55 * MS,
            ),
            dict(
                consumer="A",
                phase="slow",
                message_id="a2",
                prefetch=1,
                publish_ns=1000 * MS,
                receive_ns=1050 * MS,
                start_ns=1050 * MS,
                end_ns=1090 * MS,
                settle_ns=1091 * MS,
            ),
        )
        .transform(with_delivery_latencies)
        .transform(mark_measured(0, "receive_ns"))
    )
    rows = {r["phase"]: model_row(r) for r in _inputs(deliveries)[1]}
    # base: p 4, R 104, prefetch 1 -> 4/104 busy; slow: p 40, R 140 -> 40/140, saturation ceil(3.5) = 4
    assert rows["base"]["predicted"]["utilisation"] == pytest.approx(4 / 104)
    assert rows["slow"]["round_trip_ms"] == 140.0
    assert rows["slow"]["predicted"]["saturation_prefetch"] == 4
    assert rows["slow"]["predicted"]["utilisation"] == pytest.approx(40 / 140)
    assert rows["slow"]["phase"] == "slow"
    assert rows["base"]["measured"]["utilisation"] == pytest.approx(4 / 5)  # 4 ms busy over 50..55


def test_the_rows_per_consumer_and_per_consumer_and_phase(frame):
    def row(consumer, phase, message_id, prefetch, published, received, started, ended, buffer_len):
        times = dict(publish_ns=published, receive_ns=received, start_ns=started, end_ns=ended, settle_ns=ended + MS)
        return dict(
            consumer=consumer, phase=phase, message_id=message_id, prefetch=prefetch, buffer_len=buffer_len, **times
        )

    deliveries = _prepared(
        frame,
        row("A", "base", "a1", 1, 0, 50 * MS, 50 * MS, 54 * MS, 0),
        row("A", "slow", "a2", 2, 1000 * MS, 1050 * MS, 1050 * MS, 1090 * MS, 1),
        row("B", "slow", "b1", 1, 1000 * MS, 1020 * MS, 1030 * MS, 1031 * MS, 3),
    )
    by_consumer, by_phase = _inputs(deliveries)
    assert [(r["consumer"], r["phase"]) for r in by_consumer + by_phase] == [
        ("A", None),
        ("B", None),
        ("A", "base"),
        ("A", "slow"),
        ("B", "slow"),
    ]
    # A over the whole run: prefetch 1 and 2, mean processing (4 + 40) / 2 ms, 1 of its 2 buffers empty
    whole_a = by_consumer[0]
    assert (whole_a["prefetch_min"], whole_a["prefetch_max"], whole_a["processing_mean_ms"]) == (1, 2, 22.0)
    assert whole_a["buffer_empty_share"] == 0.5 and whole_a["measured_deliveries"] == 2
    # A in its slow phase alone: prefetch 2, 40 ms, its buffer never empty
    slow_a = by_phase[1]
    assert (slow_a["prefetch_min"], slow_a["prefetch_max"], slow_a["processing_mean_ms"]) == (2, 2, 40.0)
    assert slow_a["buffer_empty_share"] == 0.0 and slow_a["transit_min_ms"] == 50.0


def _prepared(frame, *rows):
    return frame("delivery", *rows).transform(with_delivery_latencies).transform(mark_measured(0, "receive_ns"))


def _drawn(deliveries):
    """The job's ack-to-delivery rows of these deliveries (their pairs' cube, rolled up)."""
    return ack_to_delivery_rows(cube(deliveries.transform(ack_to_delivery), ack_to_delivery_projections()))


def _block(deliveries, samples=(), segments=()):
    """The job's model block from these deliveries (utilisation as the consumers block has it)."""
    rows, phase_rows = _inputs(deliveries)
    consumers = [{"consumer": r["consumer"], "utilisation": r["utilisation"]} for r in rows]
    drawn = _drawn(deliveries)
    return model_block(rows, phase_rows, consumers, drawn, list(samples), list(segments))


@pytest.mark.parametrize("coded", [False, True], ids=["consumer-names", "consumer-codes"])
def test_ack_to_delivery_pairs_each_delivery_with_the_ack_that_freed_its_slot(frame, coded):
    # Consumer A, prefetch 2 (times in ms). Tag k is sent once tag k-2's ack has arrived:
    #   tag 3, published at 1 (waiting when tag 1 was acked at 5), received at 7: 7 - 5 = 2 ms
    #   tag 4, published at 20, after tag 2's ack at 9 (the queue was empty): drew nothing
    #   tag 5, a redelivery: its publish time says nothing of when it was requeued
    # A joined again (a new channel, tags from 1): its tag 3, published at 1 (before both channels'
    # acks of tag 1) and received at 107, pairs with the new tag 1's ack at 104 (3 ms), not the
    # old one's at 5 (102 ms).
    # B acked automatically: no window, nothing drawn.
    def a(tag, phase, publish, receive, settle, redelivered=False):
        return dict(
            consumer="A",
            delivery_tag=tag,
            phase=phase,
            prefetch=2,
            redelivered=redelivered,
            publish_ns=publish * MS,
            receive_ns=receive * MS,
            start_ns=receive * MS,
            end_ns=settle * MS,
            settle_ns=settle * MS,
        )

    deliveries = _prepared(
        frame,
        a(1, "base", 0, 0, 5),
        a(2, "base", 0, 0, 9),
        a(3, "base", 1, 7, 12),
        a(4, "base", 20, 21, 25),
        a(5, "base", 0, 30, 31, redelivered=True),
        a(1, "slow", 50, 100, 104),
        a(2, "slow", 50, 100, 108),
        a(3, "slow", 1, 107, 112),
        dict(consumer="B", delivery_tag=3, prefetch=1, publish_ns=0, receive_ns=9 * MS, outcome="auto_ack"),
        dict(consumer="B", delivery_tag=2, prefetch=1, publish_ns=0, receive_ns=1 * MS, outcome="auto_ack"),
    )
    if coded:  # as the job's cache holds the consumer: its code, paired with the tag as one long
        names = {"consumer": ["A", "B"]}
        pairs = deliveries.transform(encoded(names)).transform(ack_to_delivery).transform(decoded(names))
    else:
        pairs = deliveries.transform(ack_to_delivery)
    rows = ack_to_delivery_rows(cube(pairs, ack_to_delivery_projections()))
    got = {(r["consumer"], r["phase"]): r for r in rows}
    assert set(got) == {("A", None), ("A", "base"), ("A", "slow")}
    whole = got[("A", None)]
    assert whole["ack_to_delivery_count"] == 2
    assert whole["ack_to_delivery_min_ms"] == 2.0
    assert whole["ack_to_delivery_p50_ms"] == pytest.approx(2.5)
    assert whole["ack_to_delivery_p95_ms"] == pytest.approx(2 + 0.95 * 1)
    assert got[("A", "base")]["ack_to_delivery_p50_ms"] == 2.0
    assert got[("A", "slow")]["ack_to_delivery_p50_ms"] == 3.0


def test_a_consumer_at_40_percent_utilisation_is_unsaturated_and_gets_no_prediction(frame):
    # Two 4 ms messages in 20 ms (first receive 0 to last settle 20): busy 8 / 20 = 40 %; each
    # arrived at an empty buffer, and the queue's one sample had nothing ready
    deliveries = _prepared(
        frame,
        dict(consumer="A", delivery_tag=1, publish_ns=0, receive_ns=0, start_ns=0, end_ns=4 * MS, settle_ns=4 * MS),
        dict(
            consumer="A",
            delivery_tag=2,
            publish_ns=15 * MS,
            receive_ns=16 * MS,
            start_ns=16 * MS,
            end_ns=20 * MS,
            settle_ns=20 * MS,
        ),
    )
    (row,) = _block(deliveries, samples=[{"t_s": 0.01, "ready": 0}])["consumers"]
    assert row["measured"]["utilisation"] == pytest.approx(0.4)
    assert row["regime"] == "unsaturated"
    assert row["check"]["buffer_empty_share"] == 1.0 and row["check"]["backlog_share"] == 0.0
    assert row["check"]["predicted"] is None
    assert row["check"]["not_applicable"] == "not applicable: unsaturated (offered load below capacity)"


def _always_fed(prefetch, n, p_ms, wire_ms):
    """A consumer with a backlog (everything published at 0): the first `prefetch` deliveries arrive
    at 0, each later one `wire_ms` after the ack of the one `prefetch` tags before it; it
    processes in order, p_ms each, and acks at once."""
    rows, settle = [], {}
    free = 0.0  # when the consumer is next free
    for tag in range(1, n + 1):
        receive = 0.0 if tag <= prefetch else settle[tag - prefetch] + wire_ms
        start = max(receive, free)
        free = settle[tag] = start + p_ms
        waiting = sum(1 for t in range(1, tag) if settle[t] - p_ms > receive)  # received, not yet started
        rows.append(
            dict(
                consumer="A",
                delivery_tag=tag,
                prefetch=prefetch,
                buffer_len=waiting,
                publish_ns=0,
                receive_ns=round(receive * MS),
                start_ns=round(start * MS),
                end_ns=round(settle[tag] * MS),
                settle_ns=round(settle[tag] * MS),
                processing_ms=p_ms,
            )
        )
    return rows


def test_a_consumer_always_fed_with_a_backlog_is_saturated_and_predicted(frame):
    # prefetch 3, p 10 ms, 2 ms from an ack to the delivery it draws: R = 12, R/p = 1.2 <= 3, so the
    # consumer never idles; a message waits (3 - 1.2) x 10 = 18 ms (tag 4: received 12, started 30)
    deliveries = _prepared(frame, *_always_fed(prefetch=3, n=12, p_ms=10.0, wire_ms=2.0))
    samples = [{"t_s": t / 100, "ready": 40} for t in range(12)]
    (row,) = _block(deliveries, samples)["consumers"]
    assert row["measured"]["utilisation"] == pytest.approx(1.0)
    assert row["regime"] == "saturated"
    check = row["check"]
    assert check["ack_to_delivery"]["count"] == 9 and check["ack_to_delivery"]["p50_ms"] == pytest.approx(2.0)
    assert check["round_trip_ms"] == pytest.approx(12.0) and check["round_trip_source"] == "ack_to_delivery"
    assert check["saturation_prefetch"] == 2
    assert check["predicted"]["utilisation"] == 1.0
    assert check["predicted"]["throughput_per_s"] == pytest.approx(100.0)
    assert check["predicted"]["buffer_wait_ms"] == pytest.approx(18.0)
    assert row["prefetch_advice"]["prefetch"] == 2  # ceil(12 / 10)
    # a standing backlog: the fastest publish -> receive is 0 ms here only because every message was
    # published at 0 and the first three went out at once; the legacy R is 10 + 2 x 0
    assert row["round_trip_ms"] == pytest.approx(10.0)


def test_a_consumer_its_prefetch_holds_back_is_starved_and_predicted(frame):
    # prefetch 1, p 8 ms, 2 ms of wire: busy 8 of every 10 ms (80 %) while the queue backs up;
    # the model: n p / R = 8 / 10 = 80 %, 100 msg/s
    deliveries = _prepared(frame, *_always_fed(prefetch=1, n=11, p_ms=8.0, wire_ms=2.0))
    (row,) = _block(deliveries, [{"t_s": 0.05, "ready": 12}])["consumers"]
    assert row["measured"]["utilisation"] == pytest.approx(88 / 108)  # 11 x 8 ms over 0..108 ms
    assert row["regime"] == "starved"
    assert row["check"]["round_trip_ms"] == pytest.approx(10.0)
    assert row["check"]["predicted"]["utilisation"] == pytest.approx(0.8)
    assert row["check"]["predicted"]["throughput_per_s"] == pytest.approx(100.0)


def test_processing_drawn_10_ms_achieved_11_ms_is_a_10_percent_overshoot(frame):
    # Drawn 10 ms each, took 11 ms; a crashed delivery that never started counts in neither mean
    def d(tag, start_ms, phase="base"):
        return dict(
            consumer="A",
            delivery_tag=tag,
            phase=phase,
            publish_ns=0,
            receive_ns=0,
            start_ns=start_ms * MS,
            end_ns=(start_ms + 11) * MS,
            settle_ns=(start_ms + 11) * MS,
            processing_ms=10.0,
        )

    deliveries = _prepared(
        frame,
        d(1, 0),
        d(2, 11),
        d(3, 22, "slow"),
        d(4, 33, "slow"),
        dict(consumer="A", delivery_tag=5, phase="slow", publish_ns=0, receive_ns=0, outcome="crashed"),
    )
    block = _block(deliveries)
    (row,) = block["consumers"]
    assert row["processing"]["drawn_ms"] == 10.0 and row["processing"]["achieved_ms"] == 11.0
    assert row["processing"]["overshoot"] == pytest.approx(0.10)
    assert row["processing"]["count"] == 4
    assert row["processing"]["stretched"] is False  # 4 deliveries: too few to flag (20 needed)
    assert row["processing_ms"] == 11.0  # the model's p is the achieved time
    assert {r["phase"]: r["processing"]["overshoot"] for r in block["phases"]} == pytest.approx(
        {"base": 0.10, "slow": 0.10}
    )
