"""Per-second windows since t0: counts and latency percentiles second by second.

One row per whole second from the first to the last second with any activity
(warm-up and drain included; seconds without activity are filled with zeros).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from ._common import NS_PER_S, Transform, is_acked
from .stats import stats_struct

__all__ = ["second_since", "per_second_windows", "WINDOW_SOJOURN_FIELDS", "WINDOW_LATENCY_FIELDS"]

WINDOW_SOJOURN_FIELDS = ("p50", "p95", "p99", "max")
WINDOW_LATENCY_FIELDS = ("p50", "p99")


def second_since(t0_ns: int, time_col: str) -> Column:
    """floor((time - t0) / 1 s), as a long; null when the time is null."""
    return F.floor((F.col(time_col) - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).cast("long")


def _activity(kind: str, ts: Column, value: Column | None = None) -> Column:
    return F.struct(
        ts.alias("ts"),
        F.lit(kind).alias("kind"),
        (value if value is not None else F.lit(None)).cast("double").alias("value"),
    )


def per_second_windows(t0_ns: int, publishes: DataFrame) -> Transform:
    """Windows over deliveries that carry the derived latencies (see latency.py).

    published counts publishes by `publish_ns`, delivered deliveries by
    `receive_ns`, acked acks by `settle_ns`; `sojourn_ms` uses the deliveries that
    started processing in the second, `latency_ms` (end to end) those that ended in it.
    """

    def _windows(deliveries: DataFrame) -> DataFrame:
        delivery_activity = deliveries.select(
            F.explode(
                F.array(
                    _activity("deliver", F.col("receive_ns")),
                    _activity("ack", F.when(is_acked(), F.col("settle_ns"))),
                    _activity("sojourn", F.col("start_ns"), F.col("sojourn_ms")),
                    _activity("latency", F.col("end_ns"), F.col("end_to_end_ms")),
                )
            ).alias("a")
        ).select("a.*")
        publish_activity = publishes.select(_activity("publish", F.col("publish_ns")).alias("a")).select("a.*")
        activity = (
            delivery_activity.unionByName(publish_activity)
            .where(F.col("ts").isNotNull())
            .withColumn("t_s", second_since(t0_ns, "ts"))
        )
        by_second = activity.groupBy("t_s").agg(
            F.count_if(F.col("kind") == "publish").alias("published"),
            F.count_if(F.col("kind") == "deliver").alias("delivered"),
            F.count_if(F.col("kind") == "ack").alias("acked"),
            stats_struct(F.when(F.col("kind") == "sojourn", F.col("value")), WINDOW_SOJOURN_FIELDS).alias("sojourn_ms"),
            stats_struct(F.when(F.col("kind") == "latency", F.col("value")), WINDOW_LATENCY_FIELDS).alias("latency_ms"),
        )
        all_seconds = by_second.agg(F.min("t_s").alias("first"), F.max("t_s").alias("last")).select(
            F.explode(F.sequence("first", "last")).alias("t_s")
        )
        return (
            all_seconds.join(by_second, on="t_s", how="left")
            .fillna(0, subset=["published", "delivered", "acked"])
            .orderBy("t_s")
        )

    return _windows
