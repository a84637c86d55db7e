"""Egress classes in the analysis: the accounting class and the summary block, on tiny hand-built frames."""

from __future__ import annotations

from pytest import approx

from analysis.summary.egress import egress_block
from analysis.transforms import accounting_totals
from tests.spark.conftest import classify_messages

MS = 1_000_000
SCENARIO = {
    "consumers": [
        {
            "name": "sub",
            "egress": {"max_depth_units": 4, "min_burst": 1, "classes": {"high": [5, 255], "low": [1, 4], "bottom": 0}},
        },
        {"name": "plain", "egress": None},
    ]
}


def _row(
    m,
    cls,
    outcome,
    length,
    units,
    start_ms=None,
    indication=None,
    priority=None,
    receive_ms=0,
    consumer="sub/w:1/0",
    group="sub",
):
    return dict(
        message_id=m,
        consumer=consumer,
        consumer_group=group,
        outcome=outcome,
        receive_ns=receive_ms * MS,
        start_ns=None if start_ms is None else start_ms * MS,
        settle_ns=receive_ms * MS,
        priority=priority,
        egress_class=cls,
        egress_length=length,
        egress_units=units,
        discard_indication=indication,
    )


def _deliveries(frame):
    return frame(
        "delivery",
        # high: two delivered, waited 1 ms and 3 ms; the second carried the indication
        _row("h1", "high", "auto_ack", 1, 2, start_ms=1, indication=False, priority=5),
        _row("h2", "high", "auto_ack", 2, 4, start_ms=3, indication=True, priority=9),
        # low: one discarded, one delivered (waited 5 ms), one left in the buffer when the channel closed
        _row("l1", "low", "egress_discard", 1, 1, priority=1),
        _row("l2", "low", "auto_ack", 1, 1, start_ms=15, indication=False, priority=2, receive_ms=10),
        _row("l3", "low", "unsettled", 2, 2, priority=2, receive_ms=11),
        # a second consumer of the group: its own buffer, a deeper low class
        _row("l4", "low", "egress_discard", 3, 3, priority=1, consumer="sub/w:1/1"),
        # a group without egress: no class, not in the block
        _row("p1", None, "ack", None, None, start_ms=1, group="plain", consumer="plain/w:1/0"),
    )


def test_the_block_counts_each_class_of_each_egress_group(frame):
    block = egress_block(_deliveries(frame), SCENARIO)
    assert list(block) == ["sub"]
    sub = block["sub"]
    assert (sub["max_depth_units"], sub["min_burst"]) == (4, 1)
    high, low, bottom = sub["classes"]  # in the scenario's order, highest first

    assert high["class"] == "high" and high["consumers"] == 1
    assert (high["delivered"], high["discards"], high["in_buffer_at_end"]) == (2, 0, 0)
    assert high["discard_share"] == 0.0 and high["discard_indications"] == 1
    assert high["high_water"] == {"messages": 2, "units": 4}
    assert high["mean_length"] == {"messages": 1.5, "units": 3.0}  # (1 + 2) / 2, (2 + 4) / 2
    assert high["priorities"] == [5, 9]
    assert high["sojourn_ms"]["count"] == 2
    assert high["sojourn_ms"]["mean"] == approx(2.0) and high["sojourn_ms"]["max"] == approx(3.0)

    assert low["consumers"] == 2
    assert (low["delivered"], low["discards"], low["in_buffer_at_end"]) == (1, 2, 1)
    assert low["discard_share"] == approx(2 / 3) and low["discard_indications"] == 0
    assert low["high_water"] == {"messages": 3, "units": 3}  # the second consumer's buffer
    assert low["mean_length"]["messages"] == approx((1 + 1 + 2 + 3) / 4)
    assert low["mean_length"]["units"] == approx((1 + 1 + 2 + 3) / 4)
    assert low["priorities"] == [1, 2]
    assert low["sojourn_ms"]["count"] == 1 and low["sojourn_ms"]["p50"] == approx(5.0)

    # listed in the scenario, never used: zeros, no depth
    assert bottom["class"] == "bottom"
    assert (bottom["delivered"], bottom["discards"], bottom["discard_share"]) == (0, 0, None)
    assert bottom["high_water"] == {"messages": None, "units": None}


def test_no_block_without_egress_rows_or_groups(frame):
    plain = frame("delivery", _row("p1", None, "ack", None, None, start_ms=1, group="plain"))
    assert egress_block(plain, {"consumers": [{"name": "plain"}]}) == {}


def test_warmup_rows_count_but_do_not_enter_the_sojourn(frame):
    from pyspark.sql import functions as F

    deliveries = _deliveries(frame).withColumn("measured", F.col("message_id") != "h2")
    high = egress_block(deliveries, SCENARIO)["sub"]["classes"][0]
    assert high["delivered"] == 2 and high["sojourn_ms"]["count"] == 1 and high["sojourn_ms"]["max"] == approx(1.0)


def test_an_egress_discarded_message_is_accounted_as_egress_discard_unless_acked(frame):
    publishes = frame(
        "publish", *[dict(message_id=m, intended_ns=0, publish_ns=0, outcome="confirmed") for m in ("a", "b", "c", "d")]
    )
    deliveries = frame(
        "delivery",
        dict(message_id="a", receive_ns=0, outcome="egress_discard"),  # manual ack: acked as discarded
        dict(message_id="b", receive_ns=0, outcome="egress_discard", settle_ns=0),  # auto-ack the same
        dict(message_id="c", receive_ns=0, outcome="ack"),
        # d: its egress ack was lost with the channel (unsettled), the broker requeued it, then acked
        dict(message_id="d", receive_ns=0, outcome="unsettled", egress_class="low"),
        dict(message_id="d", receive_ns=1, outcome="ack", redelivered=True),
    )
    classified = publishes.transform(classify_messages(deliveries, frame("leftover")))
    assert {r.message_id: r.account for r in classified.collect()} == {
        "a": "egress_discard",
        "b": "egress_discard",
        "c": "acked",
        "d": "acked",
    }
    totals = accounting_totals(classified).first()
    assert (totals["egress_discard"], totals["acked"], totals["unaccounted"]) == (2, 2, 0)
