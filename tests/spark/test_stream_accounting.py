"""A stream's accounting (analysis/transforms/streams.py): every consumer group reads every message
from where it started, so a message is acked once every group that reads it acked it, not yet read
while one has not, and acked twice only when one group acked it twice."""

from __future__ import annotations

from analysis.summary.blocks import ledger_totals
from analysis.summary.streams import stream_block, stream_starts
from analysis.transforms import classify, id_projections, ledger, message_facts
from analysis.transforms.streams import StreamGroup

READERS = [("live", "next"), ("audit", "first"), ("tail", None)]


def _publish(m, outcome="confirmed", at=0):
    return dict(message_id=m, intended_ns=at, publish_ns=at, outcome=outcome)


def _read(group, m, offset, outcome="ack"):
    return dict(
        message_id=m,
        consumer=f"{group}/h/0",
        consumer_group=group,
        publish_ns=offset * 10,  # m<i> was published at 10 i
        receive_ns=0,
        outcome=outcome,
        redelivered=False,
        stream_offset=offset,
    )


def _frames(frame):
    # m0..m9 at offsets 0..9, published at 10 i; m10 confirmed, read by no group, published at 55 (after
    # the start of live and audit, before tail's); m11 sent with confirms off, read by none.
    publishes = frame(
        "publish",
        *[_publish(f"m{i}", at=10 * i) for i in range(10)],
        _publish("m10", at=55),
        _publish("m11", "sent", at=95),
    )
    reads = [_read("live", f"m{i}", i) for i in range(10)]
    reads.append(_read("live", "m3", 3))  # live acked m3 twice
    reads += [_read("audit", f"m{i}", i) for i in range(8)]  # audit (from first) has not reached m8, m9
    reads += [_read("tail", f"m{i}", i) for i in range(6, 10)]  # tail attached at offset 6
    reads.append(_read("audit", "old", 0))  # a message of an earlier run, in a stream that existed
    return publishes, frame("delivery", *reads), frame("leftover")


def test_each_group_starts_where_its_offset_says_or_at_the_first_offset_it_read(frame):
    _, deliveries, _ = _frames(frame)
    assert stream_starts(deliveries, READERS) == [
        StreamGroup("live", "next", 0, 0),
        StreamGroup("audit", "first", 0, None),  # first: every message, whatever it read
        StreamGroup("tail", None, 6, 60),
    ]


def test_a_message_is_acked_once_every_group_that_reads_it_acked_it(frame):
    publishes, deliveries, leftovers = _frames(frame)
    groups = stream_starts(deliveries, READERS)
    facts = publishes.transform(message_facts(deliveries, leftovers, None, None, groups))
    got = {r.message_id: r.account for r in facts.transform(classify(None, False, None, False, True)).collect()}
    expected = {f"m{i}": "acked" for i in range(8)}  # m0-m5: live and audit; m6, m7: all three
    expected.update(m8="not_yet_read", m9="not_yet_read")  # audit has not read them
    expected["m10"] = "not_yet_read"  # confirmed: in the stream, read by no group
    expected["m11"] = "unaccounted"  # never confirmed, never read: nothing says where it is
    assert got == expected


def test_the_totals_count_one_group_acking_twice_as_the_only_duplicate_and_each_groups_unread(frame):
    from analysis.cube import cube

    publishes, deliveries, leftovers = _frames(frame)
    groups = stream_starts(deliveries, READERS)
    facts = publishes.transform(message_facts(deliveries, leftovers, None, None, groups))
    rows = [r.asDict() for r in facts.transform(ledger(0, None, False, None, False, True)).collect()]
    ids = cube(publishes, id_projections()).counts("ids")
    totals, unaccounted = ledger_totals(rows, ids, redelivered=0, max_ids=100)
    assert (totals["published"], totals["acked"], totals["not_yet_read"], totals["unaccounted"]) == (12, 8, 3, 1)
    assert totals["left_in_broker"] == 0 and unaccounted == ["m11"]
    assert totals["duplicates"] == 1  # m3, by live; every message acked by two groups is no duplicate
    consumers = [
        {"group": "live", "acked": 11},
        {"group": "audit", "acked": 9},
        {"group": "tail", "acked": 4},
    ]
    block = stream_block(groups, rows, consumers)
    unread = {g["group"]: g["not_yet_read"] for g in block["groups"]}
    # m10 for live and audit, not for tail, which started at a message published after it; m8, m9 for audit
    assert unread == {"live": 1, "audit": 3, "tail": 0}
    assert [g["first_offset"] for g in block["groups"]] == [0, 0, 6]
    assert [g["offset"] for g in block["groups"]] == ["next", "first", "next"]


def test_a_queue_that_is_not_a_stream_has_no_stream_block():
    assert stream_block(None, [], []) == {}


def test_a_group_with_an_integer_offset_reads_from_it_even_when_it_read_nothing(frame):
    publishes, deliveries, leftovers = _frames(frame)
    readers = [*READERS, ("from4", 4)]
    groups = stream_starts(deliveries, readers)
    assert groups[3] == StreamGroup("from4", 4, 4, None)
    facts = publishes.transform(message_facts(deliveries, leftovers, None, None, groups))
    got = {r.message_id: r.account for r in facts.transform(classify(None, False, None, False, True)).collect()}
    assert {m for m, a in got.items() if a == "acked"} == {"m0", "m1", "m2", "m3"}  # from4 reads m4 on
    rows = [r.asDict() for r in facts.transform(ledger(0, None, False, None, False, True)).collect()]
    block = stream_block(groups, rows, [])
    assert block["groups"][3]["not_yet_read"] == 7  # m4-m9 and m10 (published after m4)
