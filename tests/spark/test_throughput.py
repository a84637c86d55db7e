from pytest import approx

from analysis.cube import cube
from analysis.summary.deliveries import DeliveryRollup, delivery_rollup
from analysis.transforms import mark_measured, measurement_window_ns, with_confirm_latency, with_delivery_latencies
from analysis.transforms.delivery_cube import publish_cells, publish_projections

T0 = 1_000_000_000_000
MS = 1_000_000
S = 1_000_000_000


def _rates(publishes, deliveries, window) -> dict:
    """The summary's `throughput` of these rows, from the two cubes as the job has them."""
    published = cube(
        publishes.transform(with_confirm_latency).transform(mark_measured(T0)),
        publish_projections(T0, [], window),
        publish_cells(T0),
    )
    measured = deliveries.transform(with_delivery_latencies).transform(mark_measured(T0, "receive_ns"))
    overall = {
        **delivery_rollup(measured, T0, [], window).overall(window),
        **DeliveryRollup.overall_publishes(published, window),
    }
    return {k: overall[k] for k in ("publish_per_s", "deliver_per_s", "ack_per_s")}


def test_rates_count_only_the_measurement_window(frame):
    start, end = measurement_window_ns(T0, warmup_s=2, duration_s=6)
    assert (start, end) == (T0 + 2 * S, T0 + 6 * S)
    publishes = frame(
        "publish",
        *[
            dict(message_id=f"m{i}", intended_ns=t, publish_ns=t)
            for i, t in enumerate((T0 + 1 * S, T0 + 2 * S, T0 + 3 * S, T0 + 6 * S - 1, T0 + 6 * S))
        ],
    )
    deliveries = frame(
        "delivery",
        dict(message_id="m1", receive_ns=T0 + 2500 * MS, settle_ns=T0 + 3 * S, outcome="ack"),
        dict(message_id="m2", receive_ns=T0 + 3500 * MS, settle_ns=T0 + 6 * S, outcome="ack"),
        dict(message_id="m3", receive_ns=T0 + 1 * S, settle_ns=T0 + 4 * S, outcome="nack_requeue"),
    )
    row = _rates(publishes, deliveries, (start, end))
    # window [2 s, 6 s) = 4 s
    # publishes at 2, 3 and 6 s - 1 ns are in (1 s is warm-up, 6 s is past the end): 3 / 4
    # receives at 2.5 and 3.5 s: 2 / 4; the one at 1 s is warm-up
    # acks settled at 3 s: 1 / 4 (6 s is past the end, the nack is not an ack)
    assert row == {"publish_per_s": 0.75, "deliver_per_s": 0.5, "ack_per_s": 0.25}


def test_an_interrupted_run_measures_up_to_its_end(frame):
    start, end = measurement_window_ns(T0, warmup_s=2, duration_s=60, ended_ns=T0 + 4 * S)
    publishes = frame("publish", dict(message_id="m", intended_ns=T0 + 3 * S, publish_ns=T0 + 3 * S))
    row = _rates(publishes, frame("delivery"), (start, end))
    assert row["publish_per_s"] == approx(0.5)  # 1 publish over [2 s, 4 s)
    assert row["deliver_per_s"] == 0.0


def test_an_empty_window_has_no_rates(frame):
    start, end = measurement_window_ns(T0, warmup_s=5, duration_s=5)
    row = _rates(frame("publish"), frame("delivery"), (start, end))
    assert row == {"publish_per_s": None, "deliver_per_s": None, "ack_per_s": None}
