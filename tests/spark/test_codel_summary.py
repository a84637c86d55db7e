"""The codel block: nacks, time in the dropping state, sojourn before/after the first drop, handoffs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from analysis.cube import cube
from analysis.summary import codel_block
from analysis.summary.by_id import deliveries_by_id, requeue_handoffs
from analysis.transforms import mark_measured, with_delivery_latencies
from analysis.transforms.codel import codel_state_cells

MS = 1_000_000


def d(consumer, message_id, receive_ms, start_ms, outcome, dropping, settle_ms=None, redelivered=False, tag=1):
    """One delivery row; times in ms. `dropping` None means CoDel off for this consumer."""
    start = None if start_ms is None else start_ms * MS
    return dict(
        consumer=consumer,
        consumer_group=consumer.split("/")[0],
        message_id=message_id,
        receive_ns=receive_ms * MS,
        start_ns=start,
        redelivered=redelivered,
        delivery_tag=tag,
        end_ns=(start + MS) if outcome == "ack" else None,
        settle_ns=(settle_ms * MS if settle_ms is not None else (start + 2 * MS if outcome == "ack" else None)),
        outcome=outcome,
        codel_dropping=dropping,
        codel_count=None if dropping is None else 1,
        codel_first_above_ns=None if dropping is None else 0,
        codel_drop_next_ns=None if dropping is None else 0,
    )


SLOW, FAST, PLAIN, OTHER = "slow/w:1/0", "fast/w:1/0", "plain/w:1/0", "other/w:1/0"


def _deliveries(frame, warmup_end_ns=0):
    rows = [
        # slow: CoDel on. Decision times 10, 50, 60, 100, 110, 120 ms; first drop at 50 ms.
        d(SLOW, "m1", 0, 10, "ack", False, tag=1),
        d(SLOW, "m2", 0, 50, "nack_requeue", True, settle_ms=51, tag=2),
        d(SLOW, "m3", 20, 60, "ack", True, tag=3),
        d(SLOW, "m4", 30, 100, "nack_requeue", True, settle_ms=101, tag=4),
        d(SLOW, "m5", 40, 110, "nack_discard", True, settle_ms=111, tag=5),
        d(SLOW, "m6", 45, 120, "ack", False, tag=6),
        d(SLOW, "m7", 200, None, "unsettled", None, tag=7),  # never left the buffer
        # fast: CoDel on. Decision times 5, 20, 30, 55 ms; first drop at 5 ms.
        d(FAST, "m8", 0, 5, "nack_requeue", True, settle_ms=6, tag=1),
        d(FAST, "m8", 10, 20, "ack", False, redelivered=True, tag=2),  # its own requeue came back
        d(FAST, "m10", 25, 30, "nack_requeue", True, settle_ms=31, tag=3),  # never acked by anyone
        d(FAST, "m2", 55, 55, "ack", False, redelivered=True, tag=4),  # slow's requeue
        # plain: CoDel off, acks one of slow's requeues. other: CoDel off, nothing requeued.
        d(PLAIN, "m4", 105, 106, "ack", None, redelivered=True),
        d(OTHER, "m9", 0, 1, "ack", None),
    ]
    return (
        frame("delivery", *rows)
        .transform(with_delivery_latencies)
        .transform(mark_measured(warmup_end_ns, "receive_ns"))
    )


def handoffs(deliveries):
    """The requeued messages' hand-offs, as the job follows them: from the deliveries collected by id."""
    return requeue_handoffs(deliveries_by_id(deliveries))


def by_consumer(deliveries):
    """The block's consumer rows, their fields as attributes."""
    return [SimpleNamespace(**c) for c in codel_block(deliveries)["consumers"]]


def test_handoffs_name_the_acker_and_the_consumer_that_last_requeued_the_message(frame):
    got = sorted((r.message_id, r.acker, r.last_requeuer) for r in handoffs(_deliveries(frame)))
    # m10 was requeued but never acked
    assert got == [("m10", None, FAST), ("m2", FAST, SLOW), ("m4", PLAIN, SLOW), ("m8", FAST, FAST)]


def test_the_last_requeue_before_the_acked_delivery_counts(frame):
    deliveries = frame(
        "delivery",
        d(SLOW, "m1", 0, 5, "nack_requeue", True, settle_ms=6),
        d(FAST, "m1", 7, 8, "nack_requeue", True, settle_ms=9),
        d(SLOW, "m1", 10, 11, "ack", False),
    )
    [row] = handoffs(deliveries)
    assert (row.acker, row.last_requeuer) == (SLOW, FAST)


def test_a_requeue_sent_after_the_ack_was_received_has_no_requeuer(frame):
    deliveries = frame(
        "delivery", d(FAST, "m1", 0, 1, "ack", False), d(SLOW, "m1", 0, 5, "nack_requeue", True, settle_ms=6)
    )  # a duplicate, later
    [row] = handoffs(deliveries)
    assert (row.acker, row.last_requeuer) == (FAST, None)


