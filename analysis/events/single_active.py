"""summary.json's `single_active_consumer` block (docs/summary.md): on a queue with
`x-single-active-consumer`, which consumer was active when, and each failover with its gap, from the
consumers' own events.

AMQP 0-9-1 does not tell a consumer that it became the active one; its first delivery since it
joined does. Each consumer records that delivery as a `consumer_active` event (detail.receive_ns),
and the receive time of its last delivery in the event that ends its subscription (consumer_leave,
consumer_crash, connection_lost: detail.last_receive_ns). A *period* runs from one to the other; a
*failover* is one period's end followed by the next's start, and its *gap* the time between the old
consumer's last delivery and the new one's first: how long the queue had no consumer it delivered
to (the broker's own notice of the leave included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from analysis.events import detail, seconds_since
from analysis.run_file import queue_arguments

__all__ = ["single_active_block", "has_single_active_consumer"]

_ENDS = ("consumer_leave", "consumer_crash", "connection_lost")


def has_single_active_consumer(scenario: Any) -> bool:
    """Whether run.json's resolved scenario gives its queue `x-single-active-consumer: true`."""
    return queue_arguments(scenario).get("x-single-active-consumer") is True


def single_active_block(event_rows: Iterable[Mapping[str, Any]], t0_ns: int, scenario: Any) -> dict[str, Any]:
    """{} unless the queue has single active consumer. Otherwise `periods` (consumer, from_s, to_s:
    null while it stayed active to the end, ended_by: the event that ended it), `failovers` (from,
    to, at_s: the new consumer's first delivery, gap_ms, and how the old one went) and `overlaps`:
    pairs of periods that overlap in time (0 when the broker kept to one active consumer)."""
    if not has_single_active_consumer(scenario):
        return {}
    events = sorted(event_rows, key=lambda e: e["ts_ns"])
    periods: list[dict[str, Any]] = []
    open_by: dict[str, dict[str, Any]] = {}
    for e in events:
        source, kind = e.get("source"), e.get("kind")
        if not isinstance(source, str):
            continue
        if kind == "consumer_active":
            start = detail(e.get("detail")).get("receive_ns", e["ts_ns"])
            period = {"consumer": source, "start_ns": start, "end_ns": None, "ended_by": None}
            periods.append(period)
            open_by[source] = period
        elif kind in _ENDS and source in open_by:
            period = open_by.pop(source)
            period["end_ns"] = detail(e.get("detail")).get("last_receive_ns") or e["ts_ns"]
            period["ended_by"] = kind
    periods.sort(key=lambda p: p["start_ns"])
    failovers = []
    for old, new in zip(periods, periods[1:]):
        if old["end_ns"] is not None and old["end_ns"] <= new["start_ns"]:
            failovers.append(
                {
                    "from": old["consumer"],
                    "to": new["consumer"],
                    "at_s": round(seconds_since(t0_ns, new["start_ns"]), 3),
                    "gap_ms": (new["start_ns"] - old["end_ns"]) / 1e6,
                    "ended_by": old["ended_by"],
                }
            )
    overlaps = sum(
        1 for i, a in enumerate(periods) for b in periods[i + 1 :] if a["end_ns"] is None or a["end_ns"] > b["start_ns"]
    )
    return {
        "periods": [
            {
                "consumer": p["consumer"],
                "from_s": round(seconds_since(t0_ns, p["start_ns"]), 3),
                "to_s": None if p["end_ns"] is None else round(seconds_since(t0_ns, p["end_ns"]), 3),
                "ended_by": p["ended_by"],
            }
            for p in periods
        ],
        "failovers": failovers,
        "overlaps": overlaps,
    }
