"""Log-bucket histograms: mergeable latency percentiles with a bounded relative error.

A value v falls in bucket `bucket_of(v)`: 0 for v == 0, else ±(BUCKET_OFFSET + k) with the sign of v,
where GAMMA**k <= |v| < GAMMA**(k+1). A histogram keeps, per bucket, the count, sum, min and max of
its values; histograms of parts of the data merge into the histogram of the whole (counts and sums
add, min of mins, max of maxes). Count, mean, min and max are exact (the mean up to float
summation). A percentile is Spark's `percentile` (numpy's "linear"): it interpolates at
h = (n - 1) * q between the order statistics x_floor(h) and x_ceil(h). Each order statistic is
estimated from its bucket: the bucket's first and last values are exactly its min and max, one in
between is the bucket's harmonic midpoint 2 * lo * hi / (lo + hi) clamped to [min, max] (mirrored
below 0; bucket 0 is exactly 0), so it is within RELATIVE_ERROR of the exact order statistic,
relative to it. An interpolated percentile between two order statistics of the same sign is then
within RELATIVE_ERROR of the exact interpolated value; between two of opposite signs, within
RELATIVE_ERROR * max(|x_floor(h)|, |x_ceil(h)|).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "GAMMA",
    "RELATIVE_ERROR",
    "BUCKET_OFFSET",
    "LN_GAMMA",
    "bucket_of",
    "Histogram",
    "merge",
    "describe",
]

GAMMA = 1.01
"""The ratio between a bucket's upper and lower bound."""

RELATIVE_ERROR = (GAMMA - 1) / (GAMMA + 1)
"""(GAMMA - 1) / (GAMMA + 1), about 0.4975 %: the largest relative distance from a bucket's harmonic
midpoint 2 * lo * hi / (lo + hi) to a value in [lo, hi] (reached at lo and at hi), hence the bound
on an estimated order statistic."""

BUCKET_OFFSET = 100_000
"""Added to floor(ln|v| / ln GAMMA) so that every nonzero finite float64 has a bucket index of at
least 1 in magnitude (the smallest subnormal, 5e-324, has floor -74,816); without it, values below
1 would share bucket indices with 0 and with values of the opposite sign. Spark computes the same index as
`F.when(v == 0, 0).otherwise(F.signum(v).cast("long") * (BUCKET_OFFSET + F.floor(F.log(F.abs(v)) / LN_GAMMA)))`."""

LN_GAMMA = math.log(GAMMA)
"""ln(GAMMA), the divisor of the bucket index."""

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Values = npt.ArrayLike


def bucket_of(values: npt.ArrayLike) -> Ints:
    """The bucket index of each value (int64 ns or float ms): 0 for 0, else
    sign(v) * (BUCKET_OFFSET + floor(ln|v| / ln GAMMA))."""
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise ValueError("values must be finite")
    out = np.zeros(v.shape, dtype=np.int64)
    nz = v != 0
    exponent = np.floor(np.log(np.abs(v[nz])) / LN_GAMMA).astype(np.int64)
    out[nz] = np.where(v[nz] > 0, 1, -1) * (BUCKET_OFFSET + exponent)
    return out


def _estimates(bucket: Ints, lo: Floats, hi: Floats) -> Floats:
    """Each bucket's harmonic midpoint 2 * G**k * G**(k+1) / (G**k + G**(k+1)), clamped to [lo, hi]."""
    k = (np.abs(bucket) - BUCKET_OFFSET).astype(np.float64)
    with np.errstate(over="ignore", under="ignore"):
        mid = np.sign(bucket) * np.power(GAMMA, k) * (2 * GAMMA / (1 + GAMMA))
    return np.clip(mid, lo, hi)


