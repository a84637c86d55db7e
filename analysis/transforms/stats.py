"""The names of summary.json's stats blocks: count, mean, the percentiles and max.

Every percentile comes from a log-bucket histogram (analysis.buckets, aggregated by the cubes of
analysis.cube): within buckets.RELATIVE_ERROR of the exact value, as summary.json's `percentiles`
says.
"""

from __future__ import annotations

__all__ = ["STAT_FIELDS", "PERCENTILES", "QUANTILES"]

PERCENTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99}
STAT_FIELDS = ("count", "mean", *PERCENTILES, "max")
QUANTILES = tuple(round(0.05 * i, 2) for i in range(1, 21))
"""Per-consumer sojourn quantiles: 0.05, 0.10, ..., 1.00 (the last is the max)."""
