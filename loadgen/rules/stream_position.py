"""Where a stream consumer attaches: the group's `offset` the first time, then where it left off.

A stream keeps every message, and a subscription names where it starts reading (`x-stream-offset`).
So each subscription after the first (a prefetch change re-subscribes; a closed channel, a lost
connection or a phase bringing the consumer back rejoins) starts at the first offset this consumer
has not settled: the one after the last delivery received, or earlier when deliveries it held went
unsettled with their link. Before anything was received, a group that reads from `next` or `last`
rejoins at the second it first attached, so that what was published meanwhile is not skipped. When
the stream was deleted and declared again, the offsets start over: the group's own `offset` again.

Pure: the caller gives the time, and turns `reads_from` into the AMQP value
(loadgen.scenario.streams.consume_offset).
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["StreamPosition"]


class StreamPosition:
    __slots__ = ("_attached_at", "_next")

    def __init__(self) -> None:
        self._next: int | None = None  # the first offset not yet received, or rewound to an unsettled one
        self._attached_at: str | None = None  # the first attach, for next/last: an ISO timestamp (seconds)

    def reads_from(self, offset: str | int | None, now_ns: int) -> str | int:
        """Where the next subscription starts, given the group's `offset` (None: next)."""
        if self._next is not None:
            return self._next
        if self._attached_at is not None:  # subscribed before, received nothing since
            return self._attached_at
        spec = "next" if offset is None else offset
        if spec in ("next", "last"):
            stamp = _dt.datetime.fromtimestamp(now_ns // 1_000_000_000, tz=_dt.timezone.utc)
            self._attached_at = stamp.isoformat().replace("+00:00", "Z")
        return spec

    def received(self, offset: int) -> None:
        """A delivery at `offset` arrived (in order on one subscription)."""
        self._next = offset + 1

    def unsettled(self, offset: int) -> None:
        """A delivery at `offset` went unsettled with its link: read it again from there."""
        self._next = offset if self._next is None else min(self._next, offset)

    def start_over(self) -> None:
        """The stream was deleted and declared again: its offsets mean nothing any more."""
        self._next = None
        self._attached_at = None
