"""summary.json's `slow_consumers` block: transforms.slow_consumers's samples per consumer and minute,
collected and ranked worst first (docs/slow-consumers.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, functions as F

from analysis.events.queue import sampling
from analysis.transforms._common import local_rows
from analysis.transforms.slow_consumers import SPANS_SCHEMA, consumer_spans, slow_consumer_samples

__all__ = ["slow_consumers_block"]


def _share(slow: int, sampled: int) -> float | None:
    return slow / sampled if sampled else None


def slow_consumers_block(
    deliveries: DataFrame,
    events: DataFrame,
    samples: Sequence[Mapping[str, Any]],
    t0_ns: int,
    partials: DataFrame | None = None,
) -> dict[str, Any]:
    """summary.json's `slow_consumers` (docs/summary.md); {} when the run has no queue samples.
    `samples`: the events' queue samples (events.queue.queue_samples). `partials`: the consumer
    partials with consumer_span_parts, when the job has them (consumer_spans)."""
    if not samples:
        return {}
    spans = consumer_spans(deliveries, events, partials).orderBy("consumer").collect()  # a row per consumer
    spans_frame = local_rows(deliveries.sparkSession, [tuple(r) for r in spans], SPANS_SCHEMA)
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
