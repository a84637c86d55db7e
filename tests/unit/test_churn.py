"""consumers_churn on hand-made traces: every expected number below is counted by hand from the rows.

The block reads the deliveries as the job hands them over: their cells (per consumer and group, the
crashed, unsettled and redelivered counts of the deliveries' cube) and the rows of the messages it
follows by id (here every delivery)."""

from __future__ import annotations

import json
from collections import Counter

from analysis.summary.by_id import BY_ID_COLUMNS
from analysis.summary.churn import churn_block

A, A_LATER, B = "a/w:1/0", "a/w:1/0", "b/w:1/0"


def _ack(consumer, group, mid, end, redelivered=False):
    return dict(
        message_id=mid,
        consumer=consumer,
        consumer_group=group,
        receive_ns=end - 1,
        start_ns=end - 1,
        end_ns=end,
        settle_ns=end,
        outcome="ack",
        redelivered=redelivered,
    )


def _event(ts, kind, source, detail=None):
    return dict(ts_ns=ts, kind=kind, source=source, name=source, detail=json.dumps(detail) if detail else None)


def churn(deliveries, events, accounts):
    """churn_block of delivery and event rows, with `accounts` (message id -> account class)."""
    cells = Counter()
    for r in deliveries:
        key = (r["consumer"], r["consumer_group"])
        cells[key + ("crashed",)] += r["outcome"] == "crashed"
        cells[key + ("unsettled",)] += r["outcome"] == "unsettled"
        cells[key + ("redelivered",)] += bool(r.get("redelivered"))
    rows = [
        {"consumer": c, "group": g, **{n: cells[(c, g, n)] for n in ("crashed", "unsettled", "redelivered")}}
        for c, g in sorted({(r["consumer"], r["consumer_group"]) for r in deliveries})
    ]
    by_id = [{k: r.get(k) for k in BY_ID_COLUMNS} for r in deliveries]
    return churn_block(events, rows, by_id, accounts)


def _churn_run(m6_account="left_in_broker"):
    deliveries = [
        _ack(A, "a", "m1", 2),
        _ack(A, "a", "m2", 3),
        # a crashes at 5: m3 in hand (processed, not acked), m4 still buffered
        dict(message_id="m3", consumer=A, consumer_group="a", receive_ns=4, start_ns=4, end_ns=5, outcome="crashed"),
        dict(message_id="m4", consumer=A, consumer_group="a", receive_ns=4, outcome="crashed"),
        # a rejoins at 8 and gets both back, and m7 that b had acked but whose ack never arrived
        _ack(A_LATER, "a", "m3", 9, redelivered=True),
        _ack(A_LATER, "a", "m4", 10, redelivered=True),
        _ack(A_LATER, "a", "m7", 11, redelivered=True),
        _ack(B, "b", "m5", 2),
        _ack(B, "b", "m7", 3),
        dict(message_id="m6", consumer=B, consumer_group="b", receive_ns=3, outcome="unsettled"),
    ]
    events = [
        _event(1, "consumer_join", A),
        _event(5, "consumer_crash", A, {"unacked": 2, "in_hand": "m3"}),
        _event(8, "consumer_join", A),
        _event(20, "consumer_leave", A, {"clean": True}),
        _event(1, "consumer_join", B),
        _event(4, "connection_lost", B, {"reason": "reset"}),
        _event(6, "consumer_join", B),
        _event(21, "consumer_leave", B, {"clean": False}),
        _event(4, "connection_lost", "p/w:1/0", {"reason": "reset"}),  # a producer's: not consumer churn
        _event(0, "phase_start", "runner"),
    ]
    accounts = {f"m{i}": "acked" for i in range(1, 8)}
    accounts["m6"] = m6_account
    return deliveries, events, accounts


def test_per_group_counts_of_joins_crashes_requeues_and_repeats():
    deliveries, events, accounts = _churn_run()
    block = churn(deliveries, events, accounts)
    a, b = block["groups"]
    assert a == {
        "group": "a",
        "joins": 2,
        "rejoins": 1,
        "clean_leaves": 1,
        "crashes": 1,
        "connections_lost": 0,
        "requeued_crashed": 2,
        "requeued_unsettled": 0,
        "redelivered": 3,
        "processed_twice": 1,  # m3: ended at 5 (crashed) and 9; m7 goes to b, which processed it first
        "acked_twice": 0,
        "held_messages": 2,
        "held_unaccounted": 0,
        "held_then": {"acked": 2},
    }
    assert b == {
        "group": "b",
        "joins": 2,
        "rejoins": 1,
        "clean_leaves": 0,
        "crashes": 0,
        "connections_lost": 1,
        "requeued_crashed": 0,
        "requeued_unsettled": 1,
        "redelivered": 0,
        "processed_twice": 1,
        "acked_twice": 1,  # m7: acked by b at 3, again by a at 11
        "held_messages": 1,
        "held_unaccounted": 0,
        "held_then": {"left_in_broker": 1},
    }


def test_totals_and_the_nothing_lost_check():
    deliveries, events, accounts = _churn_run()
    block = churn(deliveries, events, accounts)
    assert block["churn"] is True and block["nothing_lost"] is True
    totals = block["totals"]
    assert (
        totals["crashes"],
        totals["connections_lost"],
        totals["requeued_crashed"],
        totals["requeued_unsettled"],
        totals["redelivered"],
    ) == (1, 1, 2, 1, 3)
    assert (totals["processed_twice"], totals["acked_twice"]) == (2, 1)
    assert totals["held_then"] == {"acked": 2, "left_in_broker": 1} and totals["held_messages"] == 3


def test_a_held_message_that_ended_unaccounted_fails_the_check():
    deliveries, events, accounts = _churn_run(m6_account="unaccounted")
    block = churn(deliveries, events, accounts)
    assert block["nothing_lost"] is False
    assert block["groups"][1]["held_then"] == {"unaccounted": 1} and block["totals"]["held_unaccounted"] == 1


def test_a_held_id_the_accounting_never_saw_counts_as_unaccounted():
    deliveries, events, accounts = _churn_run()
    del accounts["m6"]
    assert churn(deliveries, events, accounts)["totals"]["held_unaccounted"] == 1


def test_a_message_held_by_two_groups_counts_once_in_the_totals():
    deliveries = [
        dict(message_id="m1", consumer=A, consumer_group="a", receive_ns=1, outcome="crashed"),
        dict(message_id="m1", consumer=B, consumer_group="b", receive_ns=2, outcome="unsettled", redelivered=True),
        _ack(A, "a", "m1", 9, redelivered=True),
    ]
    events = [_event(1, "consumer_join", A), _event(1, "consumer_join", B)]
    block = churn(deliveries, events, {"m1": "acked"})
    assert [g["held_messages"] for g in block["groups"]] == [1, 1]
    assert block["totals"]["held_messages"] == 1 and block["totals"]["redelivered"] == 2


def test_a_run_without_churn_says_so():
    deliveries = [_ack(A, "a", "m1", 2), _ack(A, "a", "m2", 3)]
    events = [_event(1, "consumer_join", A), _event(9, "consumer_leave", A, {"clean": True})]
    block = churn(deliveries, events, {"m1": "acked", "m2": "acked"})
    assert block["churn"] is False and block["nothing_lost"] is True
    assert block["groups"][0]["joins"] == 1 and block["groups"][0]["clean_leaves"] == 1
    assert block["totals"]["held_messages"] == 0 and block["totals"]["held_then"] == {}
