#!/usr/bin/env python3
"""Write the sample replay trace, scenarios/traces/burst-sample.csv (seeded, so the same every time).

What it generates: 60 s of traffic, a quiet Poisson background of about 30 msg/s with bursts
of about 300 msg/s lasting 2-3 s roughly every 12 s. Four routing keys with unequal shares
(orders.created 45 %, orders.paid 25 %, stock.changed 20 %, audit 10 %); lognormal body sizes
(median about 400 B, capped at 16 KiB); priority 1-5 on a few rows, 0 on some, absent on most;
a lognormal processing_ms per row (median about 3 ms); offset_s with millisecond precision.

    python scripts/make_sample_trace.py [--out PATH] [--seed N]
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from pathlib import Path

DURATION_S = 60.0
BACKGROUND_PER_S = 30.0
BURST_PER_S = 300.0
BURST_EVERY_S = 12.0
KEYS = (("orders.created", 0.45), ("orders.paid", 0.25), ("stock.changed", 0.20), ("audit", 0.10))
MAX_SIZE = 16 * 1024
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "scenarios" / "traces" / "burst-sample.csv"


def rate_segments(rng: random.Random) -> list[tuple[float, float, float]]:
    """(start_s, end_s, rate per s): background, with a burst near every BURST_EVERY_S."""
    segments = []
    t = 0.0
    burst_start = 4.0 + rng.uniform(-1.0, 1.0)
    while burst_start < DURATION_S:
        burst_end = min(burst_start + rng.uniform(2.0, 3.0), DURATION_S)
        segments.append((t, burst_start, BACKGROUND_PER_S))
        segments.append((burst_start, burst_end, BURST_PER_S * rng.uniform(0.85, 1.15)))
        t = burst_end
        burst_start = burst_end + BURST_EVERY_S - 2.5 + rng.uniform(-1.5, 1.5)
    segments.append((t, DURATION_S, BACKGROUND_PER_S))
    return [s for s in segments if s[1] > s[0]]


def arrivals(rng: random.Random) -> list[float]:
    """A Poisson process with piecewise constant rate (restarting at a boundary is exact: memoryless)."""
    times = []
    for start, end, rate in rate_segments(rng):
        t = start + rng.expovariate(rate)
        while t < end:
            times.append(t)
            t += rng.expovariate(rate)
    return times


def row(rng: random.Random, t: float) -> list[str]:
    key = rng.choices([k for k, _ in KEYS], weights=[w for _, w in KEYS])[0]
    size = min(MAX_SIZE, max(1, round(rng.lognormvariate(math.log(400), 0.9))))
    draw = rng.random()
    priority = "" if draw < 0.75 else "0" if draw < 0.92 else str(rng.randint(1, 5))
    processing_ms = rng.lognormvariate(math.log(3.0), 0.6)
    return [f"{t:.3f}", key, str(size), priority, f"{processing_ms:.3f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="CSV to write (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default: %(default)s)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["offset_s", "routing_key", "size_bytes", "priority", "processing_ms"])
        rows = [row(rng, t) for t in arrivals(rng)]
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")


if __name__ == "__main__":
    main()
