"""Open-loop arrival schedules: when a producer intends to send, in seconds since the run's t0.

Pure: the caller supplies the rate over time, the change times and the random stream; nothing
here reads a clock or sleeps. Intended send times do not depend on how fast sends complete,
so a stalled broker shows up as lateness (coordinated omission stays visible).
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
from collections.abc import Callable, Iterator, Sequence

__all__ = ["ARRIVAL_KINDS", "ArrivalSchedule", "producer_rng", "changes_after", "rate_curve"]

ARRIVAL_KINDS = ("constant", "poisson")

RateAt = Callable[[float], "float | tuple[float, float]"]
NextChange = Callable[[float], "float | None"]
RatePoints = Sequence[tuple[float, float]]


class ArrivalSchedule:
    """Successive intended send offsets for one producer, strictly within [start_s, end_s).

    The rate is piecewise linear between change times: `rate_at(t)` gives the rate at the
    start of a segment, or `(rate, slope)` for a ramp (slope in msg/s per second). Each gap is
    one unit of "work" (constant: exactly 1; poisson: Exponential(1)) consumed at the current
    rate, so a gap that spans a change time is finished at the new rate from that change: a
    step from 10/s to 1000/s takes effect at the step, not after a 100 ms gap. For poisson this
    is the exact non-homogeneous Poisson process (time change by the integrated rate). While
    the rate is 0 the producer is paused; it resumes with an arrival at the change where the
    rate becomes positive. The first arrival is at start_s (or at the first resume). `kind`
    may be a function of time when a phase changes it.
    """

    def __init__(
        self,
        kind: str | Callable[[float], str],
        rate_at: RateAt,
        rng: random.Random,
        start_s: float = 0.0,
        end_s: float = math.inf,
        next_change_after: NextChange = lambda t: None,
    ) -> None:
        if isinstance(kind, str):
            _check_kind(kind)
        self._kind = kind
        self._rate_at = rate_at
        self._rng = rng
        self._start = float(start_s)
        self._end = float(end_s)
        self._next_change_after = next_change_after

    def __iter__(self) -> Iterator[float]:
        anchor = self._start  # where the current linear-rate segment began
        rate, slope, change = self._segment(anchor)
        done = 0.0  # work consumed since `anchor` up to the last arrival
        work = 0.0  # work until the next arrival (0: arrive at once)
        while anchor < self._end:
            if rate == 0.0 and slope <= 0.0:
                if change is None:
                    return
                anchor, done, work = change, 0.0, 0.0
                rate, slope, change = self._segment(anchor)
                continue
            target = done + work
            # anchor + time-for-work (not a running sum) keeps constant schedules free of drift
            t = anchor + _time_for_work(target, rate, slope)
            if change is not None and t >= change:
                span = change - anchor
                work = max(0.0, target - (rate * span + slope * span * span / 2))
                anchor, done = change, 0.0
                rate, slope, change = self._segment(anchor)
                continue
            if t >= self._end:
                return
            yield t
            done = target
            work = self._gap_work(t)

    def _segment(self, t: float) -> tuple[float, float, float | None]:
        value = self._rate_at(t)
        rate, slope = value if isinstance(value, tuple) else (value, 0.0)
        if isinstance(rate, bool) or not math.isfinite(rate) or rate < 0 or not math.isfinite(slope):
            raise ValueError(f"rate_at({t}) must be a finite number >= 0 (and a finite slope), got {value!r}")
        change = self._next_change_after(t)
        if change is not None and math.isinf(change):
            change = None
        if change is not None and not change > t:
            raise ValueError(f"next_change_after({t}) must return a time after {t}, got {change!r}")
        return float(rate), float(slope), change

    def _gap_work(self, t: float) -> float:
        kind = self._kind(t) if callable(self._kind) else self._kind
        _check_kind(kind)
        return 1.0 if kind == "constant" else self._rng.expovariate(1.0)


def _time_for_work(work: float, rate: float, slope: float) -> float:
    """Time from a segment's start until `work` is done at rate + slope * t (inf: never).

    Solves rate * t + slope * t**2 / 2 = work in the form 2w / (r + sqrt(r^2 + 2sw)), which
    is exact for slope 0 and does not cancel when slope is tiny."""
    if slope == 0.0:
        return work / rate
    disc = rate * rate + 2.0 * slope * work
    if disc < 0.0:
        return math.inf  # a falling ramp reaches zero before the work is done
    root = math.sqrt(disc)
    return 2.0 * work / (rate + root) if rate + root > 0 else 0.0


def rate_curve(
    rate: float | RatePoints, bursts: tuple[float, float, float, float] | None = None
) -> tuple[RateAt, NextChange]:
    """`rate_at` and `next_change_after` for ArrivalSchedule from a producer's rate settings.

    `rate` is a number, or points `[(at_s, rate), ...]` sorted by time: the rate ramps
    linearly from point to point, two points at one time make a step, and the first and last
    rates hold before and after. `bursts` is `(on_s, off_s, off_rate, start_s)`: the rate
    applies during each `on_s`, `off_rate` during each `off_s`, cycles aligned on `start_s`.
    """
    points = [(0.0, float(rate))] if isinstance(rate, (int, float)) else [(float(a), float(r)) for a, r in rate]
    times = [a for a, _ in points]

    def profile_at(t: float) -> tuple[float, float]:
        i = bisect.bisect_right(times, t) - 1
        if i < 0:
            return points[0][1], 0.0
        if i + 1 >= len(points):
            return points[-1][1], 0.0
        (a0, r0), (a1, r1) = points[i], points[i + 1]
        slope = (r1 - r0) / (a1 - a0)  # a1 > a0: bisect_right skips past equal times
        return max(0.0, r0 + slope * (t - a0)), slope

    def profile_next(t: float) -> float | None:
        i = bisect.bisect_right(times, t)
        return times[i] if i < len(times) and len(points) > 1 else None

    if bursts is None:
        return profile_at, profile_next
    on_s, off_s, off_rate, start_s = (float(x) for x in bursts)
    period = on_s + off_s

    def cycle(t: float) -> tuple[bool, float]:
        """Whether [t, next edge) is an on period, and that next edge (strictly after t)."""
        k = math.floor((t - start_s) / period)
        begin = start_s + k * period
        for edge, is_on in (
            (begin, False),
            (begin + on_s, True),
            (begin + period, False),
            (begin + period + on_s, True),
        ):
            # the first edge after t bounds the interval t lies in (robust to rounding of k)
            if edge > t + 1e-9:
                return is_on, edge
        return False, begin + 2 * period  # unreachable: the edges above cover a full period

    def rate_at(t: float) -> tuple[float, float]:
        on, _ = cycle(t)
        return profile_at(t) if on else (off_rate, 0.0)

    def next_change_after(t: float) -> float | None:
        candidates = [cycle(t)[1], profile_next(t)]
        return min(c for c in candidates if c is not None)

    return rate_at, next_change_after


def _check_kind(kind: str) -> None:
    if kind not in ARRIVAL_KINDS:
        raise ValueError(f"arrival kind must be one of {', '.join(ARRIVAL_KINDS)}, got {kind!r}")


def changes_after(times: Sequence[float]) -> NextChange:
    """A `next_change_after` for ArrivalSchedule from sorted change times (Scenario.change_times())."""
    ordered = sorted(times)

    def next_change_after(t: float) -> float | None:
        i = bisect.bisect_right(ordered, t)
        return ordered[i] if i < len(ordered) else None

    return next_change_after


def producer_rng(run_seed: int, producer_key: str) -> random.Random:
    """A random stream for one producer that is the same in every process for the same inputs.

    Seeded from SHA-256 of the run seed and the producer key (`hash()` of a str differs
    between processes), so a run with a given seed replays the same arrivals.
    """
    digest = hashlib.sha256(f"{run_seed}\x00{producer_key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))
