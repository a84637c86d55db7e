from analysis.cube import cube
from analysis.summary.deliveries import delivery_rollup
from analysis.transforms import (
    Segment,
    assign_phase,
    mark_measured,
    timeline_segments,
    with_confirm_latency,
    with_delivery_latencies,
)
from analysis.transforms.delivery_cube import publish_projections

T0 = 1_000_000_000_000
MS = 1_000_000
S = 1_000_000_000


def test_time_outside_every_phase_is_base_segments_in_timeline_order():
    assert timeline_segments([], 60) == [Segment("base", 0.0, 60.0)]
    assert timeline_segments([{"name": "slow", "start_s": 30, "end_s": 60}], 60) == [
        Segment("base", 0.0, 30.0),
        Segment("slow", 30.0, 60.0),
    ]
    # base comes back after the phase: a second base segment
    assert timeline_segments([{"name": "slow", "start_s": 10, "end_s": 20}], 60) == [
        Segment("base", 0.0, 10.0),
        Segment("slow", 10.0, 20.0),
        Segment("base", 20.0, 60.0),
    ]


def test_overlapping_phases_the_one_listed_first_wins():
    phases = [{"name": "a", "start_s": 10, "end_s": 20}, {"name": "b", "start_s": 15, "end_s": 25}]
    assert timeline_segments(phases, 30) == [
        Segment("base", 0.0, 10.0),
        Segment("a", 10.0, 20.0),
        Segment("b", 20.0, 25.0),
        Segment("base", 25.0, 30.0),
    ]


def test_rows_get_the_phase_of_their_time_and_base_in_the_drain(frame):
    segments = timeline_segments([{"name": "slow", "start_s": 10, "end_s": 20}], 30)
    times = {
        "warm": T0 + 5 * S,
        "slow_start": T0 + 10 * S,
        "slow_last_ns": T0 + 20 * S - 1,
        "slow_end": T0 + 20 * S,
        "drain": T0 + 31 * S,
    }
    p = frame("publish", *[dict(message_id=m, intended_ns=t, publish_ns=t) for m, t in times.items()])
    got = {r.message_id: (r.phase, r.segment) for r in p.transform(assign_phase(segments, T0, "intended_ns")).collect()}
    assert got == {
        "warm": ("base", 0),
        "slow_start": ("slow", 1),
        "slow_last_ns": ("slow", 1),
        "slow_end": ("base", 2),
        "drain": ("base", None),
    }


def _two_phases(frame):
    """A run of two segments, base [0, 10 s) and slow [10, 20 s): its segments, publishes and
    deliveries (with their latencies, all measured)."""
    segments = timeline_segments([{"name": "slow", "start_s": 10, "end_s": 20}], 20)
    publishes = frame(
        "publish",
        *[
            dict(message_id=m, intended_ns=T0 + t * S, publish_ns=T0 + t * S)
            for m, t in (("a", 1), ("b", 2), ("c", 12))
        ],
    )

    def delivery(m, start_s, sojourn_ms, outcome="ack"):
        start = T0 + start_s * S
        return dict(
            message_id=m,
            publish_ns=T0,
            receive_ns=start - sojourn_ms * MS,
            start_ns=start,
            end_ns=start + MS,
            settle_ns=start + 2 * MS,
            outcome=outcome,
        )

    deliveries = frame(
        "delivery",
        delivery("a", 3, 10),
        delivery("b", 11, 30),
        delivery("c", 15, 50, outcome="nack_requeue"),
        delivery("x", 25, 70),
    )
    return segments, publishes, deliveries.transform(with_delivery_latencies).transform(mark_measured(T0, "receive_ns"))


def test_phase_rows_count_publishes_by_intent_and_deliveries_by_processing_start(frame):
    segments, publishes, deliveries = _two_phases(frame)
    window = (T0, T0 + 20 * S)
    published = cube(
        publishes.transform(with_confirm_latency).transform(mark_measured(T0)),
        publish_projections(T0, segments, window),
    )
    rows = delivery_rollup(deliveries, T0, segments, window).phases(published, segments)
    got = [
        (
            r["phase"],
            r["start_s"],
            r["end_s"],
            r["published"],
            r["acked"],
            r["publish_per_s"],
            r["ack_per_s"],
            r["sojourn_ms"]["count"],
            r["sojourn_ms"]["p50"],
            r["end_to_end_ms"]["count"],
        )
        for r in rows
    ]
    assert got == [
        # base [0, 10): publishes a, b -> 2 / 10 s; a acked -> 1 / 10 s; sojourn 10
        ("base", 0.0, 10.0, 2, 1, 0.2, 0.1, 1, 10.0, 1),
        # slow [10, 20): publish c -> 1 / 10 s; b acked, c nacked (both measured) -> 1 / 10 s;
        # sojourn 30 and 50 -> median 40. x started at 25 s, in the drain: no segment
        ("slow", 10.0, 20.0, 1, 1, 0.1, 0.1, 2, 40.0, 2),
    ]
