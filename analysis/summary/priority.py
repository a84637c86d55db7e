"""Per priority class: how many were published, acked and discarded, and how long they waited.

A message's class is the AMQP priority its publish carried (`publish.priority`; null: none).
Only runs where some publish carried a priority get the block (summary.json `priorities`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, functions as F

from analysis.buckets import Histogram
from analysis.cube import Cells, Projection, cube
from analysis.transforms._common import is_acked

from ._stats import stats_block

__all__ = ["carries_priorities", "priority_rows"]

_LATENCIES = ("sojourn_ms", "end_to_end_ms")


def carries_priorities(publishes: DataFrame) -> bool:
    """Whether some publish carried a priority: the runs that get the block."""
    return publishes.where(F.col("priority").isNotNull()).limit(1).count() > 0


def priority_rows(deliveries: DataFrame, classified: DataFrame, discard_classes: Sequence[str]) -> list[dict]:
    """One dict per priority (ascending; no priority first) of a run where some publish carried one
    (carries_priorities: the caller asks).

    `classified` is accounting's one row per message id with its `account` class and the
    `priority` its publish carried (accounting.classify); a message counts as discarded when its
    class is in `discard_classes`. Latencies are over acked deliveries after the warm-up
    (`measured`), like the run's overall statistics: log-bucket histograms.

    One cube (one Spark action) over the ids' classes and, below them, the acked deliveries with
    their publish's priority: the counts a grouping of its cells, each latency a projection.
    """
    classes = classified.select("message_id", "priority")
    # The publish's priority names the class; the delivery's own column (schema 4) would clash.
    acked = (
        deliveries.drop("priority")
        .where(is_acked() & F.col("measured"))
        .join(classes, "message_id", "left")
        .select("priority", *_LATENCIES, F.lit(None).cast("string").alias("account"))
    )
    both = classified.select("priority", "account", *[F.lit(None).cast("double").alias(m) for m in _LATENCIES])
    rows = both.withColumn("_class", F.lit(True)).unionByName(acked.withColumn("_class", F.lit(False)))
    is_class = F.col("_class")
    counts = Cells(
        {"priority": F.col("priority")},
        {
            "published": F.count_if(is_class),
            "acked": F.count_if(is_class & (F.col("account") == "acked")),
            "discarded": F.count_if(is_class & F.col("account").isin(*discard_classes)),
            # in the broker: left in the queue, or in a stream not yet read by every group that reads it
            "left_in_broker": F.count_if(is_class & F.col("account").isin("left_in_broker", "not_yet_read")),
        },
        name="priorities",
    )
    latencies = [Projection(m, ~is_class, [F.col("priority")], F.col(m)) for m in _LATENCIES]
    figures = cube(rows, latencies, [counts])
    # a projection's keys are strings: the priorities back as the ints the cells keep
    waits = {m: {(int(k) if k is not None else None): h for k, h in figures.histograms(m).items()} for m in _LATENCIES}
    out = []
    for c in sorted(figures.cells("priorities"), key=lambda c: (c["priority"] is not None, c["priority"])):
        if not c["published"]:  # acked deliveries of an id no publish row names: no class of its own
            continue
        priority = c["priority"]
        out.append(
            {
                "priority": priority,
                "published": int(c["published"]),
                "acked": int(c["acked"]),
                "discarded": int(c["discarded"]),
                "left_in_broker": int(c["left_in_broker"]),
                **{m: stats_block(waits[m].get(priority, Histogram.empty()).stats()) for m in _LATENCIES},
            }
        )
    return out