@dataclass(frozen=True, eq=False)
class Histogram:
    """Per-bucket count, sum, min and max, sorted by bucket, one entry per bucket, every count > 0.

    Build it with `of`, `from_columns`, `merge` or `empty`; its arrays are read-only."""

    buckets: Ints
    counts: Ints
    sums: Floats
    mins: Floats
    maxs: Floats

    def __post_init__(self) -> None:
        arrays = (self.buckets, self.counts, self.sums, self.mins, self.maxs)
        if any(a.ndim != 1 or len(a) != len(self.buckets) for a in arrays):
            raise ValueError("a histogram's arrays are 1-D and of the same length")
        if (np.diff(self.buckets) <= 0).any() or (self.counts <= 0).any():
            raise ValueError("a histogram's buckets are strictly increasing and its counts positive")
        for a in arrays:
            a.setflags(write=False)

    @classmethod
    def empty(cls) -> Histogram:
        """The histogram of no values."""
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), *(np.empty(0, np.float64) for _ in range(3)))

    @classmethod
    def of(cls, values: npt.ArrayLike) -> Histogram:
        """The histogram of raw values (any shape; int64 ns or float ms)."""
        v = np.asarray(values, dtype=np.float64).ravel()
        return cls.from_columns(bucket_of(v), np.ones(len(v), np.int64), v, v, v)

    @classmethod
    def from_columns(cls, buckets: Values, counts: Values, sums: Values, mins: Values, maxs: Values) -> Histogram:
        """Partial rows (unsorted, several per bucket) merged by bucket; rows with count 0 are dropped."""
        b, c = np.asarray(buckets, np.int64).ravel(), np.asarray(counts, np.int64).ravel()
        s, lo, hi = (np.asarray(a, np.float64).ravel() for a in (sums, mins, maxs))
        rows = np.flatnonzero(c > 0)
        rows = rows[np.argsort(b[rows], kind="stable")]
        b, c, s, lo, hi = b[rows], c[rows], s[rows], lo[rows], hi[rows]
        if len(b) == 0:
            return cls.empty()
        starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        return cls(
            b[starts],
            np.add.reduceat(c, starts),
            np.add.reduceat(s, starts),
            np.minimum.reduceat(lo, starts),
            np.maximum.reduceat(hi, starts),
        )

    @property
    def n(self) -> int:
        """The number of values."""
        return int(self.counts.sum())

    def mean(self) -> float | None:
        n = self.n
        return float(self.sums.sum()) / n if n else None

    def min(self) -> float | None:
        return float(self.mins[0]) if len(self.mins) else None

    def max(self) -> float | None:
        return float(self.maxs[-1]) if len(self.maxs) else None

    def quantiles(self, qs: Sequence[float] | npt.ArrayLike) -> list[float | None]:
        """Spark's `percentile` (numpy's "linear") at each q in [0, 1], from estimated order statistics."""
        q = np.asarray(qs, dtype=np.float64).ravel()
        if ((q < 0) | (q > 1) | np.isnan(q)).any():
            raise ValueError(f"quantiles must be in [0, 1], got {qs!r}")
        n = self.n
        if n == 0:
            return [None] * len(q)
        h = (n - 1) * q
        below, above = np.floor(h).astype(np.int64), np.ceil(h).astype(np.int64)
        x_below, x_above = self._order_statistics(below), self._order_statistics(above)
        interpolated = x_below + (h - below) * (x_above - x_below)
        return [float(x) for x in np.where(x_below == x_above, x_below, interpolated)]

    def _order_statistics(self, ranks: Ints) -> Floats:
        """The estimated value of each 0-based rank: its bucket's min for the bucket's first value,
        its max for the last, its clamped harmonic midpoint in between."""
        ends = np.cumsum(self.counts)
        i = np.searchsorted(ends, ranks, side="right")
        within = ranks - (ends[i] - self.counts[i])
        lo, hi = self.mins[i], self.maxs[i]
        inner = _estimates(self.buckets[i], lo, hi)
        return np.where(within == 0, lo, np.where(within == self.counts[i] - 1, hi, inner))

    def stats(self, qs: Sequence[float] = (0.5, 0.95, 0.99)) -> dict[str, Any]:
        """{"count", "mean", "p50", "p95", "p99", "max"} (a pNN key per q: p99_9 for 0.999); None but
        count when there are no values."""
        return {
            "count": self.n,
            "mean": self.mean(),
            **{f"p{q * 100:.10g}".replace(".", "_"): x for q, x in zip(qs, self.quantiles(qs))},
            "max": self.max(),
        }


def merge(*histograms: Histogram) -> Histogram:
    """The histogram of all the histograms' values."""
    if not histograms:
        return Histogram.empty()
    columns = zip(*((h.buckets, h.counts, h.sums, h.mins, h.maxs) for h in histograms))
    return Histogram.from_columns(*(np.concatenate(c) for c in columns))


def describe() -> dict[str, Any]:
    """summary.json's description of how percentiles are estimated."""
    return {
        "method": "log_histogram",
        "relative_error": round(RELATIVE_ERROR, 6),
        "gamma": GAMMA,
        "interpolation": "linear, between order statistics (numpy's 'linear', Spark's percentile)",
    }
