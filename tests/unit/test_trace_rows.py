"""Trace rows are positional tuples (cheap in the I/O loop); these tests pin every field the
producer and the consumer put in them to the schema's column of the same meaning, by name. A
reordered schema, or a row builder that swaps two fields, fails here instead of writing values
under the wrong column names."""

import pytest

from analysis import schema
from loadgen.rules.codel import CoDelState
from loadgen.trace import rows
from loadgen.users.consumer import Delivery, delivery_row


def _by_name(kind: str, row) -> dict:
    names = rows.own_columns(kind)
    assert len(row) == len(names), f"a {kind} row holds {len(row)} values for {len(names)} columns"
    return dict(zip(names, row))


def test_a_delivery_row_puts_every_value_under_its_own_column():
    d = Delivery(
        receive_ns=1_001,
        tag=7,
        redelivered=True,
        message_id="m-1",
        publish_ns=1_000,
        size=128,
        prefetch=20,
        buffer_len=3,
        phase="slow",
        link=object(),
        recorded_us=None,
        priority=4,
        read_ns=10_015,
        stream_offset=42,
    )
    row = delivery_row(
        d,
        "c/w/0",
        "c",
        1_002,
        1_003,
        1_004,
        "ack",
        1.5,
        CoDelState(dropping=True, drop_count=2, first_above_ns=1_005, drop_next_ns=1_006),
        ("high", 5, 9, False),
        "handler_error",
        "builtins.ValueError",
    )
    assert _by_name("delivery", row) == {
        "message_id": "m-1",
        "consumer": "c/w/0",
        "consumer_group": "c",
        "phase": "slow",
        "delivery_tag": 7,
        "redelivered": True,
        "publish_ns": 1_000,
        "receive_ns": 1_001,
        "start_ns": 1_002,
        "end_ns": 1_003,
        "settle_ns": 1_004,
        "outcome": "ack",
        "prefetch": 20,
        "buffer_len": 3,
        "size_bytes": 128,
        "processing_ms": 1.5,
        "codel_dropping": True,
        "codel_count": 2,
        "codel_first_above_ns": 1_005,
        "codel_drop_next_ns": 1_006,
        "priority": 4,
        "egress_class": "high",
        "egress_length": 5,
        "egress_units": 9,
        "discard_indication": False,
        "read_ns": 10_015,
        "settled_by": "handler_error",
        "handler_error": "builtins.ValueError",
        "stream_offset": 42,
    }


def test_a_delivery_row_without_codel_has_null_codel_columns():
    d = Delivery(1, 1, False, "m", None, 0, 0, 0, "base", None, None, None, 1)
    row = _by_name(
        "delivery", delivery_row(d, "c", "g", None, None, None, "unsettled", None, None, (None, None, None, None))
    )
    assert [row[c] for c in ("codel_dropping", "codel_count", "codel_first_above_ns", "codel_drop_next_ns")] == [
        None
    ] * 4


def test_a_publish_row_puts_every_value_under_its_own_column_and_is_settled_by_name():
    row = rows.publish_row("p-1", "p/w/0", "p", 41, "base", 2_000, 2_001, 256, "rk", True, 3, 17, 1, 12.5)
    assert _by_name("publish", row) == {
        "message_id": "p-1",
        "producer": "p/w/0",
        "producer_group": "p",
        "seq": 41,
        "phase": "base",
        "intended_ns": 2_000,
        "publish_ns": 2_001,
        "size_bytes": 256,
        "routing_key": "rk",
        "persistent": True,
        "confirm_ns": None,
        "outcome": None,
        "priority": 3,
        "replay_index": 17,
        "replay_loop": 1,
        "blocked_ms": 12.5,
    }
    row[rows.PUBLISH_CONFIRM_NS] = 2_010
    row[rows.PUBLISH_OUTCOME] = "confirmed"
    settled = _by_name("publish", row)
    assert (settled["confirm_ns"], settled["outcome"]) == (2_010, "confirmed")
    assert (
        row[rows.PUBLISH_MESSAGE_ID],
        row[rows.PUBLISH_NS],
        row[rows.PUBLISH_SIZE],
        row[rows.PUBLISH_ROUTING_KEY],
        row[rows.PUBLISH_BLOCKED_MS],
    ) == ("p-1", 2_001, 256, "rk", 12.5)


def test_rows_leave_out_exactly_the_common_columns_the_writer_adds():
    for kind in schema.KINDS:
        assert rows.own_columns(kind) == tuple(schema.column_names(kind)[3:])
        assert schema.column_names(kind)[:3] == ["schema_version", "run_id", "worker"]


def test_an_unknown_column_is_a_clear_error():
    with pytest.raises(ValueError, match="trace kind 'publish' has no column 'confirmed_ns'"):
        rows.index("publish", "confirmed_ns")
