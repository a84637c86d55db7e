"""Warm-up exclusion: latency statistics only use messages *intended* after the warm-up.

Deliveries do not carry the intended send time, so it is joined in from the
publish trace by message id.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform, few

__all__ = ["attach_intended_ns", "attach_publish_times", "attach_measured", "looks_up", "mark_measured"]


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
        return joined.withColumns(
            {
                "intended_ns": F.coalesce("_pub_intended_ns", "publish_ns", "receive_ns"),
                "publish_ns": F.coalesce("publish_ns", "_pub_publish_ns"),
            }
        ).drop("_pub_intended_ns", "_pub_publish_ns")

    return _attach


def looks_up(warmup_end_ns: int) -> Column:
    """True for a message_facts row whose deliveries attach_measured sends to its publish times:
    published more than once, intended and published on both sides of the warm-up's end, or
    delivered without the publish-time header (`_headless`)."""
    end = F.lit(warmup_end_ns)
    straddles = ~(F.col("_pub_intended_ns") >= end).eqNullSafe(F.col("_pub_publish_ns") >= end)
    return (F.col("_publishes") > 1) | straddles | F.coalesce("_headless", F.lit(False))


def attach_measured(by_id: DataFrame, warmup_end_ns: int) -> Transform:
    """attach_publish_times(by_id) then mark_measured(warmup_end_ns), the result the same, without
    moving every delivery to its publish: `publish_ns` filled from the publish trace where the
    header is missing, and `measured`.

    A delivery's header `publish_ns` is the time its publish row recorded (the producer sends the
    value it traces), so the header decides the warm-up as the publish's `intended_ns` does, except
    for the few ids whose intended and publish times lie on both sides of the warm-up's end, ids
    published more than once, and deliveries without the header. Only those look their publish
    times up: a list small enough to send to every task (a broadcast join), where joining every
    delivery to its publish shuffled the whole delivery trace.

    `by_id` is accounting.message_facts or its ledger (one row per id looked up, `_publishes`, the
    earliest publish times and `_headless`: a delivery of the id came without the header); it holds
    no `intended_ns` column: the warm-up is decided here.
    """
    end = F.lit(warmup_end_ns)
    lookups = by_id.where((F.col("_publishes") > 0) & looks_up(warmup_end_ns)).select(
        "message_id", "_pub_intended_ns", "_pub_publish_ns"
    )

    def _attach(deliveries: DataFrame) -> DataFrame:
        intended = F.coalesce("_pub_intended_ns", "publish_ns", "receive_ns")
        return (
            deliveries.join(few(lookups), "message_id", "left")
            .withColumns(
                {
                    "measured": F.coalesce(intended >= end, F.lit(False)),
                    "publish_ns": F.coalesce("publish_ns", "_pub_publish_ns"),
                }
            )
            .drop("_pub_intended_ns", "_pub_publish_ns")
        )

    return _attach


def mark_measured(warmup_end_ns: int, time_col: str = "intended_ns") -> Transform:
    """Add boolean `measured`: true when `time_col` is at or after the end of the warm-up."""

    def _mark(df: DataFrame) -> DataFrame:
        return df.withColumn("measured", F.coalesce(F.col(time_col) >= F.lit(warmup_end_ns), F.lit(False)))

    return _mark
