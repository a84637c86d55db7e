"""The arithmetic of docs/queueing.md, for the tests that check the delay line against it: computed from the
processing time and the round trip the consumer achieved, read from the trace rows here,
independently of the analysis."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from tests.integration.traces import read_rows


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


BUSY_OVERSHOOT = 0.10
"""A phase whose deliveries' mean processing took more than 10 % over the configured time ran on a
busy host: the load generator's timers were late, and so, on the same two cores, were the broker
and the delay line. In the CI of 8506e2d (tests unchanged since a CI that passed them) p was 13 %
and 46 % over, and the round trips 6 and 15 ms over the delay line's; the host had about 5 % of
its CPU stolen by its neighbours (vmstat's `st`)."""


def quiet_run(
    run: Callable[[Path], Path], tmp_path: Path, windows_s: Sequence[tuple[float, float]], p_ms: float
) -> tuple[Path, int, list[dict]]:
    """Run the scenario (`run(out_dir)` returns the run directory) and return the run directory, its
    t0_ns and its delivery rows; run it once more if the host was busy in one of `windows_s` (the
    phases the test measures, seconds from t0 by the deliveries' start: BUSY_OVERSHOOT over `p_ms`).
    The second run is the one measured, busy or not: a load generator that is slow every time
    fails the test."""
    run_dir, t0, deliveries = _read_run(run(tmp_path / "run1"))
    overshoot = _processing_overshoot(deliveries, t0, windows_s, p_ms)
    if overshoot <= BUSY_OVERSHOOT:
        return run_dir, t0, deliveries
    print(f"attempt 1: processing {overshoot:.0%} over {p_ms} ms in a phase (a busy host): once more")
    return _read_run(run(tmp_path / "run2"))


def _read_run(run_dir: Path) -> tuple[Path, int, list[dict]]:
    return run_dir, json.loads((run_dir / "run.json").read_text())["t0_ns"], read_rows(run_dir, "delivery")


def _processing_overshoot(
    deliveries: list[dict], t0: int, windows_s: Sequence[tuple[float, float]], p_ms: float
) -> float:
    """The largest share by which the mean processing of a window's acked deliveries exceeded `p_ms`."""
    acked = [d for d in deliveries if d["outcome"] == "ack"]
    phases = ([d for d in acked if t0 + lo * 1e9 <= d["start_ns"] < t0 + hi * 1e9] for lo, hi in windows_s)
    return max(
        (statistics.fmean(d["end_ns"] - d["start_ns"] for d in phase) / 1e6 / p_ms - 1 for phase in phases if phase),
        default=0.0,
    )
