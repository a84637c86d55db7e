"""The end of a run in one process: at the run's duration publishing stops (`draining`); once every
participant here is idle and the queue (and the dead-letter capture queue) stayed empty for
DRAIN_STABLE_CHECKS looks, or the drain timed out, consumers may leave (`drained`); meanwhile, a
warning whenever publishes leave late. A stream is never empty (nothing leaves it): there the drain
waits until every participant here is idle and no consumer here received anything for
STREAM_QUIET_S instead. A part of RunContext (loadgen.run.runtime)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import gevent
from gevent.event import Event

from loadgen.rules.lateness import Lateness
from loadgen.rules.repeats import HeldBack
from loadgen.run import guarded

__all__ = ["Drain", "DRAIN_POLL_S", "DRAIN_STABLE_CHECKS", "STREAM_QUIET_S", "LATENESS_EVERY_S"]

log = logging.getLogger("sojourn")

DRAIN_POLL_S = 0.25
DRAIN_STABLE_CHECKS = 3
STREAM_QUIET_S = 1.0
LATENESS_EVERY_S = 5.0


class Idles(Protocol):
    """What the drain asks of a participant (loadgen.run.runtime.Participant)."""

    def idle(self) -> bool: ...

    def last_receive_ns(self) -> int | None: ...


class Drain:
    scenario: Any
    worker: str
    draining: Event
    drained: Event
    finished: Event
    stopping: Event
    participants: Sequence[Idles]
    lateness: Lateness
    _greenlets: list[gevent.Greenlet]

    if TYPE_CHECKING:  # the other parts' (RunClock, BrokerSide, RunContext)

        def elapsed_s(self) -> float: ...

        def sleep_until(self, t_s: float, interrupt: Event | None = None) -> bool: ...

        def queue_depth(self) -> int | None: ...

        def _dead_letter_depth(self) -> int | None: ...

        def event(
            self, kind: str, source: str, name: str, value: float | None = None, detail: dict[str, Any] | None = None
        ) -> None: ...

    def start_drain_monitor(self) -> None:
        self._greenlets.append(guarded.spawn("drain_monitor", self._drain_monitor))
        self._greenlets.append(guarded.spawn("lateness_watch", self._lateness_watch))

    def _lateness_watch(self) -> None:
        """Say loudly, while it happens and at the end, when publishes leave late: the first window
        that slips at once, then at most once a minute (repeats.HeldBack), and the run's total."""
        repeats = HeldBack()
        while not self.stopping.wait(LATENESS_EVERY_S) and not self.drained.is_set():
            window = self.lateness.take_window()
            now_s = self.elapsed_s()
            line = repeats.line(
                Lateness.warning(window, f"in the last {LATENESS_EVERY_S:g} s at t={now_s:.0f}s"), now_s
            )
            if line:
                log.warning("%s", line)
        self.lateness.take_window()
        line = Lateness.warning(self.lateness.total, f"over the run in {self.worker}")
        if line:
            held = f"; {repeats.held:,} repeated warnings were held back" if repeats.held else ""
            log.warning("%s%s", line, held)

    def _done(self, stream: bool) -> bool:
        """One look: every participant here idle, and the queue (then the dead-letter capture queue,
        whose late dead-letters must be read before the capture stops) empty; on a stream, which is
        never empty, no delivery here for STREAM_QUIET_S instead."""
        if not all(p.idle() for p in self.participants):
            return False
        if stream:
            return self._quiet(STREAM_QUIET_S)
        return self.queue_depth() == 0 and self._dead_letter_depth() == 0

    def _quiet(self, seconds: float) -> bool:
        """No participant here received a delivery in the last `seconds`."""
        since_ns = time.time_ns() - int(seconds * 1e9)
        return all((p.last_receive_ns() or 0) < since_ns for p in self.participants)

    def _drain_monitor(self) -> None:
        run = self.scenario.run
        self.sleep_until(run.duration_s, self.stopping)
        self.draining.set()
        self.event("drain_start", "runner", self.worker)
        deadline = run.duration_s + run.drain_timeout_s
        stable = 0
        reason = "timeout"
        stream = self.scenario.queue.stream
        while self.elapsed_s() < deadline and not self.stopping.is_set():
            stable = stable + 1 if self._done(stream) else 0
            if stable >= DRAIN_STABLE_CHECKS:
                reason = "empty"
                break
            gevent.sleep(DRAIN_POLL_S)
        if self.stopping.is_set():
            reason = "interrupted"
        self.event("drain_end", "runner", self.worker, detail={"reason": reason})
        if reason == "timeout":
            log.warning(
                "drain timed out after %.0f s; what is left is counted as %s",
                run.drain_timeout_s,
                "not yet read (a stream)" if stream else "left in the broker",
            )
        self.drained.set()
        if not self.participants:  # everyone here had already left (e.g. a producer-only worker)
            self.finished.set()
