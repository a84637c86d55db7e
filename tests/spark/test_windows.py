import pytest

from analysis.cube import cube
from analysis.summary.blocks import window_row
from analysis.summary.deliveries import delivery_rollup
from analysis.transforms import mark_measured, with_confirm_latency, with_delivery_latencies
from analysis.transforms.delivery_cube import publish_cells, publish_projections

T0 = 1_000_000_000_000
MS = 1_000_000
S = 1_000_000_000


def _windows(publishes, deliveries):
    """The summary's `windows` of these rows, from the two cubes as the job has them."""
    window = (T0, T0 + 10 * S)
    published = cube(
        publishes.transform(with_confirm_latency).transform(mark_measured(T0)),
        publish_projections(T0, [], window),
        publish_cells(T0),
    )
    measured = deliveries.transform(with_delivery_latencies).transform(mark_measured(T0, "receive_ns"))
    return [window_row(r) for r in delivery_rollup(measured, T0, [], window).windows(published)]


def _at(seconds: float) -> int:
    return T0 + round(seconds * 1000) * MS


def test_one_window_per_second_with_counts_and_percentiles_and_gaps_filled(frame):
    publishes = frame(
        "publish",
        *[dict(message_id=m, intended_ns=_at(t), publish_ns=_at(t)) for m, t in (("a", 0.2), ("b", 0.7), ("c", 2.1))],
    )
    deliveries = frame(
        "delivery",
        dict(
            message_id="a",
            publish_ns=_at(0.2),
            receive_ns=_at(0.5),
            start_ns=_at(0.9),
            end_ns=_at(1.1),
            settle_ns=_at(1.2),
            outcome="ack",
        ),
        dict(
            message_id="b",
            publish_ns=_at(0.7),
            receive_ns=_at(2.5),
            start_ns=_at(2.6),
            end_ns=_at(2.8),
            settle_ns=_at(2.9),
            outcome="ack",
        ),
        dict(
            message_id="c",
            publish_ns=_at(2.1),
            receive_ns=_at(4.0),
            start_ns=_at(4.05),
            end_ns=_at(4.1),
            settle_ns=None,
            outcome="unsettled",
        ),
    )

    rows = _windows(publishes, deliveries)
    got = [
        (r["t_s"], r["published"], r["delivered"], r["acked"], r["sojourn_ms"]["p50"], r["latency_ms"]["p99"])
        for r in rows
    ]
    assert got == [
        # t  pub del ack  sojourn of starts in it   end-to-end of ends in it
        (0, 2, 1, 0, 400.0, None),  # a: start 0.9 - receive 0.5
        (1, 0, 0, 1, None, 900.0),  # a: end 1.1 - publish 0.2; a settled at 1.2
        (2, 1, 1, 1, 100.0, 2100.0),  # b: 2.6 - 2.5; b: end 2.8 - publish 0.7
        (3, 0, 0, 0, None, None),  # no activity: filled with zeros
        (4, 0, 1, 0, 50.0, 2000.0),  # c: 4.05 - 4.0; end 4.1 - publish 2.1; never acked
    ]
    # the means of the end-to-end components of the deliveries that ended in the second
    components = [r["components_ms"] for r in rows]
    nothing_ended = dict.fromkeys(("broker_network", "sojourn", "socket_wait", "processing", "ack_delay"))
    assert components[0] == components[3] == nothing_ended
    # a: receive 0.5 - publish 0.2, start 0.9 - receive 0.5, no read time, end 1.1 - start 0.9, settle 1.2 - end 1.1
    assert components[1] == pytest.approx(
        {"broker_network": 300.0, "sojourn": 400.0, "socket_wait": None, "processing": 200.0, "ack_delay": 100.0}
    )
    assert components[4]["ack_delay"] is None  # c was never settled


def test_no_activity_gives_no_windows(frame):
    assert _windows(frame("publish"), frame("delivery")) == []