def test_per_consumer_counts_nacks_and_their_share_of_what_left_the_buffer(frame):
    got = {
        r.consumer: (r.codel_on, r.decided, r.nacks, r.requeued, r.discarded, r.nack_share)
        for r in by_consumer(_deliveries(frame))
    }
    assert got == {
        SLOW: (True, 6, 3, 2, 1, 3 / 6),  # m7 never left the buffer: 6 decisions
        FAST: (True, 4, 2, 2, 0, 2 / 4),
        PLAIN: (False, 1, 0, 0, 0, 0.0),  # listed: it acked a message slow requeued
    }  # OTHER: CoDel off and no requeued message: absent


def test_dropping_time_sums_the_gaps_after_each_decision_taken_while_dropping(frame):
    got = {r.consumer: r.dropping_s for r in by_consumer(_deliveries(frame))}
    # slow: dropping after the decisions at 50, 60, 100, 110 ms; next decisions at 60, 100, 110, 120:
    #       10 + 40 + 10 + 10 = 70 ms
    # fast: dropping after 5 ms (next 20) and 30 ms (next 55): 15 + 25 = 40 ms
    assert got[SLOW] == pytest.approx(0.070)
    assert got[FAST] == pytest.approx(0.040)
    assert got[PLAIN] is None  # CoDel off: no dropping state to measure


def test_sojourn_is_split_at_the_consumers_first_drop(frame):
    rows = {r.consumer: r for r in by_consumer(_deliveries(frame))}
    slow = rows[SLOW]
    # before the first drop (50 ms): m1 waited 10 - 0 = 10 ms
    assert (slow.sojourn_before_ms["count"], slow.sojourn_before_ms["max"]) == (1, 10.0)
    # from it on: m2 50 - 0, m3 60 - 20, m4 100 - 30, m5 110 - 40, m6 120 - 45
    #   = [50, 40, 70, 70, 75]: mean 61, sorted [40, 50, 70, 70, 75] -> p50 70
    after = slow.sojourn_after_ms
    assert (after["count"], after["mean"], after["p50"], after["max"]) == (5, 61.0, 70.0, 75.0)
    # a consumer that never dropped has everything "before"
    assert (rows[PLAIN].sojourn_before_ms["count"], rows[PLAIN].sojourn_after_ms["count"]) == (1, 0)


def test_sojourn_stats_leave_out_the_warm_up(frame):
    rows = {r.consumer: r for r in by_consumer(_deliveries(frame, warmup_end_ns=15 * MS))}
    # received before 15 ms: m1, m2 (slow); so before = none, after = m3 m4 m5 m6
    assert rows[SLOW].sojourn_before_ms["count"] == 0
    assert rows[SLOW].sojourn_after_ms["count"] == 4
    assert rows[SLOW].nacks == 3  # counts still include the warm-up


def test_handoffs_are_counted_for_the_consumer_that_acked(frame):
    got = {r.consumer: r.acked_requeued_from_others for r in by_consumer(_deliveries(frame))}
    assert got == {SLOW: 0, FAST: 1, PLAIN: 1}  # fast's ack of its own m8 is not a handoff


def test_a_delivery_without_a_consumer_puts_no_consumer_on_codel(frame):
    """A delivery row without a consumer (its CoDel state grouped under null) is no one's: not even
    a consumer whose name reads "None"."""
    named_none = "None"
    rows = [dict(d(SLOW, "m1", 0, 5, "nack_discard", True, settle_ms=6), consumer=None, consumer_group=None)]
    rows.append(d(named_none, "m2", 0, 1, "ack", None))  # CoDel off, nothing requeued: not listed
    deliveries = frame("delivery", *rows).transform(with_delivery_latencies).transform(mark_measured(0, "receive_ns"))
    assert by_consumer(deliveries) == []


def test_totals_cover_the_codel_consumers_and_follow_every_requeued_message(frame):
    t = codel_block(_deliveries(frame))["totals"]
    # nacks 3 + 2, decisions 6 + 4; dropping 70 + 40 ms
    # requeued ids m2 m4 m8 m10: m2, m4 acked elsewhere, m8 by its requeuer, m10 never
    assert t == {
        "nacks": 5,
        "requeued": 4,
        "discarded": 1,
        "nack_share": 0.5,
        "dropping_s": pytest.approx(0.110),
        "requeued_messages": 4,
        "requeued_acked_by_other": 2,
        "requeued_acked_by_same": 1,
        "requeued_not_acked": 1,
    }


def test_the_block_is_empty_when_codel_was_off(frame):
    block = codel_block(
        frame("delivery", d(OTHER, "m1", 0, 1, "ack", None))
        .transform(with_delivery_latencies)
        .transform(mark_measured(0, "receive_ns"))
    )
    assert block["consumers"] == []
    assert block["totals"]["nacks"] == 0 and block["totals"]["nack_share"] is None


