"""Per-second windows since t0: counts and latency percentiles second by second.

One row per whole second from the first to the last second with any activity
(warm-up and drain included; seconds without activity are filled with zeros).
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame, Window, functions as F

from ._common import NS_PER_S, Transform, is_acked
from .stats import stats_struct

__all__ = ["second_since", "per_second_windows", "WINDOW_SOJOURN_FIELDS", "WINDOW_LATENCY_FIELDS", "COMPONENTS"]

WINDOW_SOJOURN_FIELDS = ("p50", "p95", "p99", "max")
WINDOW_LATENCY_FIELDS = ("p50", "p99")
COMPONENTS = {
    "broker_network": "broker_network_ms",
    "sojourn": "sojourn_ms",
    "socket_wait": "socket_wait_ms",  # a part of the sojourn (the report stacks it apart)
    "processing": "processing_ms_actual",
    "ack_delay": "ack_delay_ms",
}
"""The end-to-end components whose per-second means a window carries (`components_ms`)."""


def second_since(t0_ns: int, time_col: str) -> Column:
    """floor((time - t0) / 1 s), as a long; null when the time is null."""
    return F.floor((F.col(time_col) - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).cast("long")


def per_second_windows(t0_ns: int, publishes: DataFrame) -> Transform:
    """Windows over deliveries that carry the derived latencies (see latency.py).

    published counts publishes by `publish_ns`, delivered deliveries by
    `receive_ns`, acked acks by `settle_ns`; `sojourn_ms` uses the deliveries that
    started processing in the second, `latency_ms` (end to end) those that ended in it, and
    so does `components_ms`: a struct with the mean of each COMPONENTS column (null in a second
    in which no delivery ended). The means ride on the end-to-end grouping, where a grouping of
    their own would scan and shuffle the deliveries once more.
    """

    def _windows(deliveries: DataFrame) -> DataFrame:
        def per_second(frame: DataFrame, time_col: str, *aggs: Column) -> DataFrame:
            counted = frame.where(F.col(time_col).isNotNull())
            return counted.groupBy(second_since(t0_ns, time_col).alias("t_s")).agg(*aggs)

        # One grouping per kind of activity, each over the rows it counts (the cached deliveries are
        # scanned five times, but no row is copied per kind of activity, as an exploded union would).
        kinds = [
            per_second(publishes, "publish_ns", F.count(F.lit(1)).alias("published")),
            per_second(deliveries, "receive_ns", F.count(F.lit(1)).alias("delivered")),
            per_second(deliveries.where(is_acked()), "settle_ns", F.count(F.lit(1)).alias("acked")),
            per_second(
                deliveries,
                "start_ns",
                stats_struct("sojourn_ms", WINDOW_SOJOURN_FIELDS, many_groups=True).alias("sojourn_ms"),
            ),
            per_second(
                deliveries,
                "end_ns",
                stats_struct("end_to_end_ms", WINDOW_LATENCY_FIELDS, many_groups=True).alias("latency_ms"),
                F.struct(*[F.avg(col).alias(name) for name, col in COMPONENTS.items()]).alias("components_ms"),
            ),
        ]
        by_second = functools.reduce(lambda a, b: a.join(b, "t_s", "full"), kinds)
        # Each second with activity also stands for the quiet seconds up to the next one (a window
        # over its few thousand rows in one partition), so the groupings above run once: a join of
        # every second to them ran them twice (10M messages, alternated: 7.7-10.7 s against 10.7-16.2 s).
        upto = F.coalesce(F.lead("t_s").over(Window.orderBy("t_s")) - 1, F.col("t_s"))
        spans = by_second.withColumn("_upto", upto).select(F.explode(F.sequence("t_s", "_upto")).alias("_second"), "*")
        active = F.col("_second") == F.col("t_s")
        return (
            spans.select(
                F.col("_second").alias("t_s"),
                *[F.when(active, F.col(c)).alias(c) for c in by_second.columns if c != "t_s"],
            )
            .fillna(0, subset=["published", "delivered", "acked"])
            .orderBy("t_s")
        )

    return _windows
