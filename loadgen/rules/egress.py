"""A client buffer with egress priority classes that discard the oldest when full (the Solace model).

Pure logic, no I/O: the consumer (loadgen/users/consumer.py) holds one `EgressBuffer` per consumer
instance when its group has `egress` set (docs/scenarios.md, docs/discards.md).

- Messages go to a class by their AMQP priority; `pop()` serves the classes in strict
  priority order (highest class first), each oldest first.
- Depth is counted in 2,048-byte work units, `max(1, ceil(size / 2048))`: an empty body still
  occupies one unit, so a flood of empty messages can not grow a class without bound.
- A message is always admitted. Then, while its class holds more units than `max_depth_units`
  and more messages than `min_burst`, the class's oldest message is discarded; so the
  `min_burst` newest messages of a class stay whatever their size, and the new one is never the
  one discarded.
- After a discard the next message popped, of any class, carries the discard indication: as in
  Solace, it tells the application that something before it was lost on its session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar, cast

__all__ = [
    "WORK_UNIT_BYTES",
    "DEFAULT_MAX_DEPTH_UNITS",
    "DEFAULT_MIN_BURST",
    "PRIORITIES",
    "work_units",
    "ClassSpec",
    "Admitted",
    "Popped",
    "ClassStats",
    "EgressBuffer",
]

WORK_UNIT_BYTES = 2048
DEFAULT_MAX_DEPTH_UNITS = 20_000  # Solace's default max depth of a per-client priority queue
DEFAULT_MIN_BURST = 4  # Solace's default min-msg-burst of the direct queues
PRIORITIES = 256  # AMQP priority is an octet: 0..255

T = TypeVar("T")


def work_units(size_bytes: int) -> int:
    """Work units a message of `size_bytes` occupies: ceil(size / 2048), at least 1."""
    return max(1, -(-size_bytes // WORK_UNIT_BYTES))


class ClassSpec(NamedTuple):
    """An egress class: its name and the inclusive AMQP priority ranges it takes
    (the shape of loadgen.scenario.EgressSpec.classes)."""

    name: str
    ranges: tuple[tuple[int, int], ...]


class Admitted(NamedTuple, Generic[T]):
    """One buffered message: the item, its work units, its class and the class's depth
    (messages, units) right after it was admitted and the discards it caused were made."""

    item: T
    units: int
    egress_class: str
    length: int
    depth_units: int


class Popped(NamedTuple, Generic[T]):
    """What `pop()` hands out: the admitted message and whether it carries the discard indication."""

    admitted: Admitted[T]
    discard_indication: bool


class ClassStats(NamedTuple):
    """Per-class counters (Solace's per-queue statistics, plus discard indications)."""

    name: str
    length: int
    units: int
    high_water_messages: int
    high_water_units: int
    max_depth_units: int
    min_burst: int
    discards: int
    delivered: int
    discard_indications: int


class _Class(Generic[T]):
    __slots__ = ("delivered", "discards", "entries", "hwm_messages", "hwm_units", "indications", "name", "units")

    def __init__(self, name: str) -> None:
        self.name = name
        self.entries: deque[Admitted[T]] = deque()
        self.units = 0
        self.hwm_messages = self.hwm_units = 0
        self.discards = self.delivered = self.indications = 0


_NO_DISCARDS: tuple[()] = ()
_new = tuple.__new__  # NamedTuple instances without the generated __new__'s keyword handling: 3x cheaper


class EgressBuffer(Generic[T]):
    """Egress classes in strict priority order, each bounded in work units with a minimum burst.

    `classes` are listed highest first and together cover priorities 0..255 (a message without
    a priority counts as 0, as RabbitMQ's priority queues do); the loader checks that. `len()`
    and truthiness count the messages held, like the deque it replaces.
    """

    def __init__(
        self, classes: Sequence[tuple[str, Sequence[tuple[int, int]]]], max_depth_units: int, min_burst: int
    ) -> None:
        if max_depth_units < 1 or min_burst < 1:
            raise ValueError(f"max_depth_units and min_burst must be >= 1, got {max_depth_units}, {min_burst}")
        self.max_depth_units = max_depth_units
        self.min_burst = min_burst
        self._classes: list[_Class[T]] = [_Class(name) for name, _ in classes]
        # Every priority gets its class below, or __init__ raises: a built buffer holds no None.
        self._by_priority: list[_Class[T]] = cast("list[_Class[T]]", [None] * PRIORITIES)
        for (_, ranges), cls in zip(classes, self._classes):
            for low, high in ranges:
                for priority in range(low, high + 1):
                    if self._by_priority[priority] is not None:
                        raise ValueError(f"priority {priority} is in two classes")
                    self._by_priority[priority] = cls
        missing = [p for p, cls in enumerate(self._by_priority) if cls is None]
        if missing:
            raise ValueError(f"priorities {missing[0]}..{missing[-1]} are in no class")
        self._len = 0
        self._indication_pending = False

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def class_of(self, priority: int | None) -> str:
        return self._by_priority[priority or 0].name

    def append(self, item: T, priority: int | None, size_bytes: int) -> Sequence[Admitted[T]]:
        """Admit `item` to its class; return the messages discarded to make room for it, oldest
        first (the same empty tuple when none: the common case allocates nothing more)."""
        cls = self._by_priority[priority or 0]
        units = -(-size_bytes // WORK_UNIT_BYTES) or 1  # work_units(), inline: this runs in the I/O loop
        entries = cls.entries
        cls.units += units
        length = len(entries) + 1
        discarded: tuple[()] | list[Admitted[T]] = _NO_DISCARDS
        if cls.units > self.max_depth_units and length > self.min_burst:
            discarded = []
            while cls.units > self.max_depth_units and length > self.min_burst:
                oldest = entries.popleft()  # length > min_burst >= 1: the new one is not in it yet
                cls.units -= oldest.units
                length -= 1
                discarded.append(oldest)
            cls.discards += len(discarded)
            self._len -= len(discarded)
            self._indication_pending = True
        entries.append(_new(Admitted, (item, units, cls.name, length, cls.units)))
        self._len += 1
        if length > cls.hwm_messages:
            cls.hwm_messages = length
        if cls.units > cls.hwm_units:
            cls.hwm_units = cls.units
        return discarded

    def pop(self) -> Popped[T]:
        """The oldest message of the highest non-empty class; IndexError when empty."""
        for cls in self._classes:
            if cls.entries:
                break
        else:
            raise IndexError("pop from an empty EgressBuffer")
        admitted = cls.entries.popleft()
        cls.units -= admitted.units
        cls.delivered += 1
        self._len -= 1
        indication = self._indication_pending
        if indication:
            self._indication_pending = False
            cls.indications += 1
        return _new(Popped, (admitted, indication))

    def popleft(self) -> T:
        """`pop()`'s item alone, so code written for the deque this replaces keeps working."""
        return self.pop().admitted.item

    def stats(self) -> list[ClassStats]:
        """One entry per class, highest first."""
        return [
            ClassStats(
                c.name,
                len(c.entries),
                c.units,
                c.hwm_messages,
                c.hwm_units,
                self.max_depth_units,
                self.min_burst,
                c.discards,
                c.delivered,
                c.indications,
            )
            for c in self._classes
        ]
