"""The replay plan: which rows of a trace one producer instance publishes, and when.

Pure: no clock, no I/O. Times are seconds since the run's t0.

- window ``(w0, w1)`` selects the rows with ``w0 <= offset_s < w1`` (``w1`` None: to the end).
  A window that selects no row is a ValueError.
- A selected row's time in the run is ``((offset_s - w0) + loop * period) / speed``: the gap
  between ``w0`` and the first row is kept, and ``speed`` 2.0 replays twice as fast.
- The period of one pass is ``w1 - w0`` when ``w1`` is given, otherwise the span of the
  selected rows plus one mean gap (``span * n / (n - 1)``), so looping keeps the mean rate.
  Looping over a single row (or rows all at one time) needs ``w1``.
- ``loop``: False is one pass, an int N >= 1 is N passes, True is as many passes as fit in
  ``duration_s``. A row whose run time is ``>= duration_s`` is not planned: the run is over.
- ``split`` shares the rows among ``count`` producer instances (slots): ``"key"`` sends all
  rows of one routing key to one slot (sha256 of the key, stable across processes), so the
  order within a key is kept; ``"round_robin"`` deals row ``i`` to slot ``i mod count``
  (even load, order within a key not kept across slots). Either way the plans of slots
  ``0 .. count-1`` together hold every planned row exactly once.

One slot's items come in ascending ``intended_s`` (ties by row index), generated lazily.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from .source import ReplayTrace

__all__ = ["ReplayItem", "SPLITS", "plan", "expected_count", "slot_of"]

SPLITS = ("key", "round_robin")


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """One publish of the plan. `headers` is shared by every pass over the row: do not mutate it."""

    intended_s: float
    index: int
    loop: int
    size_bytes: int
    routing_key: str | None
    priority: int | None
    processing_ms: float | None
    headers: dict | None
    payload: bytes | None


def slot_of(index: int, routing_key: str | None, count: int, split: str) -> int:
    """The slot (0 .. count-1) that publishes row `index`; the same in every process."""
    _check_count(count)
    _check_split(split)
    if split == "round_robin":
        return index % count
    return _key_slot(routing_key, count)


def plan(
    trace: ReplayTrace,
    *,
    duration_s: float,
    slot: int,
    count: int,
    speed: float = 1.0,
    window: tuple[float, float | None] = (0.0, None),
    loop: bool | int = False,
    split: str = "key",
) -> Iterator[ReplayItem]:
    """The items slot `slot` of `count` publishes, in ascending intended_s; lazy, so loop=True is cheap."""
    _check_count(count)
    if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < count:
        raise ValueError(f"replay slot must be a whole number from 0 to {count - 1}, got {slot!r}")
    _check_split(split)
    shape = _Shape.of(trace, duration_s=duration_s, speed=speed, window=window, loop=loop)
    rows = _slot_rows(trace, shape, slot, count, split)  # validated now, not at the first next()
    return _items(rows, shape)


def expected_count(
    trace: ReplayTrace,
    *,
    duration_s: float,
    speed: float = 1.0,
    window: tuple[float, float | None] = (0.0, None),
    loop: bool | int = False,
) -> int:
    """How many items the plans of all slots hold together (every split gives the same total)."""
    shape = _Shape.of(trace, duration_s=duration_s, speed=speed, window=window, loop=loop)
    rel = shape.rel
    total = 0
    for k in shape.passes():
        if shape.time(rel[0], k) >= shape.duration_s:
            break
        if shape.time(rel[-1], k) < shape.duration_s:
            total += len(rel)
            continue
        # The pass the run ends in: count its rows that start in time, by the same formula as plan().
        total += sum(1 for r in rel if shape.time(r, k) < shape.duration_s)
        break
    return total


@dataclass(frozen=True)
class _Shape:
    """The validated timing of a plan: the selected rows [lo, hi) and how they map to run time."""

    lo: int
    hi: int
    rel: tuple[float, ...]  # offset_s - w0 of each selected row
    period: float
    speed: float
    duration_s: float
    max_passes: int | None  # None: as many as fit

    @classmethod
    def of(
        cls,
        trace: ReplayTrace,
        *,
        duration_s: float,
        speed: float,
        window: tuple[float, float | None],
        loop: bool | int,
    ) -> _Shape:
        if not _is_number(duration_s) or not duration_s > 0:  # also refuses NaN
            raise ValueError(f"replay duration_s must be a number > 0, got {duration_s!r}")
        if not _is_number(speed) or not 0 < speed < math.inf:
            raise ValueError(f"replay speed must be a number > 0, got {speed!r}")
        max_passes = _passes(loop)
        if max_passes is None and duration_s == math.inf:
            raise ValueError("replay loop: true needs a finite duration_s")
        w0, w1 = _check_window(window)
        offsets = trace.offset_s
        lo = bisect.bisect_left(offsets, w0)
        hi = len(offsets) if w1 is None else bisect.bisect_left(offsets, w1)
        if hi <= lo:
            span = f"[0, {offsets[-1]:g}] s" if offsets else "empty"
            raise ValueError(
                f"replay window [{w0:g}, {'end' if w1 is None else format(w1, 'g')}) selects "
                f"no rows of {trace.path} (its rows span {span})"
            )
        rel = tuple(t - w0 for t in offsets[lo:hi])
        n = hi - lo
        if w1 is not None:
            period = w1 - w0
        elif n > 1:
            period = (rel[-1] - rel[0]) * n / (n - 1)
        else:
            period = 0.0
        if period <= 0 and max_passes != 1:
            raise ValueError(
                f"replay window [{w0:g}, end) of {trace.path} selects a single row or rows all "
                f"at one time: give window end to loop a single row"
            )
        return cls(lo, hi, rel, period, float(speed), float(duration_s), max_passes)

    def time(self, rel: float, k: int) -> float:
        return (rel + k * self.period) / self.speed

    def passes(self) -> Iterator[int]:
        return itertools.count() if self.max_passes is None else iter(range(self.max_passes))


def _slot_rows(trace: ReplayTrace, shape: _Shape, slot: int, count: int, split: str) -> list[tuple]:
    """(rel, index, fields...) of the selected rows this slot publishes, in trace order."""
    cache: dict[str | None, int] = {}
    rows = []
    for i, rel in zip(range(shape.lo, shape.hi), shape.rel):
        key = trace.routing_key[i]
        if split == "round_robin":
            mine = i % count == slot
        else:
            if key not in cache:
                cache[key] = _key_slot(key, count)
            mine = cache[key] == slot
        if mine:
            rows.append(
                (
                    rel,
                    i,
                    trace.size_bytes[i],
                    key,
                    trace.priority[i],
                    trace.processing_ms[i],
                    trace.headers[i],
                    trace.payload[i],
                )
            )
    return rows


def _items(rows: list[tuple], shape: _Shape) -> Iterator[ReplayItem]:
    if not rows:
        return
    duration_s, period, speed = shape.duration_s, shape.period, shape.speed
    for k in shape.passes():
        for rel, index, size, key, priority, processing_ms, headers, payload in rows:
            t = (rel + k * period) / speed  # _Shape.time inlined: this loop runs per message
            if t >= duration_s:
                return  # later rows and passes are later still
            yield ReplayItem(t, index, k, size, key, priority, processing_ms, headers, payload)


def _key_slot(routing_key: str | None, count: int) -> int:
    # sha256, not hash(): str hashes are salted per process, and every process must agree.
    digest = hashlib.sha256((routing_key or "").encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % count


def _passes(loop: bool | int) -> int | None:
    if loop is True:
        return None
    if loop is False:
        return 1
    if isinstance(loop, int) and loop >= 1:
        return loop
    raise ValueError(f"replay loop must be false, true or a whole number >= 1, got {loop!r}")


def _check_window(window: tuple[float, float | None]) -> tuple[float, float | None]:
    try:
        w0, w1 = window
    except (TypeError, ValueError):
        raise ValueError(f"replay window must be (start_s, end_s or None), got {window!r}") from None
    if not _is_number(w0) or not 0 <= w0 < math.inf:
        raise ValueError(f"replay window start must be a number >= 0, got {w0!r}")
    if w1 is not None and (not _is_number(w1) or not w0 < w1 < math.inf):
        raise ValueError(f"replay window end must be a number > the start ({w0!r}), got {w1!r}")
    return float(w0), None if w1 is None else float(w1)


def _check_count(count: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"replay count (producer instances) must be a whole number >= 1, got {count!r}")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"replay split must be one of {', '.join(SPLITS)}, got {split!r}")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
