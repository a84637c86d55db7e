"""Publishing on the schedule's times until the run ends: the producer's send loop without its
connection, so that the rules for a late, stopped or finished run are tested on their own
(tests/unit/test_pacing.py).

A producer behind its schedule stops when the run's time is up by its own clock, even before the
drain's greenlet (which sets `draining`) has had the CPU to say so; and after LATE_YIELD_EVERY late
publishes in a row it yields the loop once, so that confirms, timers and other users are served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

__all__ = ["LATE_YIELD_EVERY", "on_time"]

LATE_YIELD_EVERY = 64
"""Publishes in a row behind schedule before yielding to the hub."""

Send = TypeVar("Send", bound=tuple[Any, ...])


def on_time(
    sends: Iterable[Send],
    *,
    sleep_until: Callable[[float], bool],
    draining: Callable[[], bool],
    elapsed_s: Callable[[], float],
    run_end_s: float,
    yield_turn: Callable[[], None],
) -> Iterator[Send]:
    """Each of `sends` (tuples whose first item is the intended time, seconds since t0) once it is
    due: `sleep_until(t)` waits for it and says False when the run was stopped meanwhile. Ends at a
    stop, once `draining()`, or once `elapsed_s()` has reached `run_end_s`; a late schedule is not
    published after the run. The caller publishes each before asking for the next."""
    late_streak = 0
    for send in sends:
        intended_s = send[0]
        if not sleep_until(intended_s) or draining():
            return  # stopped, or the run is over
        if elapsed_s() >= run_end_s:
            return  # over by the clock, before the drain's greenlet got the CPU to say so
        yield send
        late_streak = late_streak + 1 if intended_s <= elapsed_s() else 0
        if late_streak >= LATE_YIELD_EVERY:
            late_streak = 0
            yield_turn()
