"""Producer flow control: when the broker blocked producers' connections, and what it cost them.

RabbitMQ blocks a publishing connection while a memory or disk alarm is in force
(`connection.blocked` / `connection.unblocked`; DOMAIN.md §6). Producers trace both as events
and every publish's wait as `blocked_ms`; a publish given up after `max_blocked_wait_s` has
outcome `blocked_timeout`. The summary block is keyed by producer group; a run in which no
connection was blocked and no publish waited gets `{}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.transforms.stats import stats_struct

from ._stats import stats_block

__all__ = ["blocked_periods", "flow_control_block"]


def blocked_periods(events: list[tuple[int, str, str]], end_ns: int) -> dict[str, list[tuple[int, int]]]:
    """(ts_ns, kind, producer) events -> per producer its [start, end) blocked periods.

    Pure. A block still in force at the end of the trace lasts until `end_ns`; a repeated
    `connection_blocked` (or an unblock without a block) changes nothing.
    """
    periods: dict[str, list[tuple[int, int]]] = {}
    since: dict[str, int] = {}
    for ts, kind, producer in sorted(events):
        if kind == "connection_blocked":
            since.setdefault(producer, ts)
        elif kind == "connection_unblocked" and producer in since:
            periods.setdefault(producer, []).append((since.pop(producer), ts))
    for producer, start in since.items():
        periods.setdefault(producer, []).append((start, max(start, end_ns)))
    return periods


def flow_control_block(
    publishes: DataFrame, events: Iterable[Mapping[str, Any]], end_ns: int
) -> dict[str, dict[str, Any]]:
    """summary.json's `flow_control`: per producer group, blocked periods (from the events' rows)
    and blocked publishes."""
    kinds = ("connection_blocked", "connection_unblocked")
    periods = blocked_periods([(e["ts_ns"], e["kind"], e["source"]) for e in events if e["kind"] in kinds], end_ns)
    blocked = F.col("blocked_ms")
    # Counted per producer in a grouping Spark compiles; the stats only over the publishes that waited,
    # and only if any did (most runs: none), where one grouping with the sketch and a set of names
    # evaluated every publish row by row.
    counts = (
        publishes.groupBy("producer_group", "producer")
        .agg(
            F.count_if(blocked.isNotNull()).alias("waited"),
            F.count_if(F.col("outcome") == "blocked_timeout").alias("timed_out"),
        )
        .collect()
    )
    stats = {}
    if any(r["waited"] for r in counts):
        waits = publishes.where(blocked.isNotNull()).groupBy("producer_group").agg(stats_struct(blocked).alias("s"))
        stats = {r["producer_group"]: r["s"] for r in waits.collect()}
    groups: dict[str, list[Any]] = {}
    for r in counts:
        groups.setdefault(r["producer_group"], []).append(r)
    block: dict[str, dict[str, Any]] = {}
    for group, rows in groups.items():
        mine = [p for r in rows for p in periods.get(r["producer"], [])]
        waited, timed_out = sum(int(r["waited"]) for r in rows), sum(int(r["timed_out"]) for r in rows)
        if not mine and not waited and not timed_out:
            continue
        block[group] = {
            "blocked_periods": len(mine),
            "blocked_s": round(sum(end - start for start, end in mine) / 1e9, 3),
            "first_blocked_ns": min((start for start, _ in mine), default=None),
            "publishes_waited": waited,
            "blocked_timeout": timed_out,
            "blocked_ms": stats_block(stats.get(group)),
        }
    return block
