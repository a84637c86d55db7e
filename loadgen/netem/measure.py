"""The proxy's self-measurement: how late each chunk left against its scheduled release.

Values go into sparse log-linear histograms, so recording is O(1) and a summary
never stalls the proxy's loop (sorting a minute of samples would): bins are 1 µs
wide below 1.024 ms and 1/1024 of their octave above (0.1 % relative), and a
percentile is the midpoint of the bin holding the sample of rank `(n-1)·q/100`.
"""

from __future__ import annotations

from collections import defaultdict

__all__ = ["Histogram", "DirectionMeter"]

_LINEAR_US = 1024  # 1 µs bins below this many µs; 1024 sub-bins per octave above
_SUB_BITS = 10


def _bin(value_us: int) -> tuple[int, int]:
    """(lower bound, width) in µs of the bin holding value_us (>= 0)."""
    if value_us < _LINEAR_US:
        return value_us, 1
    shift = value_us.bit_length() - 1 - _SUB_BITS
    return (value_us >> shift) << shift, 1 << shift


class Histogram:
    """Counts of non-negative nanosecond values (negatives count as 0 and are tallied apart)."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = defaultdict(int)
        self.count = 0
        self.total_ns = 0
        self.max_ns: int | None = None
        self.negative = 0

    def add(self, value_ns: int) -> None:
        if value_ns < 0:
            self.negative += 1
            value_ns = 0
        self.counts[_bin(value_ns // 1000)[0]] += 1
        self.count += 1
        self.total_ns += value_ns
        if self.max_ns is None or value_ns > self.max_ns:
            self.max_ns = value_ns

    def merge(self, other: Histogram) -> None:
        for key, n in other.counts.items():
            self.counts[key] += n
        self.count += other.count
        self.total_ns += other.total_ns
        self.negative += other.negative
        if other.max_ns is not None and (self.max_ns is None or other.max_ns > self.max_ns):
            self.max_ns = other.max_ns

    def percentile_ms(self, q: float) -> float | None:
        if self.count == 0:
            return None
        rank = int((self.count - 1) * q / 100.0)
        seen = 0
        for lower in sorted(self.counts):
            seen += self.counts[lower]
            if seen > rank:
                low, width = _bin(lower)
                return (low + width / 2) / 1000.0
        return None  # unreachable: counts add up to count

    def mean_ms(self) -> float | None:
        return None if self.count == 0 else self.total_ns / self.count / 1e6


class DirectionMeter:
    """One direction: error = actual release - scheduled release; delay = actual release - stamp."""

    def __init__(self) -> None:
        self.error = Histogram()
        self.delay = Histogram()
        self.bytes = 0
        self.dropped = 0  # chunks discarded because their connection was cut

    def record(self, stamp_ns: int, release_ns: int, sent_ns: int, size: int) -> None:
        self.error.add(sent_ns - release_ns)
        self.delay.add(sent_ns - stamp_ns)
        self.bytes += size

    @property
    def count(self) -> int:
        return self.error.count

    def summary(self) -> dict:
        """count, bytes, dropped, error p50/p99/max and applied delay p50/p99/mean, in ms."""

        def r(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "count": self.error.count,
            "bytes": self.bytes,
            "dropped": self.dropped,
            "error_p50_ms": r(self.error.percentile_ms(50)),
            "error_p99_ms": r(self.error.percentile_ms(99)),
            "error_max_ms": r(None if self.error.max_ns is None else self.error.max_ns / 1e6),
            "delay_p50_ms": r(self.delay.percentile_ms(50)),
            "delay_p99_ms": r(self.delay.percentile_ms(99)),
            "delay_mean_ms": r(self.delay.mean_ms()),
        }

    def take(self) -> DirectionMeter:
        """Hand over what was measured so far and start afresh (one period's worth)."""
        taken = DirectionMeter()
        taken.error, taken.delay, taken.bytes, taken.dropped = self.error, self.delay, self.bytes, self.dropped
        self.error, self.delay, self.bytes, self.dropped = Histogram(), Histogram(), 0, 0
        return taken

    def merge(self, other: DirectionMeter) -> None:
        self.error.merge(other.error)
        self.delay.merge(other.delay)
        self.bytes += other.bytes
        self.dropped += other.dropped
