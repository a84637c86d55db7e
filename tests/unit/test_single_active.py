"""summary.json's single_active_consumer block (analysis/events/single_active.py) from hand-made
events: periods from each consumer_active to the event that ended that consumer's subscription,
failovers with their gaps, overlaps counted, and {} for a queue without the argument."""

from __future__ import annotations

import json

from analysis.events.single_active import single_active_block

SAC = {"queue": {"name": "q", "arguments": {"x-single-active-consumer": True}}}
T0 = 1_000_000_000_000
MS = 1_000_000


def _event(kind, source, ts_ms, **detail):
    return {"ts_ns": T0 + ts_ms * MS, "kind": kind, "source": source, "name": source, "detail": json.dumps(detail)}


def test_a_leave_then_the_next_consumers_first_delivery_is_a_failover_with_its_gap():
    events = [
        _event("consumer_join", "a", 0),
        _event("consumer_active", "a", 5, receive_ns=T0 + 4 * MS),
        _event("consumer_join", "b", 1000),
        _event("consumer_leave", "a", 3000, clean=True, last_receive_ns=T0 + 2990 * MS),
        _event("consumer_active", "b", 3010, receive_ns=T0 + 3002 * MS),
    ]
    block = single_active_block(events, T0, SAC)
    assert block["periods"] == [
        {"consumer": "a", "from_s": 0.004, "to_s": 2.99, "ended_by": "consumer_leave"},
        {"consumer": "b", "from_s": 3.002, "to_s": None, "ended_by": None},
    ]
    assert block["failovers"] == [{"from": "a", "to": "b", "at_s": 3.002, "gap_ms": 12.0, "ended_by": "consumer_leave"}]
    assert block["overlaps"] == 0


def test_two_consumers_delivered_to_at_once_are_an_overlap():
    events = [
        _event("consumer_active", "a", 0, receive_ns=T0),
        _event("consumer_active", "b", 10, receive_ns=T0 + 10 * MS),
    ]
    block = single_active_block(events, T0, SAC)
    assert block["overlaps"] == 1 and block["failovers"] == []


def test_a_queue_without_single_active_consumer_has_no_block():
    events = [_event("consumer_active", "a", 0, receive_ns=T0)]
    assert single_active_block(events, T0, {"queue": {"name": "q", "arguments": {}}}) == {}
    assert single_active_block(events, T0, None) == {}
