"""CoDel (RFC 8289) for the consumer's client-side buffer: the control law.

`CoDel` is the RFC's controller with no I/O and no clock of its own: the consumer
calls `on_dequeue` with a delivery's buffer sojourn when the application takes it
from the buffer, nacks it when the answer is True, and calls `on_empty` when it
finds the buffer empty. `loadgen.scenario.advice.codel_warnings(scenario)` says when a
scenario's CoDel settings can never act, or are far off the processing time they are meant for.

Where this follows and where it departs from RFC 8289 section 5 (and from the
2012 AMQP consumer variant) is written out in docs/codel.md; in short:

- "Not above target" also when the backlog is small: the RFC's
  `bytes() <= maxpacket` (at most one MTU left in the queue) becomes
  `queue_len <= 1`: at most one delivery left waiting after this one was taken.
- The RFC's inner `while` loop (drop, dequeue the next packet, drop again while
  `now >= drop_next`) becomes consecutive calls: each call decides one delivery,
  and the consumer takes the next one at once after a nack.
- `drop_next` is advanced at the drop itself (as Linux does for an ECN mark),
  not after looking at the next packet, so the traced state after a nack already
  holds the next deadline.
- Count resumption is the RFC's (Linux's): `count - lastcount` when dropping
  restarts within 16 intervals of the last scheduled drop, else 1. The 2012
  variant used `count - 2`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

__all__ = ["CoDel", "CoDelState", "SMALL_BACKLOG", "RESUME_WINDOW_INTERVALS", "INTERVAL_RATIO_LIMIT"]

NS_PER_MS = 1_000_000

SMALL_BACKLOG = 1
"""At most this many deliveries left waiting after a dequeue: never 'above target' (the
RFC's one-MTU backlog). One waiting message is not a standing queue: it is the next job."""

RESUME_WINDOW_INTERVALS = 16
"""Dropping that restarts within this many intervals of the last scheduled drop resumes its count."""

INTERVAL_RATIO_LIMIT = 10.0
"""codel_warnings: an interval more than this factor off the mean processing time is suspicious."""


class CoDelState(NamedTuple):
    """The controller's state, as traced on delivery rows (times in ns on the caller's clock)."""

    dropping: bool
    drop_count: int
    first_above_ns: int  # 0: not above target
    drop_next_ns: int


class CoDel:
    """RFC 8289's control law over a consumer's buffer, on an injected clock.

    >>> c = CoDel(target_ms=100, interval_ms=20)
    >>> c.on_dequeue(sojourn_ns=150_000_000, now_ns=1_000_000_000, queue_len=5)
    False
    """

    __slots__ = ("_count", "_drop_next_ns", "_dropping", "_first_above_ns", "_interval_ns", "_lastcount", "_target_ns")

    def __init__(self, target_ms: float, interval_ms: float):
        for name, value in (("target_ms", target_ms), ("interval_ms", interval_ms)):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"CoDel {name} must be a number, got {value!r}")
            if not math.isfinite(value) or value <= 0:
                raise ValueError(f"CoDel {name} must be positive and finite, got {value!r}")
        self._target_ns = round(target_ms * NS_PER_MS)
        self._interval_ns = round(interval_ms * NS_PER_MS)
        self._first_above_ns = 0
        self._dropping = False
        self._count = 0
        self._lastcount = 0
        self._drop_next_ns = 0

    # -- read-only state ----------------------------------------------------
    @property
    def target_ns(self) -> int:
        return self._target_ns

    @property
    def interval_ns(self) -> int:
        return self._interval_ns

    @property
    def dropping(self) -> bool:
        """In the dropping state: sojourn has stayed above target for at least an interval."""
        return self._dropping

    @property
    def count(self) -> int:
        """Drops since the dropping state was (re-)entered, counting from a resumed value."""
        return self._count

    @property
    def first_above_ns(self) -> int:
        """When sojourn will have been above target for an interval; 0 while not above target."""
        return self._first_above_ns

    @property
    def drop_next_ns(self) -> int:
        """When the next drop is due while dropping (the last deadline once it stopped)."""
        return self._drop_next_ns

    def state(self) -> CoDelState:
        return CoDelState(self._dropping, self._count, self._first_above_ns, self._drop_next_ns)

    # -- the control law ----------------------------------------------------
    def on_dequeue(self, sojourn_ns: int, now_ns: int, queue_len: int) -> bool:
        """One delivery left the buffer at `now_ns` after `sojourn_ns` in it, with `queue_len`
        deliveries still waiting behind it. True: drop (nack) this delivery."""
        ok_to_drop = self._ok_to_drop(sojourn_ns, now_ns, queue_len)
        if self._dropping:
            if not ok_to_drop:
                self._dropping = False  # sojourn below target (or a small backlog): leave
                return False
            if now_ns >= self._drop_next_ns:
                self._count += 1
                self._drop_next_ns = self._control_law(self._drop_next_ns)
                return True
            return False
        if not ok_to_drop:
            return False
        # Above target for a whole interval: enter the dropping state with this drop.
        # Dropping that restarts soon after it stopped resumes near the rate that
        # controlled the queue last time (`now - drop_next` approximates the time
        # since the last drop: drop_next is at most an interval after it).
        self._dropping = True
        delta = self._count - self._lastcount
        recent = now_ns - self._drop_next_ns < RESUME_WINDOW_INTERVALS * self._interval_ns
        self._count = delta if delta > 1 and recent else 1
        self._lastcount = self._count
        self._drop_next_ns = self._control_law(now_ns)
        return True

    def on_empty(self, now_ns: int) -> None:
        """The application found the buffer empty: not above target, and not dropping."""
        self._first_above_ns = 0
        self._dropping = False

    def _ok_to_drop(self, sojourn_ns: int, now_ns: int, queue_len: int) -> bool:
        """The RFC's dodequeue: has sojourn been above target for at least an interval?"""
        if sojourn_ns < self._target_ns or queue_len <= SMALL_BACKLOG:
            self._first_above_ns = 0  # went below: must stay above a whole interval again
            return False
        if self._first_above_ns == 0:
            self._first_above_ns = now_ns + self._interval_ns
            return False
        return now_ns >= self._first_above_ns

    def _control_law(self, t_ns: int) -> int:
        return t_ns + round(self._interval_ns / math.sqrt(self._count))

    def __repr__(self) -> str:
        return (
            f"CoDel(target_ms={self._target_ns / NS_PER_MS:g}, interval_ms={self._interval_ns / NS_PER_MS:g}, "
            f"dropping={self._dropping}, count={self._count})"
        )
