"""Per priority class: how many were published, acked and discarded, and how long they waited.

A message's class is the AMQP priority its publish carried (`publish.priority`; null: none).
Only runs where some publish carried a priority get the block (summary.json `priorities`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, functions as F

from analysis.transforms._common import is_acked
from analysis.transforms.stats import stats_by

from ._stats import stats_block

__all__ = ["carries_priorities", "priority_rows"]

_LATENCIES = {"sojourn_ms": "sojourn_ms", "end_to_end_ms": "end_to_end_ms"}


def carries_priorities(publishes: DataFrame) -> bool:
    """Whether some publish carried a priority: the runs that get the block."""
    return publishes.where(F.col("priority").isNotNull()).limit(1).count() > 0


def priority_rows(
    publishes: DataFrame, deliveries: DataFrame, classified: DataFrame, discard_classes: Sequence[str]
) -> list[dict]:
    """One dict per priority (ascending; no priority first) or [] when no publish had one.

    `classified` is accounting's one row per message id with its `account` class and the
    `priority` its publish carried (accounting.classify); a message
    counts as discarded when its class is in `discard_classes`. Latencies are over acked
    deliveries after the warm-up (`measured`), like the run's overall statistics.
    """
    if not carries_priorities(publishes):
        return []
    classes = classified.select("message_id", "priority")
    counts = {
        r["priority"]: r
        for r in classified.groupBy("priority")
        .agg(
            F.count(F.lit(1)).alias("published"),
            F.count_if(F.col("account") == "acked").alias("acked"),
            F.count_if(F.col("account").isin(*discard_classes)).alias("discarded"),
            F.count_if(F.col("account") == "left_in_broker").alias("left_in_broker"),
        )
        .collect()
    }
    # The publish's priority names the class; the delivery's own column (schema 4) would clash.
    acked = deliveries.drop("priority").where(is_acked() & F.col("measured")).join(classes, "message_id", "left")
    latency = {r["priority"]: r for r in acked.transform(stats_by(["priority"], _LATENCIES)).collect()}
    out = []
    for priority in sorted(counts, key=lambda p: (p is not None, p)):
        c, lat = counts[priority], latency.get(priority)
        out.append(
            {
                "priority": priority,
                "published": int(c["published"]),
                "acked": int(c["acked"]),
                "discarded": int(c["discarded"]),
                "left_in_broker": int(c["left_in_broker"]),
                **{name: stats_block(lat[name] if lat is not None else None) for name in _LATENCIES},
            }
        )
    return out
