"""The run's timeline of events (phase changes, consumers joining, queue depth ...)."""

from __future__ import annotations

from pyspark.sql import DataFrame, functions as F

from ._common import NS_PER_S, Transform

__all__ = ["timeline_events"]


def timeline_events(t0_ns: int) -> Transform:
    """Events in time order with `t_s`, seconds since t0 (a double)."""

    def _events(events: DataFrame) -> DataFrame:
        return (
            events.select(
                ((F.col("ts_ns") - F.lit(t0_ns)) / F.lit(float(NS_PER_S))).alias("t_s"),
                "kind",
                "name",
                "source",
                "value",
                "detail",
                "ts_ns",
            )
            .orderBy("ts_ns", "kind", "name", "source")
            .drop("ts_ns")
        )

    return _events
