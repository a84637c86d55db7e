"""The sojourn histogram: about 40 linear bins on "nice" edges, counted from a log-bucket histogram.

Edges start at 0 (or below, should a value be negative) and step by the
smallest width from the 1-2-2.5-5 x 10^k series that covers the largest value in
at most `bins` bins. Bins are [edge_i, edge_i+1), the last one closed, like numpy.

The counts come from the deliveries' cube (analysis.buckets.Histogram: per log bucket of 1 % width,
its count and its values' exact minimum and maximum), not from the values. A bucket whose values
all lie on one side of every edge falls in one bin whole. An edge that a bucket straddles (the
bucket's minimum below it, its maximum at or above it) moves down to that bucket's minimum, a
value of the data less than 1 % below it, so that the whole bucket opens the bin above: every
count is the exact number of values in its bin as the edges are written, and an edge that no
bucket straddles keeps its nice value.
"""

from __future__ import annotations

import math

import numpy as np

from analysis.buckets import Histogram

__all__ = ["DEFAULT_BINS", "histogram_edges", "sojourn_histogram"]

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


def sojourn_histogram(h: Histogram, bins: int = DEFAULT_BINS) -> dict[str, list[float] | list[int]]:
    """summary.json's `sojourn_histogram`, {"edges_ms", "counts"}, of the values `h` holds: the nice
    edges of histogram_edges over its minimum and maximum, each inner edge a bucket straddles moved
    down to that bucket's minimum, and the exact count of each bin."""
    edges = histogram_edges(h.min(), h.max(), bins)
    inner = np.asarray(edges[1:-1], dtype=np.float64)
    if len(inner) and h.n:
        # the bucket each inner edge falls in, if any: the last bucket whose minimum is below the edge
        at = np.searchsorted(h.mins, inner, side="left") - 1
        straddled = (at >= 0) & (h.maxs[np.maximum(at, 0)] >= inner)
        inner = np.where(straddled, h.mins[np.maximum(at, 0)], inner)
        edges = [edges[0], *(float(e) for e in inner), edges[-1]]
    # a bucket's values lie on one side of every edge now: its minimum says which bin it is in
    counts = np.zeros(len(edges) - 1, dtype=np.int64)
    np.add.at(counts, np.searchsorted(inner, h.mins, side="right"), h.counts)
    return {"edges_ms": edges, "counts": [int(c) for c in counts]}
