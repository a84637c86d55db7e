"""summary.json's `stream` (docs/summary.md): on a stream, each consumer group's reading: where it
started, what it acked, and how many of the run's messages it has not read yet. {} on other queues."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from analysis.transforms.streams import MAX_GROUPS, StreamGroup, fixed_start, least_offsets

__all__ = ["stream_starts", "stream_block"]


def stream_starts(deliveries: DataFrame, readers: Sequence[tuple[str, Any]]) -> list[StreamGroup]:
    """Each group's start (one small query, transforms.streams.least_offsets): its fixed start
    (first, an integer offset), else the least offset it read (None when it read nothing), and the
    publish time of the message there. `readers`: (group, offset) in the scenario's order."""
    readers = list(readers)[:MAX_GROUPS]
    if not readers:
        return []
    least = deliveries.transform(least_offsets(readers)).collect()[0]
    out = []
    for i, (name, spec) in enumerate(readers):
        fixed = fixed_start(spec)
        start = fixed if fixed is not None else least[f"o{i}"]
        out.append(StreamGroup(name, spec, start, None if spec == "first" else least[f"p{i}"]))
    return out


def stream_block(
    groups: Sequence[StreamGroup] | None, ledger: Iterable[Mapping[str, Any]], consumers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """From the stream's groups (stream_starts), the ledger's rows (the messages
    not read by every group that reads them are all there: their class is not acked) and the
    per-consumer rows (their acked deliveries). A group's `not_yet_read` counts the messages of that
    class it reads and had not acked."""
    if groups is None:
        return {}
    unread = [0] * len(groups)
    for row in ledger:
        if row["account"] != "not_yet_read":
            continue  # read by every group that reads it, or not in the stream (or not this run's message)
        missing = int(row.get("_expected") or 0) & ~int(row.get("_read_groups") or 0)
        for i in range(len(groups)):
            if missing >> i & 1:
                unread[i] += 1
    acked: dict[str, int] = {}
    for c in consumers:
        acked[c["group"]] = acked.get(c["group"], 0) + int(c["acked"] or 0)
    return {
        "groups": [
            {
                "group": g.name,
                "offset": g.offset if g.offset is not None else "next",
                "first_offset": g.start,
                "acked": acked.get(g.name, 0),
                "not_yet_read": unread[i],
            }
            for i, g in enumerate(groups)
        ]
    }
