"""Trace rows as the users build them: plain tuples (or, for a publish settled later, a list),
holding a kind's own columns, all but the three common ones the writer adds, in the schema's order.

Rows stay positional because the I/O loop builds one per message: a call with the 25 columns
named costs about 2.3 us on this project's machine, as much as the rest of tracing a delivery,
against 0.25 us positional. What keeps positions honest is that the layout is the schema's
(`analysis.schema`), read here by name: `own_columns(kind)` names a row's fields, `index(kind, name)`
says where one sits, and `publish_row` and the consumer's `delivery_row` are pinned field by field,
by name, in tests/unit/test_trace_rows.py.
"""

from __future__ import annotations

import functools

from analysis.schema import column_names

__all__ = [
    "COMMON_COLUMNS",
    "own_columns",
    "index",
    "publish_row",
    "PUBLISH_MESSAGE_ID",
    "PUBLISH_NS",
    "PUBLISH_SIZE",
    "PUBLISH_ROUTING_KEY",
    "PUBLISH_CONFIRM_NS",
    "PUBLISH_OUTCOME",
    "PUBLISH_BLOCKED_MS",
]

COMMON_COLUMNS = 3
"""schema_version, run_id, worker: the same in every row of a part file, added by the writer."""


@functools.cache
def own_columns(kind: str) -> tuple[str, ...]:
    """The columns a row of `kind` holds, in order."""
    return tuple(column_names(kind)[COMMON_COLUMNS:])


def index(kind: str, name: str) -> int:
    """Where column `name` sits in a row of `kind`."""
    try:
        return own_columns(kind).index(name)
    except ValueError:
        raise ValueError(f"trace kind {kind!r} has no column {name!r}") from None


PUBLISH_MESSAGE_ID = index("publish", "message_id")
PUBLISH_NS = index("publish", "publish_ns")
PUBLISH_SIZE = index("publish", "size_bytes")
PUBLISH_ROUTING_KEY = index("publish", "routing_key")
PUBLISH_CONFIRM_NS = index("publish", "confirm_ns")
PUBLISH_OUTCOME = index("publish", "outcome")
PUBLISH_BLOCKED_MS = index("publish", "blocked_ms")


def publish_row(
    message_id: str,
    producer: str,
    group: str,
    seq: int,
    phase: str,
    intended_ns: int,
    publish_ns: int,
    size: int,
    routing_key: str,
    persistent: bool,
    priority: int | None,
    replay_index: int | None,
    replay_loop: int | None,
    blocked_ms: float | None,
) -> list:
    """A publish row with its confirm time and outcome still to come (PUBLISH_CONFIRM_NS,
    PUBLISH_OUTCOME): a list, settled in place when the confirm (or the give-up) comes."""
    return [
        message_id,
        producer,
        group,
        seq,
        phase,
        intended_ns,
        publish_ns,
        size,
        routing_key,
        persistent,
        None,
        None,
        priority,
        replay_index,
        replay_loop,
        blocked_ms,
    ]
