"""Throughput: mean events per second over the measurement window [t0 + warm-up, end)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, functions as F

from ._common import NS_PER_S, Transform, is_acked, seconds_to_ns

__all__ = ["measurement_window_ns", "in_window", "window_counts", "window_rates", "throughput", "DELIVERY_COUNTS"]

DELIVERY_COUNTS = ("delivered", "acked")
"""The names of window_counts' delivery columns: counts, which partial groups' rows sum up."""


def measurement_window_ns(
    t0_ns: int, warmup_s: float, duration_s: float, ended_ns: int | None = None
) -> tuple[int, int]:
    """[t0 + warmup_s, t0 + duration_s), cut short at `ended_ns` for an interrupted run."""
    start = t0_ns + seconds_to_ns(warmup_s)
    end = t0_ns + seconds_to_ns(duration_s)
    if ended_ns is not None and ended_ns < end:
        end = ended_ns
    return start, end


def in_window(time_col: str, start_ns: int, end_ns: int) -> Column:
    """True when `time_col` is in [start_ns, end_ns); false (not null) for a null time."""
    t = F.col(time_col)
    return F.coalesce((t >= F.lit(start_ns)) & (t < F.lit(end_ns)), F.lit(False))


def window_counts(start_ns: int, end_ns: int) -> tuple[list[Column], list[Column]]:
    """The aggregate columns throughput counts in [start_ns, end_ns): over the publishes
    (`published`, by publish_ns) and over the deliveries (`delivered` by receive_ns, `acked`:
    acked deliveries by settle_ns), to add to an aggregation that reads those rows anyway."""
    published = [F.count_if(in_window("publish_ns", start_ns, end_ns)).alias("published")]
    received, acked = DELIVERY_COUNTS
    delivered = [
        F.count_if(in_window("receive_ns", start_ns, end_ns)).alias(received),
        F.count_if(is_acked() & in_window("settle_ns", start_ns, end_ns)).alias(acked),
    ]
    return published, delivered


def window_rates(start_ns: int, end_ns: int) -> list[Column]:
    """publish_per_s, deliver_per_s and ack_per_s from window_counts' columns; null rates for an
    empty window."""
    seconds = (end_ns - start_ns) / NS_PER_S

    def _rate(count: str) -> Column:
        return (F.col(count) / F.lit(seconds)) if seconds > 0 else F.lit(None).cast("double")

    return [
        _rate("published").alias("publish_per_s"),
        _rate("delivered").alias("deliver_per_s"),
        _rate("acked").alias("ack_per_s"),
    ]


def throughput(start_ns: int, end_ns: int, publishes: DataFrame) -> Transform:
    """One row: publish_per_s (by publish_ns), deliver_per_s (by receive_ns) and
    ack_per_s (acked deliveries by settle_ns). Null rates for an empty window."""
    published, delivered = window_counts(start_ns, end_ns)

    def _throughput(deliveries: DataFrame) -> DataFrame:
        return publishes.agg(*published).crossJoin(deliveries.agg(*delivered)).select(*window_rates(start_ns, end_ns))

    return _throughput
