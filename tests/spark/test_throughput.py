from pytest import approx

from analysis.transforms import measurement_window_ns, throughput

T0 = 1_000_000_000_000
MS = 1_000_000
S = 1_000_000_000


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
    row = deliveries.transform(throughput(start, end, publishes)).first()
    # window [2 s, 6 s) = 4 s
    # publishes at 2, 3 and 6 s - 1 ns are in (1 s is warm-up, 6 s is past the end): 3 / 4
    # receives at 2.5 and 3.5 s: 2 / 4; the one at 1 s is warm-up
    # acks settled at 3 s: 1 / 4 (6 s is past the end, the nack is not an ack)
    assert row.asDict() == {"publish_per_s": 0.75, "deliver_per_s": 0.5, "ack_per_s": 0.25}


def test_an_interrupted_run_measures_up_to_its_end(frame):
    start, end = measurement_window_ns(T0, warmup_s=2, duration_s=60, ended_ns=T0 + 4 * S)
    publishes = frame("publish", dict(message_id="m", intended_ns=T0 + 3 * S, publish_ns=T0 + 3 * S))
    row = frame("delivery").transform(throughput(start, end, publishes)).first()
    assert row.publish_per_s == approx(0.5)  # 1 publish over [2 s, 4 s)
    assert row.deliver_per_s == 0.0


def test_an_empty_window_has_no_rates(frame):
    start, end = measurement_window_ns(T0, warmup_s=5, duration_s=5)
    row = frame("delivery").transform(throughput(start, end, frame("publish"))).first()
    assert row.asDict() == {"publish_per_s": None, "deliver_per_s": None, "ack_per_s": None}
