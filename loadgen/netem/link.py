"""The delay line's arithmetic: when each chunk leaves, per direction, with no I/O.

A chunk is stamped when it is read off one socket and released to the other at
`max(previous release, transmitted + latency ± jitter)`: the bandwidth cap
serialises chunks first (a token bucket), then the propagation delay applies, and
taking the maximum with the previous release keeps the byte stream in order, as a
TCP path does. Times are integer nanoseconds of whatever clock the caller injects.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = ["LinkSettings", "NetworkState", "TokenBucket", "DelayLine", "UNIMPAIRED"]

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000

T = TypeVar("T")


@dataclass(frozen=True)
class LinkSettings:
    """One direction's impairment (Toxiproxy's names): latency and jitter in ms, bandwidth in bytes/s.

    Jitter is an extra delay drawn uniformly from [0, jitter_ms] per chunk (the scenario
    schema's definition; Toxiproxy draws from ±jitter instead); `bandwidth_bytes_per_s`
    None means no cap.
    """

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    bandwidth_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("latency_ms", "jitter_ms"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} must be a number >= 0, got {value!r}")
        bw = self.bandwidth_bytes_per_s
        if bw is not None and (not isinstance(bw, (int, float)) or isinstance(bw, bool) or bw <= 0):
            raise ValueError(f"bandwidth_bytes_per_s must be a number > 0 or null, got {bw!r}")

    @property
    def transparent(self) -> bool:
        """No delay of any kind: a chunk may be forwarded the moment it is read."""
        return self.latency_ms == 0 and self.jitter_ms == 0 and self.bandwidth_bytes_per_s is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "jitter_ms": self.jitter_ms,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LinkSettings:
        return cls(
            float(data.get("latency_ms") or 0.0),
            float(data.get("jitter_ms") or 0.0),
            None if data.get("bandwidth_bytes_per_s") is None else float(data["bandwidth_bytes_per_s"]),
        )


@dataclass(frozen=True)
class NetworkState:
    """Everything in force at one moment: both directions, the outage switch and reset."""

    upstream: LinkSettings = LinkSettings()  # client -> broker (publishes, acks)
    downstream: LinkSettings = LinkSettings()  # broker -> client (deliveries, confirms)
    down: bool = False
    reset_peer: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "upstream": self.upstream.to_dict(),
            "downstream": self.downstream.to_dict(),
            "down": self.down,
            "reset_peer": self.reset_peer,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NetworkState:
        return cls(
            LinkSettings.from_dict(data.get("upstream") or {}),
            LinkSettings.from_dict(data.get("downstream") or {}),
            bool(data.get("down")),
            bool(data.get("reset_peer")),
        )


UNIMPAIRED = NetworkState()


class TokenBucket:
    """Bytes leave at `rate` per second; up to `burst_bytes` may go at once after an idle spell.

    `take(n, at_ns)` returns when n bytes have been transmitted if they are offered at
    `at_ns`. Tokens may go negative (a debt paid back at the rate), so with a burst of
    0 this is exact serialisation: a chunk finishes `n / rate` after the link frees up.
    Calls must come in non-decreasing `at_ns` (an earlier time counts as the last one).
    """

    def __init__(self, rate_bytes_per_s: float | None, burst_bytes: float = 0.0, now_ns: int = 0):
        self.rate = rate_bytes_per_s
        self.burst = float(burst_bytes)
        self._tokens = self.burst
        self._last_ns = now_ns

    def _refill(self, at_ns: int) -> int:
        at_ns = max(at_ns, self._last_ns)
        if self.rate is not None:
            self._tokens = min(self.burst, self._tokens + (at_ns - self._last_ns) * self.rate / NS_PER_S)
        self._last_ns = at_ns
        return at_ns

    def take(self, n_bytes: int, at_ns: int) -> int:
        at_ns = self._refill(at_ns)
        if self.rate is None:
            return at_ns
        self._tokens -= n_bytes
        if self._tokens >= 0:
            return at_ns
        return at_ns + int(round(-self._tokens * NS_PER_S / self.rate))

    def set_rate(self, rate_bytes_per_s: float | None, now_ns: int) -> None:
        """Change the rate from `now_ns` on; the tokens (or debt) earned so far are kept."""
        self._refill(now_ns)
        if rate_bytes_per_s is None:
            self._tokens = self.burst
        self.rate = rate_bytes_per_s


class DelayLine(Generic[T]):
    """A FIFO of (release_ns, stamp_ns, item): stamp on arrival, release in order, no sleeping.

    The caller reads `next_release_ns()`, arranges to be woken then (one timer per
    line, not one per chunk), and takes everything `due(now)`.
    """

    def __init__(
        self,
        settings: LinkSettings = LinkSettings(),
        rng: random.Random | None = None,
        now_ns: int = 0,
        burst_bytes: float = 0.0,
    ):
        self.settings = settings
        self._rng = rng or random.Random()
        self._bucket = TokenBucket(settings.bandwidth_bytes_per_s, burst_bytes, now_ns)
        self._queue: deque[tuple[int, int, T, int]] = deque()
        self._last_release_ns = now_ns
        self.queued_bytes = 0

    def __len__(self) -> int:
        return len(self._queue)

    def configure(self, settings: LinkSettings, now_ns: int) -> None:
        """New settings for chunks stamped from now on; chunks already queued keep their release."""
        if settings.bandwidth_bytes_per_s != self.settings.bandwidth_bytes_per_s:
            self._bucket.set_rate(settings.bandwidth_bytes_per_s, now_ns)
        self.settings = settings

    def delay_ns(self) -> int:
        """One propagation delay draw: latency plus a uniform extra in [0, jitter]."""
        s = self.settings
        delay_ms = s.latency_ms
        if s.jitter_ms:
            delay_ms += self._rng.uniform(0.0, s.jitter_ms)
        return int(round(delay_ms * NS_PER_MS))

    def push(self, item: T, size: int, stamp_ns: int) -> int:
        """Queue `item` (size bytes) read at `stamp_ns`; return its release time."""
        transmitted = self._bucket.take(size, stamp_ns)
        release = max(self._last_release_ns, transmitted + self.delay_ns())
        self._last_release_ns = release
        self._queue.append((release, stamp_ns, item, size))
        self.queued_bytes += size
        return release

    def next_release_ns(self) -> int | None:
        return self._queue[0][0] if self._queue else None

    def due(self, now_ns: int) -> list[tuple[int, int, T]]:
        """Pop, in order, every (release_ns, stamp_ns, item) whose release is at or before now."""
        out = []
        queue = self._queue
        while queue and queue[0][0] <= now_ns:
            release, stamp, item, size = queue.popleft()
            self.queued_bytes -= size
            out.append((release, stamp, item))
        return out

    def clear(self) -> int:
        """Drop everything queued (the connection was cut); return how many items were dropped."""
        n = len(self._queue)
        self._queue.clear()
        self.queued_bytes = 0
        return n
