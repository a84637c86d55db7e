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
from typing import Callable, Iterator, Sequence

__all__ = ["ARRIVAL_KINDS", "ArrivalSchedule", "producer_rng", "changes_after"]

ARRIVAL_KINDS = ("constant", "poisson")

RateAt = Callable[[float], float]
NextChange = Callable[[float], "float | None"]


class ArrivalSchedule:
    """Successive intended send offsets for one producer, strictly within [start_s, end_s).

    The rate is piecewise constant between change times. Each gap is one unit of "work"
    (constant: exactly 1; poisson: Exponential(1)) consumed at the current rate, so a gap that
    spans a change time is finished at the new rate from that change: a step from 10/s to
    1000/s takes effect at the step, not after a 100 ms gap. For poisson this is the exact
    non-homogeneous Poisson process. While the rate is 0 the producer is paused; it resumes
    with an arrival at the change where the rate becomes positive. The first arrival is at
    start_s (or at the first resume). `kind` may be a function of time when a phase changes it.
    """

    def __init__(self, kind: str | Callable[[float], str], rate_at: RateAt, rng: random.Random,
                 start_s: float = 0.0, end_s: float = math.inf,
                 next_change_after: NextChange = lambda t: None) -> None:
        if isinstance(kind, str):
            _check_kind(kind)
        self._kind = kind
        self._rate_at = rate_at
        self._rng = rng
        self._start = float(start_s)
        self._end = float(end_s)
        self._next_change_after = next_change_after

    def __iter__(self) -> Iterator[float]:
        anchor = self._start            # where the current constant-rate segment began
        rate, change = self._segment(anchor)
        done = 0.0                      # work consumed since `anchor` up to the last arrival
        work = 0.0                      # work until the next arrival (0: arrive at once)
        while anchor < self._end:
            if rate == 0.0:
                if change is None:
                    return
                anchor, done, work = change, 0.0, 0.0
                rate, change = self._segment(anchor)
                continue
            target = done + work
            # anchor + work/rate (not a running sum) keeps constant schedules free of drift
            t = anchor + target / rate
            if change is not None and t >= change:
                work = max(0.0, target - (change - anchor) * rate)
                anchor, done = change, 0.0
                rate, change = self._segment(anchor)
                continue
            if t >= self._end:
                return
            yield t
            done = target
            work = self._gap_work(t)

    def _segment(self, t: float) -> tuple[float, float | None]:
        rate = self._rate_at(t)
        if isinstance(rate, bool) or not math.isfinite(rate) or rate < 0:
            raise ValueError(f"rate_at({t}) must be a finite number >= 0, got {rate!r}")
        change = self._next_change_after(t)
        if change is not None and math.isinf(change):
            change = None
        if change is not None and not change > t:
            raise ValueError(f"next_change_after({t}) must return a time after {t}, got {change!r}")
        return float(rate), change

    def _gap_work(self, t: float) -> float:
        kind = self._kind(t) if callable(self._kind) else self._kind
        _check_kind(kind)
        return 1.0 if kind == "constant" else self._rng.expovariate(1.0)


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
