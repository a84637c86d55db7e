"""Warm-up exclusion: latency statistics only use messages *intended* after the warm-up.

Deliveries do not carry the intended send time, so it is joined in from the
publish trace by message id.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ._common import Transform

__all__ = ["attach_intended_ns", "attach_publish_times", "mark_measured"]


def attach_intended_ns(publishes: DataFrame) -> Transform:
    """Add `intended_ns` to deliveries from the publish of the same message id.

    A delivery with no matching publish (a foreign message, or a publish trace
    that was lost) falls back to its `publish_ns` header and then to its
    `receive_ns`, so it still counts once the run is past the warm-up. A missing
    `publish_ns` header is also filled from the publish trace.
    """
    by_id = publishes.groupBy("message_id").agg(
        F.min("intended_ns").alias("_pub_intended_ns"),
        F.min("publish_ns").alias("_pub_publish_ns"),
    )
    return attach_publish_times(by_id)


def attach_publish_times(by_id: DataFrame) -> Transform:
    """attach_intended_ns from a frame that already holds one row per message id with
    `_pub_intended_ns` and `_pub_publish_ns` (accounting.message_facts does). That frame is the
    hash join's build side: the deliveries are shuffled to it, never sorted."""
    times = by_id.select("message_id", "_pub_intended_ns", "_pub_publish_ns").hint("shuffle_hash")

    def _attach(deliveries: DataFrame) -> DataFrame:
        joined = deliveries.join(times, on="message_id", how="left")
        return (
            joined.withColumns({
                "intended_ns": F.coalesce("_pub_intended_ns", "publish_ns", "receive_ns"),
                "publish_ns": F.coalesce("publish_ns", "_pub_publish_ns"),
            })
            .drop("_pub_intended_ns", "_pub_publish_ns")
        )

    return _attach


def mark_measured(warmup_end_ns: int, time_col: str = "intended_ns") -> Transform:
    """Add boolean `measured`: true when `time_col` is at or after the end of the warm-up."""
    def _mark(df: DataFrame) -> DataFrame:
        return df.withColumn("measured", F.coalesce(F.col(time_col) >= F.lit(warmup_end_ns), F.lit(False)))
    return _mark
