"""Per priority class counts and latencies (summary.json `priorities`)."""

from __future__ import annotations

import pytest

from analysis.summary.priority import carries_priorities, priority_rows

DISCARDS = ("publish_nacked", "consumer_nack_discard")


def _frames(spark, frame, priorities):
    publishes = frame(
        "publish", *[dict(message_id=m, intended_ns=0, publish_ns=0, priority=p) for m, p in priorities.items()]
    )
    accounts = {
        "a1": "acked",
        "a2": "acked",
        "a3": "publish_nacked",
        "b1": "acked",
        "b2": "left_in_broker",
        "n1": "acked",
        "n2": "unaccounted",
    }
    classified = spark.createDataFrame(  # accounting.classify: the publish's priority with each id's class
        [(m, account, priorities[m]) for m, account in accounts.items()],
        "message_id string, account string, priority int",
    )
    deliveries = spark.createDataFrame(
        [
            ("a1", "ack", True, 10.0, 20.0),
            ("a2", "ack", True, 30.0, 60.0),
            ("b1", "ack", True, 100.0, 200.0),
            ("b1", "nack_requeue", True, 999.0, 999.0),
            ("n1", "ack", False, 5.0, 5.0),
        ],  # n1: in the warm-up, not measured
        "message_id string, outcome string, measured boolean, sojourn_ms double, end_to_end_ms double",
    )
    return publishes, deliveries, classified


def _rows(publishes, deliveries, classified):
    """The block as the job makes it: its rows where some publish carried a priority, else none."""
    return priority_rows(deliveries, classified, DISCARDS) if carries_priorities(publishes) else []


def test_each_priority_has_its_counts_and_latencies(spark, frame):
    rows = _rows(*_frames(spark, frame, {"a1": 5, "a2": 5, "a3": 5, "b1": 1, "b2": 1, "n1": None, "n2": None}))
    assert [r["priority"] for r in rows] == [None, 1, 5]
    none, low, high = rows
    assert (high["published"], high["acked"], high["discarded"], high["left_in_broker"]) == (3, 2, 1, 0)
    assert (low["published"], low["acked"], low["discarded"], low["left_in_broker"]) == (2, 1, 0, 1)
    assert (none["published"], none["acked"], none["discarded"]) == (2, 1, 0)
    # acked deliveries only: priority 5 waited 10 and 30 ms (mean 20, p50 20), end to end 20 and 60
    assert high["sojourn_ms"]["count"] == 2 and high["sojourn_ms"]["p50"] == pytest.approx(20.0)
    assert high["end_to_end_ms"]["max"] == pytest.approx(60.0)
    assert low["sojourn_ms"]["count"] == 1 and low["sojourn_ms"]["max"] == pytest.approx(100.0)
    assert none["sojourn_ms"]["count"] == 0  # its one ack was in the warm-up


def test_no_priority_anywhere_gives_no_block(spark, frame):
    assert _rows(*_frames(spark, frame, dict.fromkeys(("a1", "a2", "a3", "b1", "b2", "n1", "n2")))) == []
