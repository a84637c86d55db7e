"""The queueing-model check (DOMAIN.md §2) from traces, against hand-computed values."""

from __future__ import annotations

import pytest

from analysis.summary.model import model_row
from analysis.transforms import mark_measured, with_delivery_latencies
from analysis.transforms.model import QUANTILES, consumer_sojourn_quantiles, model_inputs, window_components

MS = 1_000_000


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
    rows = [r.asDict() for r in _deliveries(frame).transform(model_inputs(0)).collect()]
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
    got = {r.t_s: r.asDict() for r in _deliveries(frame).transform(window_components(0)).collect()}
    assert got[0] == {"t_s": 0, "broker_network": 50.0, "sojourn": 0.0, "processing": 4.0, "ack_delay": 1.0}
    assert got[1] == {"t_s": 1, "broker_network": 60.0, "sojourn": 10.0, "processing": 4.0, "ack_delay": 1.0}


def test_sojourn_quantiles_per_consumer(frame):
    rows = _deliveries(frame).transform(consumer_sojourn_quantiles).collect()
    assert [r.consumer for r in rows] == ["A"]
    q = rows[0].sojourn_quantiles_ms
    assert len(q) == len(QUANTILES) == 20
    assert q[0] == pytest.approx(0.5) and q[9] == pytest.approx(5.0) and q[-1] == 10.0


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
    rows = {
        r.phase: model_row(r.asDict()) for r in deliveries.transform(model_inputs(0, ("consumer", "phase"))).collect()
    }
    # base: p 4, R 104, prefetch 1 -> 4/104 busy; slow: p 40, R 140 -> 40/140, saturation ceil(3.5) = 4
    assert rows["base"]["predicted"]["utilisation"] == pytest.approx(4 / 104)
    assert rows["slow"]["round_trip_ms"] == 140.0
    assert rows["slow"]["predicted"]["saturation_prefetch"] == 4
    assert rows["slow"]["predicted"]["utilisation"] == pytest.approx(40 / 140)
    assert rows["slow"]["phase"] == "slow"
    assert rows["base"]["measured"]["utilisation"] == pytest.approx(4 / 5)  # 4 ms busy over 50..55
