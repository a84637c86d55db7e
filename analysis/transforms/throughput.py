"""Throughput's measurement window [t0 + warm-up, end); the rates over it roll up from the cubes
(summary.deliveries)."""

from __future__ import annotations

from pyspark.sql import Column, functions as F

from ._common import seconds_to_ns

__all__ = ["measurement_window_ns", "in_window"]


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
