"""The queueing arithmetic of docs/queueing.md for one consumer kept fed by a backlog: pure Python,
importable without Spark, so the load generator's capacity check before a run
(loadgen.scenario.capacity) and the analysis's model check after it (analysis.summary.model) use
the one rule."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["predict", "finite"]


def finite(x: Any) -> float | None:
    """`x` as a float when it is a finite number (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def predict(prefetch: Any, round_trip_ms: Any, processing_ms: Any) -> dict:
    """The arithmetic of docs/queueing.md for one consumer with a backlog (the queue never runs empty).

    saturation prefetch = ceil(R/p). With n < R/p: utilisation n*p/R, throughput
    n/R, no buffer wait. With n >= R/p: utilisation 1, throughput 1/p, and a message
    waits about (n - R/p)*p in the buffer. Every value is None when an input is
    missing, or p or R is not positive. prefetch 0 (unlimited) predicts no bound.
    """
    n, r, p = finite(prefetch), finite(round_trip_ms), finite(processing_ms)
    out = {
        "round_trip_ms": r,
        "processing_ms": p,
        "saturation_prefetch": None,
        "utilisation": None,
        "throughput_per_s": None,
        "buffer_wait_ms": None,
    }
    if r is None or p is None or r <= 0 or p <= 0:
        return out
    ratio = r / p
    out["saturation_prefetch"] = math.ceil(ratio - 1e-9)
    if n is None or n <= 0:
        return out
    if n < ratio:
        out.update(utilisation=n * p / r, throughput_per_s=1000.0 * n / r, buffer_wait_ms=0.0)
    else:
        out.update(utilisation=1.0, throughput_per_s=1000.0 / p, buffer_wait_ms=(n - ratio) * p)
    return out