def test_with_codel_off_everywhere_a_requeue_lists_its_acker_with_no_dropping_time(frame):
    deliveries = (
        frame(
            "delivery",
            d(OTHER, "m1", 0, 1, "nack_requeue", None, settle_ms=2, tag=1),
            d(PLAIN, "m1", 3, 4, "ack", None, redelivered=True, tag=1),
        )
        .transform(with_delivery_latencies)
        .transform(mark_measured(0, "receive_ns"))
    )
    block = codel_block(deliveries)
    # the consumer that acked what another requeued is listed, CoDel off: no dropping state to time
    assert [
        (c["consumer"], c["codel_on"], c["dropping_s"], c["acked_requeued_from_others"]) for c in block["consumers"]
    ] == [(PLAIN, False, None, 1)]
    assert (block["totals"]["requeued_messages"], block["totals"]["requeued_acked_by_other"]) == (1, 1)
    assert block["totals"]["nacks"] == 0  # the totals cover the consumers with CoDel on: none


def test_the_block_holds_plain_values_and_stats_blocks(frame):
    block = codel_block(_deliveries(frame))
    slow = block["consumers"][-1]
    assert [c["consumer"] for c in block["consumers"]] == [FAST, PLAIN, SLOW]
    assert set(slow) == {
        "consumer",
        "group",
        "codel_on",
        "decided",
        "nacks",
        "requeued",
        "discarded",
        "nack_share",
        "dropping_s",
        "acked_requeued_from_others",
        "sojourn_before_ms",
        "sojourn_after_ms",
    }
    assert slow["group"] == "slow"
    assert slow["sojourn_before_ms"] == {"count": 1, "mean": 10.0, "p50": 10.0, "p95": 10.0, "p99": 10.0, "max": 10.0}
    assert block["totals"]["requeued_acked_by_other"] == 2


def test_the_job_writes_the_block_and_the_report_shows_it(tmp_path, spark, write_trace):
    import json

    from analysis.job import analyze
    from analysis.schema import SCHEMA_VERSION

    t0 = 1_763_733_600_000_000_000
    (tmp_path / "run.json").write_text(
        json.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "run_id": "run-1",
                "scenario": {"name": "codel"},
                "t0_ns": t0,
                "duration_s": 1,
                "warmup_s": 0,
                "status": "completed",
            }
        )
    )
    write_trace(tmp_path, "publish", [dict(message_id="m1", intended_ns=t0, publish_ns=t0, outcome="confirmed")])
    slow = d(SLOW, "m1", 0, 50, "nack_requeue", True, settle_ms=51)
    fast = d(FAST, "m1", 55, 56, "ack", False, redelivered=True)
    write_trace(
        tmp_path,
        "delivery",
        [
            {
                **row,
                "receive_ns": t0 + row["receive_ns"],
                "start_ns": t0 + row["start_ns"],
                "end_ns": row["end_ns"] and t0 + row["end_ns"],
                "settle_ns": t0 + row["settle_ns"],
            }
            for row in (slow, fast)
        ],
    )
    summary = analyze(tmp_path, spark=spark)
    assert [(c["consumer"], c["nacks"], c["acked_requeued_from_others"]) for c in summary["codel"]["consumers"]] == [
        (FAST, 0, 1),
        (SLOW, 1, 0),
    ]
    assert summary["codel"]["totals"]["requeued_acked_by_other"] == 1
    assert summary["messages"]["acked"] == 1 and summary["messages"]["unaccounted"] == 0
    assert '<section id="codel">' in (tmp_path / "report.html").read_text()


def test_each_consumers_state_and_its_sojourn_before_and_after_its_first_drop(frame):
    deliveries = _deliveries(frame)
    state = {r["consumer"]: r for r in cube(deliveries, [], [codel_state_cells()]).cells("codel_state")}
    # six of slow's rows carry controller state (m7 none), it decided 6 (m7 never left the buffer), nacked 3
    assert state[SLOW] == dict(
        consumer=SLOW, group="slow", decided=6, nacks=3, requeued=2, discarded=1, first_drop_ns=50 * MS, codel_rows=6
    )
    assert state[OTHER] == dict(
        consumer=OTHER, group="other", decided=1, nacks=0, requeued=0, discarded=0, first_drop_ns=None, codel_rows=0
    )
    slow = codel_block(deliveries)["consumers"][-1]
    # slow decided at 10, 50, 60, 100, 110, 120 ms: 10 before its first drop (50 ms), the rest after
    assert (slow["consumer"], slow["decided"], slow["nacks"], slow["requeued"], slow["discarded"]) == (SLOW, 6, 3, 2, 1)
    assert slow["sojourn_before_ms"]["count"] == 1 and slow["sojourn_before_ms"]["max"] == 10.0
    assert slow["sojourn_after_ms"]["count"] == 5 and slow["sojourn_after_ms"]["max"] == 75.0  # m6: 45 -> 120
