"""summary.json's `stream` (docs/summary.md): on a stream, each consumer group's reading: where it
started, what it acked, and how many of the run's messages it has not read yet. {} on other queues."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from analysis.transforms.streams import StreamGroup

__all__ = ["stream_block"]


def stream_block(
    groups: Sequence[StreamGroup] | None, ledger: Iterable[Mapping[str, Any]], consumers: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """From the stream's groups (transforms.streams.stream_starts), the ledger's rows (the messages
    not read by every group that reads them are all there: their class is not acked) and the
    per-consumer rows (their acked deliveries)."""
    if groups is None:
        return {}
    unread = [0] * len(groups)
    for row in ledger:
        if row["account"] is None:
            continue  # not this run's message: a stream that existed before the run
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
