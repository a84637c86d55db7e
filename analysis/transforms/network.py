"""The network impairment as the proxy recorded it: periods with their settings, and its self-measurement.

The proxy writes a `network_change` event at each step of its timeline (detail: the
whole state in force, with the step's scheduled `at_s`), `network_reset` when
established connections were reset, and `proxy_stats` per direction for each period
(`scope: period`) and for its whole run (`scope: run`). With several proxies (one per
load-generating process) each step is recorded once per proxy: periods are keyed by
the scheduled `at_s`, and measurements are combined: counts and bytes add up, p50s
and means are count-weighted means of the proxies' values, p99s and maxima are the
largest (exact with one proxy, which is the usual case).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window, functions as F
from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

from ._common import Transform

__all__ = ["NETWORK_EVENT_KINDS", "DIRECTIONS", "impairment_periods", "proxy_measurements"]

NETWORK_EVENT_KINDS = ("network_change", "network_down", "network_up", "network_reset")
DIRECTIONS = ("upstream", "downstream")

_LINK = StructType(
    [
        StructField("latency_ms", DoubleType()),
        StructField("jitter_ms", DoubleType()),
        StructField("bandwidth_bytes_per_s", DoubleType()),
    ]
)
_STATE = StructType(
    [
        StructField("at_s", DoubleType()),
        StructField("phase", StringType()),
        StructField("down", BooleanType()),
        StructField("reset_peer", BooleanType()),
        StructField("upstream", _LINK),
        StructField("downstream", _LINK),
    ]
)
_STATS = StructType(
    [
        StructField(name, kind)
        for name, kind in (
            ("scope", StringType()),
            ("direction", StringType()),
            ("at_s", DoubleType()),
            ("count", LongType()),
            ("bytes", LongType()),
            ("dropped", LongType()),
            ("error_p50_ms", DoubleType()),
            ("error_p99_ms", DoubleType()),
            ("error_max_ms", DoubleType()),
            ("delay_p50_ms", DoubleType()),
            ("delay_p99_ms", DoubleType()),
            ("delay_mean_ms", DoubleType()),
        )
    ]
)

MEASUREMENT_FIELDS = (
    "proxies",
    "count",
    "bytes",
    "dropped",
    "error_p50_ms",
    "error_p99_ms",
    "error_max_ms",
    "delay_p50_ms",
    "delay_p99_ms",
    "delay_mean_ms",
)


def _weighted(name: str) -> Column:
    return F.round(F.sum(F.col(name) * F.col("count")) / F.sum(F.when(F.col(name).isNotNull(), F.col("count"))), 4)


def _combined() -> list[Column]:
    """Aggregates that merge several proxies' measurements of one direction (see module doc)."""
    return [
        F.countDistinct("worker").alias("proxies"),
        F.sum("count").alias("count"),
        F.sum("bytes").alias("bytes"),
        F.sum("dropped").alias("dropped"),
        _weighted("error_p50_ms").alias("error_p50_ms"),
        F.max("error_p99_ms").alias("error_p99_ms"),
        F.max("error_max_ms").alias("error_max_ms"),
        _weighted("delay_p50_ms").alias("delay_p50_ms"),
        F.max("delay_p99_ms").alias("delay_p99_ms"),
        _weighted("delay_mean_ms").alias("delay_mean_ms"),
    ]


def _stats_rows(events: DataFrame, scope: str) -> DataFrame:
    return (
        events.where((F.col("kind") == "proxy_stats") & F.col("detail").isNotNull())
        .select("worker", F.from_json("detail", _STATS).alias("s"))
        .where(F.col("s.scope") == scope)
        .select("worker", "s.*")
    )


def proxy_measurements(scope: str = "run") -> Transform:
    """Events -> one row per direction (and per period's `at_s` for scope 'period')."""
    keys = ["direction"] if scope == "run" else ["at_s", "direction"]

    def _measurements(events: DataFrame) -> DataFrame:
        return _stats_rows(events, scope).groupBy(*keys).agg(*_combined()).orderBy(*keys)

    return _measurements


def impairment_periods(end_s: float) -> Transform:
    """Events -> one row per impairment period, in time order.

    Columns: start_s, end_s (the next step's start, else `end_s`: the end of the run),
    phase, down, reset (connections were reset as it began), upstream and downstream
    (structs: latency_ms, jitter_ms, bandwidth_bytes_per_s, and `measured`: the
    proxies' period measurement of that direction, or null).
    """

    def _periods(events: DataFrame) -> DataFrame:
        changes = (
            events.where((F.col("kind") == "network_change") & F.col("detail").isNotNull())
            .select("ts_ns", F.from_json("detail", _STATE).alias("d"))
            .where(F.col("d.at_s").isNotNull())
        )
        steps = changes.groupBy(F.col("d.at_s").alias("start_s")).agg(F.min_by("d", "ts_ns").alias("d"))
        resets = (
            events.where(F.col("kind") == "network_reset")
            .select(F.from_json("detail", _STATE)["at_s"].alias("start_s"))
            .where(F.col("start_s").isNotNull())
            .distinct()
            .withColumn("reset", F.lit(True))
        )
        measured = _stats_rows(events, "period").groupBy("at_s", "direction").agg(*_combined())
        per_direction = {
            d: measured.where(F.col("direction") == d).select(
                F.col("at_s").alias("start_s"), F.struct(*MEASUREMENT_FIELDS).alias(f"{d}_measured")
            )
            for d in DIRECTIONS
        }
        order = Window.partitionBy(F.lit(0)).orderBy("start_s")  # a handful of rows: one partition
        periods = steps.join(resets, "start_s", "left")
        for d in DIRECTIONS:
            periods = periods.join(per_direction[d], "start_s", "left")
        return periods.select(
            "start_s",
            F.coalesce(F.lead("start_s").over(order), F.greatest(F.lit(float(end_s)), F.col("start_s"))).alias("end_s"),
            F.col("d.phase").alias("phase"),
            F.coalesce(F.col("d.down"), F.lit(False)).alias("down"),
            F.coalesce(F.col("reset"), F.lit(False)).alias("reset"),
            *[
                F.struct(
                    F.col(f"d.{d}.latency_ms").alias("latency_ms"),
                    F.col(f"d.{d}.jitter_ms").alias("jitter_ms"),
                    F.col(f"d.{d}.bandwidth_bytes_per_s").alias("bandwidth_bytes_per_s"),
                    F.col(f"{d}_measured").alias("measured"),
                ).alias(d)
                for d in DIRECTIONS
            ],
        ).orderBy("start_s")

    return _periods
