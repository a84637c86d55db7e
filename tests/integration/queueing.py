"""DOMAIN.md §2's arithmetic, for the tests that check the delay line against it: computed from the
settings (and, where a test says so, the processing and the round trip the consumer achieved) alone."""

from __future__ import annotations


def queueing_arithmetic(one_way_ms: float, p_ms: float, prefetch: int) -> tuple[float, float]:
    """R = t_out + p + t_back with t_out = t_back = `one_way_ms`: (throughput per second, the
    buffer wait in ms). Throughput is min(n / R, 1 / p); a saturated consumer's deliveries wait
    (n - R/p) * p in its buffer, a starved one's none."""
    return round_trip_arithmetic(one_way_ms + p_ms + one_way_ms, p_ms, prefetch)


def round_trip_arithmetic(r_ms: float, p_ms: float, prefetch: int) -> tuple[float, float]:
    """queueing_arithmetic for a round trip R given whole (`r_ms`, processing included)."""
    return min(prefetch / r_ms, 1 / p_ms) * 1000, max(0.0, (prefetch - r_ms / p_ms) * p_ms)
