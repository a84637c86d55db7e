"""The deliveries of the few messages some block follows by id, collected once, and what the blocks
read of them: where requeued messages ended up (CoDel), the messages processed or acked more than
once and the messages crashed or unsettled deliveries held (churn).

The job collects the deliveries of the ledger's ids (transforms.accounting.ledger: every id that
was requeued, held, repeated or discarded is among them) in one Spark action, as Arrow; the rest is
plain Python over those rows, a few per message.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, functions as F

from analysis.cube import collected
from analysis.transforms._common import ACKED_OUTCOMES, HELD_OUTCOMES

__all__ = [
    "BY_ID_COLUMNS",
    "Handoff",
    "deliveries_by_id",
    "requeue_handoffs",
    "repeats",
    "held_messages",
]

BY_ID_COLUMNS = (
    "message_id",
    "consumer",
    "consumer_group",
    "outcome",
    "receive_ns",
    "start_ns",
    "end_ns",
    "settle_ns",
    "settled_by",
)
"""The delivery columns the blocks that follow a message by id read."""

Row = Mapping[str, Any]


def deliveries_by_id(deliveries: DataFrame) -> list[dict[str, Any]]:
    """One Spark action: the rows of `deliveries` (already narrowed to the ids to follow) that have an
    id, with BY_ID_COLUMNS, collected as Arrow."""
    rows = deliveries.where(F.col("message_id").isNotNull()).select(*BY_ID_COLUMNS)
    return collected(rows).to_pylist()


def _by_message(rows: Iterable[Row], keep: Callable[[Row], bool]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r["message_id"] is not None and keep(r):
            out[r["message_id"]].append(r)
    return out


def _sortable(*values: Any) -> tuple[Any, ...]:
    """A sort key in which a null sorts before every value, as in Spark's order of structs."""
    return tuple((v is not None, v if v is not None else 0) for v in values)


class Handoff(NamedTuple):
    """A message nack-requeued at least once: the consumer of its first ack (by settle time, then
    receive time; None if it was never acked) and the consumer whose nack_requeue was the last one
    sent (by settle time) before that acked delivery was received, or the last of all if it was never
    acked; None if every requeue was sent after its ack was received (a duplicate delivery)."""

    message_id: str
    acker: str | None
    last_requeuer: str | None


def by_codel(settled_by: str | None) -> bool:
    """Whether a nack with this `settled_by` was CoDel's (in a trace before version 6 every nack was)."""
    return settled_by is None or settled_by == "codel"


def requeue_handoffs(rows: Iterable[Row]) -> list[Handoff]:
    """A Handoff per message id that CoDel nack-requeued in some delivery of `rows`, by id."""
    rows = list(rows)
    requeues = _by_message(rows, lambda r: r["outcome"] == "nack_requeue" and by_codel(r.get("settled_by")))
    acks = _by_message(rows, lambda r: r["outcome"] in ACKED_OUTCOMES and r["message_id"] in requeues)
    out = []
    for message_id in sorted(requeues):
        first = min(acks[message_id], key=lambda r: _sortable(r["settle_ns"], r["receive_ns"]), default=None)
        received = None if first is None else first["receive_ns"]
        timed = [
            r
            for r in requeues[message_id]
            if r["settle_ns"] is not None and (first is None or (received is not None and r["settle_ns"] <= received))
        ]
        last = max(timed, key=lambda r: r["settle_ns"]) if timed else None
        out.append(Handoff(message_id, first["consumer"] if first else None, last["consumer"] if last else None))
    return out


def repeats(rows: Iterable[Row], done: Callable[[Row], bool], at: str) -> Counter[str]:
    """Per consumer group: the messages `done` on more than one delivery, each counted once under
    the group of its earliest such delivery by `at` (the least group name among ties)."""
    counts: Counter[str] = Counter()
    for done_rows in _by_message(rows, done).values():
        if len(done_rows) > 1:
            times = [r[at] for r in done_rows if r[at] is not None]
            groups = [r["consumer_group"] for r in done_rows if times and r[at] == min(times)]
            groups = [g for g in groups if g is not None]
            if groups:
                counts[min(groups)] += 1
    return counts


def held_messages(rows: Iterable[Row], accounts: Mapping[str, str]) -> set[tuple[str, str, str]]:
    """(group, message_id, account) for every message a crashed or unsettled delivery in `rows`
    held: its class in `accounts` (message id -> account class), `unaccounted` for an id the
    accounting does not know."""
    return {
        (r["consumer_group"], r["message_id"], accounts.get(r["message_id"], "unaccounted"))
        for r in rows
        if r["outcome"] in HELD_OUTCOMES and r["message_id"] is not None
    }
