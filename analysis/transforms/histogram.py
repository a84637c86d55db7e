"""The sojourn histogram: about 40 linear bins on "nice" edges chosen from the data.

Edges start at 0 (or below, should a value be negative) and step by the
smallest width from the 1-2-2.5-5 x 10^k series that covers the largest value in
at most `bins` bins. Bins are [edge_i, edge_i+1), the last one closed, like numpy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, functions as F

from ._common import Transform, as_column

__all__ = ["DEFAULT_BINS", "histogram_edges", "histogram_counts"]

DEFAULT_BINS = 40
_NICE = (1.0, 2.0, 2.5, 5.0, 10.0)


def _nice_width(raw: float) -> float:
    exp = math.floor(math.log10(raw))
    for m in _NICE:
        width = m * 10.0**exp
        if width >= raw * (1 - 1e-12):
            return width
    return 10.0 ** (exp + 1)  # pragma: no cover - 10 x 10^exp always covers


def histogram_edges(min_value: float | None, max_value: float | None, bins: int = DEFAULT_BINS) -> list[float]:
    """Bin edges covering [min(0, min_value), max_value]; [0.0, 1.0] when there is no data."""
    if min_value is None or max_value is None:
        return [0.0, 1.0]
    lo, hi = min(0.0, min_value), max(0.0, max_value)
    if hi == lo:
        return [lo, lo + 1.0]
    width = _nice_width((hi - lo) / bins)
    start = math.floor(lo / width) * width
    n = max(1, math.ceil((hi - start) / width - 1e-9))
    return [round(start + i * width, 9) for i in range(n + 1)]


def histogram_counts(edges: Sequence[float], value: str | Column) -> Transform:
    """(bin, count) rows for the non-null values; bin i is [edges[i], edges[i+1]).

    The bin is the number of inner edges at or below the value: plain comparisons,
    so a value sitting exactly on an edge lands in the bin that edge opens.
    """
    col = as_column(value)

    def _counts(df: DataFrame) -> DataFrame:
        bin_index: Column = F.lit(0)
        for edge in edges[1:-1]:
            bin_index = bin_index + (col >= F.lit(float(edge))).cast("int")
        return (
            df.where(col.isNotNull())
            .select(bin_index.alias("bin"))
            .groupBy("bin")
            .agg(F.count(F.lit(1)).alias("count"))
            .orderBy("bin")
        )

    return _counts
