"""summary.json's `slow_consumers` block: transforms.slow_consumers's samples per consumer and minute,
collected and ranked worst first (docs/slow-consumers.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.events.queue import queue_samples, sampling
from analysis.transforms._common import local_rows
from analysis.transforms.slow_consumers import LEAVE_KINDS, SPANS_SCHEMA, slow_consumer_samples

__all__ = ["slow_consumers_block", "consumer_spans"]


def _share(slow: int, sampled: int) -> float | None:
    return slow / sampled if sampled else None


def consumer_spans(
    activity: Sequence[Mapping[str, Any]], event_rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Per consumer (summary.deliveries' activity rows), by name: its group, why it is excluded (None:
    it has a window: not auto-ack, a prefetch limit), and the span in which samples count for it
    (`from_ns`, `to_ns`): its first join or receive, whichever came first, to its last leave or
    receive or settle, whichever came last."""
    joins: dict[Any, int] = {}
    leaves: dict[Any, int] = {}
    for e in event_rows:
        name, ts = e.get("name"), e.get("ts_ns")
        if ts is None:
            continue
        if e.get("kind") == "consumer_join":
            joins[name] = min(joins.get(name, ts), ts)
        elif e.get("kind") in LEAVE_KINDS:
            leaves[name] = max(leaves.get(name, ts), ts)
    spans = []
    for a in activity:
        consumer = a["consumer"]
        excluded = (
            "auto_ack"
            if a["auto_ack"]
            else "no prefetch limit"
            if a["max_prefetch"] is not None and a["max_prefetch"] <= 0
            else None
        )
        starts = [t for t in (joins.get(consumer), a["first_receive_ns"]) if t is not None]
        ends = [t for t in (leaves.get(consumer), a["last_ns"]) if t is not None]
        spans.append(
            {
                "consumer": consumer,
                "group": a["group"],
                "excluded": excluded,
                "from_ns": min(starts) if starts else None,
                "to_ns": max(ends) if ends else None,
            }
        )
    return spans


def slow_consumers_block(
    deliveries: DataFrame,
    events: DataFrame,
    event_rows: Sequence[Mapping[str, Any]],
    t0_ns: int,
    activity: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """summary.json's `slow_consumers` (docs/summary.md); {} when the run has no queue samples.
    `event_rows`: the events trace's rows (the `events` frame's); `activity`: summary.deliveries'
    rows per consumer (DeliveryRollup.activity)."""
    samples = queue_samples(event_rows)
    if not samples:
        return {}
    spans = consumer_spans(activity, event_rows)
    fields = [f.split()[0] for f in SPANS_SCHEMA.split(", ")]
    spans_frame = local_rows(deliveries.sparkSession, [tuple(r[f] for f in fields) for r in spans], SPANS_SCHEMA)
    minutes = (
        slow_consumer_samples(deliveries, events, t0_ns, spans_frame)
        .groupBy("consumer", "group", "minute")
        .agg(F.count(F.lit(1)).alias("sampled"), F.count_if(F.col("slow")).alias("slow"))
        .orderBy("consumer", "minute")
        .collect()
    )
    rows: dict[str, dict[str, Any]] = {}
    for r in minutes:
        c = rows.setdefault(r["consumer"], {"consumer": r["consumer"], "group": r["group"], "minutes": []})
        c["minutes"].append(
            {
                "minute": int(r["minute"]),
                "sampled": int(r["sampled"]),
                "slow": int(r["slow"]),
                "share": _share(int(r["slow"]), int(r["sampled"])),
            }
        )
    listed = []
    for c in rows.values():
        sampled = sum(m["sampled"] for m in c["minutes"])
        slow = sum(m["slow"] for m in c["minutes"])
        worst = max(c["minutes"], key=lambda m: (m["share"], -m["minute"]))
        listed.append(
            {
                "consumer": c["consumer"],
                "group": c["group"],
                "seconds_sampled": sampled,
                "slow_seconds": slow,
                "share": _share(slow, sampled),
                "worst_minute": {"minute": worst["minute"], "share": worst["share"]},
                "minutes": c["minutes"],
            }
        )
    listed.sort(key=lambda c: (-c["worst_minute"]["share"], -c["share"], c["consumer"]))
    excluded = [
        {"consumer": r["consumer"], "group": r["group"], "reason": r["excluded"]}
        for r in spans
        if r["excluded"] is not None
    ]
    return {
        **sampling(samples),
        "consumers": listed,
        "excluded": excluded,
    }
