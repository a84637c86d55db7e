"""Per-message results into Locust's statistics, a batch at a time.

Firing Locust's `request` event once per message (the event, then two `StatsEntry.log`
calls) cost about a tenth of the publish loop. Successful messages are kept as tuples and
applied every FLUSH_EVERY_S, per (type, name), with `StatsEntry.extend` (the merge Locust's
master uses for its workers' reports): counts, response-time sum, min, max and histogram,
bytes and the per-second count come out as if each had been logged, so the UI, the CSVs,
the summary and the percentiles read the same, at most FLUSH_EVERY_S late. Failures still
fire the `request` event at once, with their exception, for the error table and any listener.

Every successful message still reaches the `request` event's other listeners (a plugin's, a
locustfile's own): the flush calls them once per message, in the order the messages were
reported, with `context={"sojourn_batched": True}` and no `start_time`; only Locust's own
statistics listener is left out, since the merge above did its work. With no other listener
nothing is called, so the loop pays for listeners only when there are some.
"""

from __future__ import annotations

import time
import weakref
from collections import Counter
from typing import Any

import gevent
from locust import stats as locust_stats
from locust.event import EventHook

from loadgen.run import guarded

__all__ = ["RequestBatcher", "batcher", "flush", "FLUSH_EVERY_S", "is_locust_statistics"]

FLUSH_EVERY_S = 0.1

_batchers: weakref.WeakKeyDictionary[Any, RequestBatcher] = weakref.WeakKeyDictionary()


class RequestBatcher:
    """Collects successful results and applies them to `environment.stats` in batches."""

    def __init__(self, environment, every_s: float = FLUSH_EVERY_S, clock=time.time):
        self.environment = environment
        self._fire = environment.events.request.fire
        self._pending: list[tuple[str, str, float, int]] = []
        self._clock = clock
        self._greenlet = guarded.spawn("stats_batcher", self._loop, every_s) if every_s else None
        # Before the runner sends or prints its final statistics: test_stop fires first.
        environment.events.test_stop.add_listener(lambda **_kw: self.flush())

    def report(
        self, request_type: str, name: str, response_time_ms: float, length: int, exception: BaseException | None
    ) -> None:
        if exception is None:
            self._pending.append((request_type, name, response_time_ms, length))
        else:
            self._fire(
                request_type=request_type,
                name=name,
                response_time=response_time_ms,
                response_length=length,
                exception=exception,
                context={},
            )

    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> None:
        """Apply every collected result to the statistics now."""
        if not self._pending:
            return
        batch = self._pending.copy()
        self._pending.clear()
        now = self._clock()
        groups: dict[tuple[str, str], tuple[list[float], list[int]]] = {}
        for request_type, name, response_time, length in batch:
            group = groups.get((name, request_type))
            if group is None:
                group = groups[(name, request_type)] = ([], [])
            group[0].append(response_time)
            group[1].append(length)
        stats = self.environment.stats  # looked up each time: a reset may replace its parts
        bucket = locust_stats.bucket_response_time  # replaceable in Locust, so looked up each time
        for (name, request_type), (times, lengths) in groups.items():
            add = locust_stats.StatsEntry(stats, name, request_type)
            add.num_requests = len(times)
            # Locust annotates these int but keeps float milliseconds in them itself, as we do.
            add.total_response_time = sum(times)  # type: ignore[arg-type]
            add.min_response_time = min(times)  # type: ignore[assignment]
            add.max_response_time = max(times)  # type: ignore[assignment]
            add.total_content_length = sum(lengths)
            add.response_times.update(Counter(map(bucket, times)))
            add.num_reqs_per_sec[int(now)] = len(times)
            add.last_request_timestamp = add.start_time = now
            stats.entries[(name, request_type)].extend(add)
            stats.total.extend(add)
        self._fire_listeners(batch)

    def _fire_listeners(self, batch: list[tuple[str, str, float, int]]) -> None:
        """The batch's `request` events, for every listener but Locust's own statistics."""
        # Locust keeps its listeners in EventHook._handlers and offers no public list of them.
        others = [h for h in self.environment.events.request._handlers if not is_locust_statistics(h)]
        if not others:
            return
        hook = EventHook()  # its fire() logs a listener's error and goes on, as the real event does
        for handler in others:
            hook.add_listener(handler)
        fire = hook.fire
        for request_type, name, response_time, length in batch:
            fire(
                request_type=request_type,
                name=name,
                response_time=response_time,
                response_length=length,
                response=None,
                context={"sojourn_batched": True},
                exception=None,
            )

    def close(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
        self.flush()

    def _loop(self, every_s: float) -> None:
        while True:
            gevent.sleep(every_s)
            self.flush()


def is_locust_statistics(handler) -> bool:
    """Whether `handler` is the listener Locust's runner adds to log requests into its statistics
    (locust.runners.Runner.__init__'s on_request)."""
    return getattr(handler, "__module__", None) == "locust.runners" and getattr(handler, "__qualname__", "").endswith(
        "__init__.<locals>.on_request"
    )


def batcher(environment) -> RequestBatcher:
    """The one batcher of `environment` (every user of a process shares it)."""
    b = _batchers.get(environment)
    if b is None:
        b = _batchers[environment] = RequestBatcher(environment)
    return b


def flush(environment) -> None:
    """Apply what `environment`'s batcher holds, if it has one (a master has none)."""
    b = _batchers.get(environment)
    if b is not None:
        b.flush()
