"""The run's clock in one process: t0 (provisional until the start barrier fixes it), the seconds
since it on the monotonic clock, and sleeps until a time since t0, to within a timer's wake-up or
to within tens of microseconds (publish times). A part of RunContext (loadgen.run.runtime)."""

from __future__ import annotations

import time

import gevent
from gevent.event import Event

__all__ = ["RunClock", "LOOP_TURN_S", "SPIN_MARGIN_S"]

SPIN_MARGIN_S = 0.002  # sleep_until_precise: yield-loop this long before a deadline instead of a timer
# A yield that lets the event loop turn: gevent.sleep(0) runs pending callbacks but reaches the
# loop's timers and sockets only now and then (a 0.5 ms timer woke 33 times in 100 ms of a greenlet
# yielding with sleep(0), up to 7 ms late; 206 times, at most 0.7 ms late, with this timeout).
LOOP_TURN_S = 1e-6


class RunClock:
    t0_ns: int
    _t0_mono: float

    def set_t0(self, t0_ns: int) -> None:
        """Count from `t0_ns` (wall clock, ns): elapsed_s() is 0 there."""
        self.t0_ns = t0_ns
        self._t0_mono = time.monotonic() - (time.time_ns() - t0_ns) / 1e9

    def elapsed_s(self) -> float:
        """Seconds since t0 on the monotonic clock (durations inside this process)."""
        return time.monotonic() - self._t0_mono

    def sleep_until(self, t_s: float, interrupt: Event | None = None) -> bool:
        """Sleep until elapsed time t_s; return False if `interrupt` fired first (or had already)."""
        delay = t_s - self.elapsed_s()
        if delay <= 0:
            return interrupt is None or not interrupt.is_set()
        if interrupt is None:
            gevent.sleep(delay)
            return True
        return not interrupt.wait(delay)

    def sleep_until_precise(self, t_s: float, interrupt: Event) -> bool:
        """Like sleep_until, to within tens of microseconds: a gevent timer wakes up to a few ms
        late (epoll waits in whole milliseconds), so wait on the timer until SPIN_MARGIN_S before
        `t_s`, then yield to the hub (which keeps serving sockets) until `t_s` arrives. Costs at
        most SPIN_MARGIN_S of CPU per call; used for publish times, where lateness is measured."""
        delay = t_s - self.elapsed_s()
        if delay > SPIN_MARGIN_S and interrupt.wait(delay - SPIN_MARGIN_S):
            return False
        while self.elapsed_s() < t_s:
            if interrupt.is_set():
                return False
            gevent.sleep(LOOP_TURN_S)  # the loop keeps reading sockets meanwhile
        return not interrupt.is_set()
