from analysis.summary.deliveries import delivery_rollup
from analysis.transforms import mark_measured, with_delivery_latencies

MS = 1_000_000


def _deliveries(frame):
    return frame(
        "delivery",
        dict(
            consumer="A",
            consumer_group="g1",
            message_id="a1",
            publish_ns=0,
            receive_ns=0,
            start_ns=10 * MS,
            end_ns=30 * MS,
            settle_ns=31 * MS,
            outcome="ack",
        ),
        dict(
            consumer="A",
            consumer_group="g1",
            message_id="a2",
            publish_ns=0,
            receive_ns=5 * MS,
            start_ns=30 * MS,
            end_ns=70 * MS,
            settle_ns=80 * MS,
            outcome="ack",
        ),
        dict(
            consumer="B",
            consumer_group="g2",
            message_id="b1",
            publish_ns=0,
            receive_ns=0,
            start_ns=0,
            end_ns=10 * MS,
            settle_ns=40 * MS,
            outcome="nack_requeue",
        ),
        dict(consumer="B", consumer_group="g2", message_id="b2", publish_ns=0, receive_ns=20 * MS, outcome="unsettled"),
    )


def test_consumer_rows_count_deliveries_and_acks_and_summarise_sojourn(frame):
    deliveries = _deliveries(frame).transform(with_delivery_latencies).transform(mark_measured(0, "receive_ns"))
    rows = delivery_rollup(deliveries, 0, [], (0, 100 * MS)).consumers()
    got = [
        (r["consumer"], r["group"], r["delivered"], r["acked"], r["utilisation"], r["sojourn_ms"]["mean"]) for r in rows
    ]
    # utilisation, busy over first receive to last settle: A (30 - 10) + (70 - 30) = 60 ms over 80 - 0 ms;
    # B 10 - 0 ms over 40 - 0 ms (the unsettled delivery adds no time)
    # A sojourn: 10 - 0 and 30 - 5 -> mean 17.5; B: only b1 started, 0 - 0
    assert got == [("A", "g1", 2, 2, 0.75, 17.5), ("B", "g2", 2, 0, 0.25, 0.0)]
