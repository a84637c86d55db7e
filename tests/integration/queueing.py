"""DOMAIN.md §2's arithmetic, for the tests that check the delay line against it: computed from the
processing time and the round trip the consumer achieved, read from the trace rows here,
independently of the analysis."""

from __future__ import annotations

import statistics


def round_trip_arithmetic(r_ms: float, p_ms: float, prefetch: int) -> tuple[float, float]:
    """For a round trip R (`r_ms`: out to the broker, p, and back): (throughput per second, the
    buffer wait in ms). Throughput is min(n / R, 1 / p); a saturated consumer's deliveries wait
    (n - R/p) * p in its buffer, a starved one's none."""
    return min(prefetch / r_ms, 1 / p_ms) * 1000, max(0.0, (prefetch - r_ms / p_ms) * p_ms)


def achieved_round_trip(in_phase: list[dict], deliveries: list[dict], prefetch: int) -> tuple[float, float]:
    """(p, R) in ms as the consumer achieved them over the delivery rows `in_phase`: p is the mean
    processing time; R is p plus the mean time from an ack to the delivery it drew (the delivery
    `prefetch` tags later on the same consumer), over the deliveries whose message had been
    published by the time of that ack (a queue that held it: no wait for the producer).
    `deliveries`: every delivery row of the run, for the acks before the phase."""
    by_tag = {(d["consumer"], d["delivery_tag"]): d for d in deliveries}
    gaps = []
    for d in in_phase:
        ack = by_tag.get((d["consumer"], d["delivery_tag"] - prefetch))
        if ack is not None and ack["settle_ns"] and d["publish_ns"] <= ack["settle_ns"] <= d["receive_ns"]:
            gaps.append((d["receive_ns"] - ack["settle_ns"]) / 1e6)
    p_ms = statistics.fmean((d["end_ns"] - d["start_ns"]) / 1e6 for d in in_phase)
    return p_ms, p_ms + statistics.fmean(gaps)
