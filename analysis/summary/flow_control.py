"""Producer flow control: when the broker blocked producers' connections, and what it cost them.

RabbitMQ blocks a publishing connection while a memory or disk alarm is in force
(`connection.blocked` / `connection.unblocked`; docs/queueing.md). Producers trace both as events
and every publish's wait as `blocked_ms`; a publish given up after `max_blocked_wait_s` has
outcome `blocked_timeout`. The summary block is keyed by producer group; a run in which no
connection was blocked and no publish waited gets `{}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import functions as F

from analysis.buckets import merge
from analysis.cube import Cube, Projection

__all__ = ["blocked_periods", "flow_control_block", "flow_control_projections"]


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


def flow_control_projections() -> list[Projection]:
    """What the block needs of every publish, per (producer group, producer) (analysis.cube):
    `producers` (every row counted, the histogram of `blocked_ms` over the publishes that waited
    on a blocked connection) and `blocked_timeout` (publishes given up while blocked)."""
    keys = [F.col("producer_group"), F.col("producer")]
    return [
        Projection("producers", F.lit(True), keys, F.col("blocked_ms")),
        Projection("blocked_timeout", F.col("outcome") == "blocked_timeout", keys),
    ]


def flow_control_block(
    publish_cube: Cube, events: Iterable[Mapping[str, Any]], end_ns: int
) -> dict[str, dict[str, Any]]:
    """summary.json's `flow_control`: per producer group, blocked periods (from the events' rows)
    and blocked publishes (`publish_cube`: the publishes' cube with flow_control_projections)."""
    kinds = ("connection_blocked", "connection_unblocked")
    periods = blocked_periods([(e["ts_ns"], e["kind"], e["source"]) for e in events if e["kind"] in kinds], end_ns)
    waits, timed_out = publish_cube.histograms("producers", by=2), publish_cube.counts("blocked_timeout", by=2)
    producers: dict[str, list[str]] = {}
    for group, producer in sorted(publish_cube.counts("producers", by=2), key=lambda k: (k[0], k[1] or "")):
        producers.setdefault(group, []).append(producer)
    block: dict[str, dict[str, Any]] = {}
    for group, names in producers.items():
        mine = [p for producer in names for p in periods.get(producer, [])]
        n_waited = sum(waits[group, producer].n for producer in names if (group, producer) in waits)
        n_timed_out = sum(timed_out.get((group, producer), 0) for producer in names)
        if not mine and not n_waited and not n_timed_out:
            continue
        block[group] = {
            "blocked_periods": len(mine),
            "blocked_s": round(sum(end - start for start, end in mine) / 1e9, 3),
            "first_blocked_ns": min((start for start, _ in mine), default=None),
            "publishes_waited": n_waited,
            "blocked_timeout": n_timed_out,
            "blocked_ms": merge(*[waits[group, producer] for producer in names if (group, producer) in waits]).stats(),
        }
    return block
