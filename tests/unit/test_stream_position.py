"""Where a stream consumer attaches (loadgen/rules/stream_position.py): the group's offset the first
time, then where it left off, never skipping what it held unsettled or what came while it was away."""

from __future__ import annotations

import datetime as dt

from loadgen.rules.stream_position import StreamPosition

T0 = int(dt.datetime(2026, 12, 5, 10, 0, 0, 700_000, tzinfo=dt.timezone.utc).timestamp() * 1e9)


def test_the_first_subscription_starts_at_the_groups_offset_and_the_next_after_the_last_received():
    p = StreamPosition()
    assert p.reads_from("first", T0) == "first"
    for offset in (0, 1, 2):
        p.received(offset)
    assert p.reads_from("first", T0) == 3


def test_deliveries_left_unsettled_with_their_link_are_read_again():
    p = StreamPosition()
    p.reads_from(42, T0)
    for offset in (42, 43, 44, 45):
        p.received(offset)
    p.unsettled(44)  # the buffer when the connection went: 44 and 45
    p.unsettled(45)
    assert p.reads_from(42, T0) == 44


def test_a_next_group_that_rejoins_before_receiving_anything_reads_from_its_first_attach():
    p = StreamPosition()
    assert p.reads_from(None, T0) == "next"
    # the connection went; 5 s later it rejoins: from the second it first attached, not from now
    assert p.reads_from(None, T0 + 5_000_000_000) == "2026-12-05T10:00:00Z"


def test_a_stream_declared_again_starts_over_at_the_groups_offset():
    p = StreamPosition()
    p.reads_from("first", T0)
    p.received(5000)
    p.start_over()
    assert p.reads_from("first", T0) == "first"
