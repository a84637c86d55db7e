"""An in-memory ConsumerLink (loadgen.amqp.link) and RunContext for driving a Consumer in unit
tests: deliveries are handed to the consumer as the I/O loop would, settles are recorded, and the
run's clock is the test's. tests/integration/test_consumer_link.py holds pika's adapter to the
same behaviour on the broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gevent
from gevent.event import Event

from loadgen.trace import rows


class FakeStamps:
    __slots__ = ("kernel_ns",)

    def __init__(self) -> None:
        self.kernel_ns = 0


class FakeLink:
    """One connection and channel, in memory: records what the consumer asked of it."""

    def __init__(self, on_close: Callable[..., None], on_message: Callable[..., None], on_crossed: Callable[..., None]):
        self.on_close, self.on_message, self.on_crossed = on_close, on_message, on_crossed
        self.stamps: FakeStamps | None = FakeStamps()
        self.receive_stamp = "kernel"
        self.is_open = True
        self.calls: list[tuple] = []  # ("qos", prefetch, global), ("consume", queue, auto_ack), ("cancel",), ...
        self.acks: list[int] = []
        self.nacks: list[tuple[int, bool]] = []  # (tag, requeue)
        self._tag = 0

    # -- ConsumerLink --------------------------------------------------------
    def set_prefetch(self, prefetch: int, global_qos: bool) -> None:
        self.calls.append(("qos", prefetch, global_qos))

    def consume(self, queue: str, auto_ack: bool) -> None:
        self.calls.append(("consume", queue, auto_ack))

    def cancel(self, timeout_s: float) -> None:
        self.calls.append(("cancel",))

    def ack(self, delivery_tag: int, multiple: bool = False, now: bool = False) -> None:
        assert self.is_open, "an ack on a closed link"
        self.acks.append(delivery_tag)

    def nack(self, delivery_tag: int, multiple: bool = False, requeue: bool = True) -> None:
        assert self.is_open, "a nack on a closed link"
        self.nacks.append((delivery_tag, requeue))

    def send_now(self) -> None:
        pass

    def reading(self) -> bool:
        return False

    def close(self, timeout_s: float) -> None:
        self.calls.append(("close",))
        self.is_open = False

    def crash(self, timeout_s: float) -> bool:
        self.calls.append(("crash",))
        self.is_open = False
        return True

    # -- the broker's side ------------------------------------------------------
    def deliver(
        self,
        message_id: str,
        *,
        kernel_ns: int = 0,
        size: int = 100,
        priority: int | None = None,
        crossed: bool = False,
    ) -> int:
        """Hand the consumer one delivery, as the I/O loop does; its delivery tag."""
        self._tag += 1
        if self.stamps is not None:
            self.stamps.kernel_ns = kernel_ns
        headers = {"sojourn-id": message_id, "sojourn-pub-ns": 1}
        (self.on_crossed if crossed else self.on_message)(self, self._tag, False, headers, priority, size)
        return self._tag

    def settled(self) -> list[int]:
        return self.acks + [tag for tag, _ in self.nacks]


class FakeRun:
    """What a Consumer reads of its RunContext: the scenario, a clock the test sets (`t`, seconds
    since t0), the stop and drain events, counters, events and the rows written, by column name."""

    def __init__(self, scenario: Any):
        self.scenario = scenario
        self.run_id, self.worker = "unit", "host-1"
        self.t = 0.0
        self.drained, self.stopping = Event(), Event()
        self.counters = {"published": 0, "confirmed": 0, "delivered": 0, "acked": 0}
        self.events: list[tuple] = []
        self.deliveries: list[dict] = []
        self.writer = self  # the trace writer's append

    def append(self, kind: str, row: tuple) -> None:
        assert kind == "delivery", kind
        self.deliveries.append(dict(zip(rows.own_columns(kind), row)))

    def elapsed_s(self) -> float:
        return self.t

    def event(self, kind: str, source: str, name: str, value: float | None = None, detail: dict | None = None) -> None:
        self.events.append((kind, value, detail))

    def sleep_until(self, t_s: float, interrupt: Event | None = None) -> bool:
        gevent.sleep(0.001)  # the test moves the clock; the loop looks again
        return not (interrupt is not None and interrupt.is_set())


class Clock:
    """A wall clock in ns that the test sets (`now`), and that moves `step` at every reading."""

    def __init__(self, now: int = 1_000_000_000, step: int = 0):
        self.now, self.step = now, step

    def __call__(self) -> int:
        self.now += self.step
        return self.now
